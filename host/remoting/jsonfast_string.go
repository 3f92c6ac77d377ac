package remoting

import (
	"bytes"
	"unicode/utf8"
	"unsafe"
)

// str reads a JSON string and returns its unescaped bytes. Without escapes
// the result aliases the input (callers copy with string()). It declines on
// invalid UTF-8 and on surrogate escapes that are not a proper pair, whose
// replacement rules it leaves to encoding/json.
func (p *fastParser) str() ([]byte, bool) {
	if !p.eat('"') {
		return nil, false
	}
	start := p.i
	ascii := true
	for p.i < len(p.b) {
		// Skip the plain ASCII run in a tight loop; the switch below sees
		// only quotes, backslashes, control bytes and non-ASCII.
		for p.i < len(p.b) && strPlain[p.b[p.i]] {
			p.i++
		}
		if p.i >= len(p.b) {
			break
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			return s, true
		case c == '\\':
			return p.strEscaped(start)
		case c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		p.i++
	}
	return nil, false
}

// strString is str returning a string: a substring of p.s without
// escapes, the unescaped copy (not copied again) with them.
func (p *fastParser) strString() (string, bool) {
	start := p.i + 1
	b, ok := p.str()
	if !ok {
		return "", false
	}
	if len(b) > 0 && &b[0] != &p.b[start] {
		return unsafe.String(&b[0], len(b)), true // strEscaped's own buffer
	}
	if len(b) == 0 {
		return "", true
	}
	return p.s[start : start+len(b)], true
}

// strEscaped continues str from the first backslash, copying into a new
// buffer.
func (p *fastParser) strEscaped(start int) ([]byte, bool) {
	// Room for everything up to the next quote: the unescaped string is
	// no longer than its escaped form, so this holds the whole string
	// unless that quote is itself escaped (then append grows it).
	// A header's properties carry an escape per key and value.
	n := bytes.IndexByte(p.b[p.i:], '"')
	if n < 0 {
		n = len(p.b) - p.i
	}
	out := make([]byte, 0, p.i-start+n)
	out = append(out, p.b[start:p.i]...)
	for p.i < len(p.b) {
		run := p.i
		for p.i < len(p.b) && strPlain[p.b[p.i]] {
			p.i++
		}
		out = append(out, p.b[run:p.i]...)
		if p.i >= len(p.b) {
			break
		}
		switch c := p.b[p.i]; {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return nil, false
			}
			return out, true
		case c < 0x20:
			return nil, false
		case c == '\\':
			var ok bool
			if out, ok = p.escape(out); !ok {
				return nil, false
			}
		default:
			out = append(out, c)
			p.i++
		}
	}
	return nil, false
}

// escape appends the character of the escape sequence whose backslash is
// next to out. It declines on an unknown escape and on a \u surrogate that
// is not a proper pair.
func (p *fastParser) escape(out []byte) ([]byte, bool) {
	if p.i+1 >= len(p.b) {
		return nil, false
	}
	e := p.b[p.i+1]
	p.i += 2
	switch e {
	case '"', '\\', '/':
		return append(out, e), true
	case 'b':
		return append(out, '\b'), true
	case 'f':
		return append(out, '\f'), true
	case 'n':
		return append(out, '\n'), true
	case 'r':
		return append(out, '\r'), true
	case 't':
		return append(out, '\t'), true
	case 'u':
		r, ok := p.escapedRune()
		if !ok {
			return nil, false
		}
		return utf8.AppendRune(out, r), true
	}
	return nil, false
}

// escapedRune reads the four hex digits after \u, and the low half after
// them when they are a high surrogate.
func (p *fastParser) escapedRune() (rune, bool) {
	r, ok := p.hex4()
	if !ok {
		return 0, false
	}
	if r >= 0xDC00 && r <= 0xDFFF {
		return 0, false // lone low surrogate
	}
	if r < 0xD800 || r > 0xDBFF {
		return r, true
	}
	if p.i+1 >= len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
		return 0, false
	}
	p.i += 2
	lo, ok := p.hex4()
	if !ok || lo < 0xDC00 || lo > 0xDFFF {
		return 0, false
	}
	return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), true
}

func (p *fastParser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}
