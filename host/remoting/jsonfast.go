package remoting

import (
	"bytes"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// This file holds the hand-written fast path for JSON command headers.
//
// fastDecodeJSONHeader handles the headers real clients send: one JSON
// object whose known fields appear at most once and hold the value types
// encoding/json would accept for them. Whenever it meets anything it does not
// handle exactly as encoding/json (via decodeJSONHeaderStd) would — a
// duplicate or case-folded field name, a string with a lone surrogate or
// invalid UTF-8, a number that is not a plain integer in range, deep nesting,
// a top-level value that is not an object, or any syntax error — it gives up
// and the caller decodes with encoding/json instead. Correctness therefore
// never depends on the fast path: it either produces exactly what the
// encoding/json path would produce, or declines.

// Bits of fastParser.seen, one per known top-level field.
const (
	seenCode = 1 << iota
	seenLanguage
	seenVersion
	seenOpaque
	seenFlag
	seenRemark
	seenExtFields
)

// maxFastDepth bounds the nesting the fast path skips over; deeper values
// fall back to encoding/json (which has its own, larger limit).
const maxFastDepth = 64

type fastParser struct {
	b []byte
	s string // b as one string: unescaped string values are substrings of it
	i int
}

// fastDecodeJSONHeader decodes h as decodeJSONHeaderStd would. ok is false
// when the fast path declines; the caller must then use the standard path.
func fastDecodeJSONHeader(h []byte) (c *Command, ok bool) {
	p := fastParser{b: h, s: string(h)}
	p.ws()
	if !p.eat('{') {
		return nil, false
	}
	c = &Command{SerializeType: SerializeJSON}
	seen := 0
	p.ws()
	if p.eat('}') {
		p.ws()
		return c, p.i == len(p.b)
	}
	for {
		p.ws()
		key, ok := p.str()
		if !ok {
			return nil, false
		}
		p.ws()
		if !p.eat(':') {
			return nil, false
		}
		p.ws()
		var bit int
		switch string(key) {
		case "code":
			bit = seenCode
			n, ok := p.integer(-1<<15, 1<<15-1)
			if !ok {
				return nil, false
			}
			c.Code = int16(n)
		case "language":
			bit = seenLanguage
			s, _, ok := p.lenient()
			if !ok {
				return nil, false
			}
			c.Language = s
		case "version":
			bit = seenVersion
			if !p.int32Into(&c.Version) {
				return nil, false
			}
		case "opaque":
			bit = seenOpaque
			if !p.int32Into(&c.Opaque) {
				return nil, false
			}
		case "flag":
			bit = seenFlag
			if !p.int32Into(&c.Flag) {
				return nil, false
			}
		case "remark":
			bit = seenRemark
			if p.lit("null") {
				break
			}
			s, ok := p.strString()
			if !ok {
				return nil, false
			}
			c.Remark = s
		case "extFields":
			bit = seenExtFields
			if p.lit("null") {
				break
			}
			m, ok := p.extFields()
			if !ok {
				return nil, false
			}
			c.ExtFields = m
		default:
			// encoding/json matches field names case-insensitively
			// (with Unicode folding); leave any such key to it.
			if foldsToKnownField(key) {
				return nil, false
			}
			if !p.skip(0) {
				return nil, false
			}
		}
		if bit != 0 {
			if seen&bit != 0 {
				return nil, false // duplicate field: leave merging rules to encoding/json
			}
			seen |= bit
		}
		p.ws()
		if p.eat(',') {
			continue
		}
		if !p.eat('}') {
			return nil, false
		}
		p.ws()
		return c, p.i == len(p.b)
	}
}

var knownFields = [...]string{"code", "language", "version", "opaque", "flag", "remark", "extFields"}

// foldsToKnownField reports whether encoding/json might match key to one of
// the header's fields: any non-ASCII key (Unicode folding, e.g. the Kelvin
// sign folds to 'k') or an ASCII case-insensitive match.
func foldsToKnownField(key []byte) bool {
	for _, b := range key {
		if b >= utf8.RuneSelf {
			return true
		}
	}
	for _, f := range knownFields {
		if len(f) == len(key) && strings.EqualFold(f, string(key)) {
			return true
		}
	}
	return false
}

// extFields parses an object of extension fields into Fields, each key and
// value a substring of the header where no escape forces a copy, in
// arrival order; a repeated key is appended again, and Fields.Get returns
// the last, as decodeJSONHeaderStd's map does. It declines on a null value
// (which removes the key in decodeJSONHeaderStd: deleting here would make
// a header of many nulls quadratic).
func (p *fastParser) extFields() (Fields, bool) {
	if !p.eat('{') {
		return nil, false
	}
	p.ws()
	if p.eat('}') {
		return nil, true
	}
	f := make(Fields, 0, 16) // a send header has 13
	for {
		p.ws()
		key, ok := p.strString()
		if !ok {
			return nil, false
		}
		p.ws()
		if !p.eat(':') {
			return nil, false
		}
		p.ws()
		v, null, ok := p.lenient()
		if !ok || null {
			return nil, false
		}
		f = append(f, Field{key, v})
		p.ws()
		if p.eat(',') {
			continue
		}
		if !p.eat('}') {
			return nil, false
		}
		return f, true
	}
}

// lenient reads any JSON value and turns it into a string as
// jsonLenientString does: a string is unquoted, null gives ("", true), any
// other value is its raw text.
func (p *fastParser) lenient() (s string, null, ok bool) {
	if p.i >= len(p.b) {
		return "", false, false
	}
	switch p.b[p.i] {
	case '"':
		v, ok := p.strString()
		if !ok {
			return "", false, false
		}
		return internValue(v), false, true
	case 'n':
		if p.lit("null") {
			return "", true, true
		}
		return "", false, false
	}
	start := p.i
	if !p.skip(0) {
		return "", false, false
	}
	return p.s[start:p.i], false, true
}

// internValue returns the shared copy of the language names and one-digit
// values that fill most headers, so that values kept long (in registries)
// do not pin the header they were cut from.
func internValue(v string) string {
	switch v {
	case "GO":
		return "GO"
	case "JAVA":
		return "JAVA"
	case "true":
		return "true"
	case "false":
		return "false"
	}
	if len(v) == 1 && v[0] >= '0' && v[0] <= '9' {
		return digitStrings[v[0]-'0']
	}
	return v
}

var digitStrings = [10]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

func (p *fastParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *fastParser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// lit consumes the literal s (true, false, null) if it is next.
func (p *fastParser) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// integer reads a JSON number that is a plain integer within [lo, hi], or
// null (which leaves the field at zero, as encoding/json does). Fractions,
// exponents and out-of-range values decline.
func (p *fastParser) integer(lo, hi int64) (int64, bool) {
	if p.lit("null") {
		return 0, true
	}
	neg := p.eat('-')
	if p.i >= len(p.b) {
		return 0, false
	}
	var n int64
	if p.b[p.i] == '0' {
		p.i++
	} else {
		digits := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			if digits == 12 {
				return 0, false
			}
			n = n*10 + int64(p.b[p.i]-'0')
			p.i++
			digits++
		}
		if digits == 0 {
			return 0, false
		}
	}
	if p.i < len(p.b) {
		switch p.b[p.i] {
		case '.', 'e', 'E', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			return 0, false
		}
	}
	if neg {
		n = -n
	}
	if n < lo || n > hi {
		return 0, false
	}
	return n, true
}

// int32Into reads an integer field (see integer) into *dst.
func (p *fastParser) int32Into(dst *int32) bool {
	n, ok := p.integer(-1<<31, 1<<31-1)
	*dst = int32(n)
	return ok
}

// number skips a JSON number, validating its grammar.
func (p *fastParser) number() bool {
	p.eat('-')
	if p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '0':
		p.i++
	case c >= '1' && c <= '9':
		p.digits()
	default:
		return false
	}
	if p.eat('.') {
		if p.digits() == 0 {
			return false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if !p.eat('+') {
			p.eat('-')
		}
		if p.digits() == 0 {
			return false
		}
	}
	return true
}

func (p *fastParser) digits() int {
	n := 0
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

// skip skips one JSON value, validating it.
func (p *fastParser) skip(depth int) bool {
	if depth > maxFastDepth || p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '{':
		p.i++
		p.ws()
		if p.eat('}') {
			return true
		}
		for {
			p.ws()
			if _, ok := p.str(); !ok {
				return false
			}
			p.ws()
			if !p.eat(':') {
				return false
			}
			p.ws()
			if !p.skip(depth + 1) {
				return false
			}
			p.ws()
			if p.eat(',') {
				continue
			}
			return p.eat('}')
		}
	case c == '[':
		p.i++
		p.ws()
		if p.eat(']') {
			return true
		}
		for {
			p.ws()
			if !p.skip(depth + 1) {
				return false
			}
			p.ws()
			if p.eat(',') {
				continue
			}
			return p.eat(']')
		}
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	default:
		return p.number()
	}
}

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
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(out) {
				return nil, false
			}
			return out, true
		case c < 0x20:
			return nil, false
		case c != '\\':
			out = append(out, c)
			p.i++
			continue
		}
		// Backslash.
		if p.i+1 >= len(p.b) {
			return nil, false
		}
		e := p.b[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return nil, false
			}
			if r >= 0xDC00 && r <= 0xDFFF {
				return nil, false // lone low surrogate
			}
			if r >= 0xD800 && r <= 0xDBFF {
				if p.i+1 >= len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
					return nil, false
				}
				p.i += 2
				lo, ok := p.hex4()
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return nil, false
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return nil, false
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

// strPlain[b] is true for the bytes a JSON string holds as themselves:
// printable ASCII but '"' and '\\'. The decoder (str) skips them without a
// closer look, the encoder (appendJSONString) copies them verbatim.
var strPlain = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()
