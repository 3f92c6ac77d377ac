package remoting

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

// open consumes the opening byte of an object or array and the whitespace
// after it; more reports whether a member or element follows (false when
// the closing byte came at once and was consumed too).
func (p *fastParser) open(opening, closing byte) (more, ok bool) {
	if !p.eat(opening) {
		return false, false
	}
	p.ws()
	return !p.eat(closing), true
}

// colon consumes the colon between an object member's key and value, with
// the whitespace around it.
func (p *fastParser) colon() bool {
	p.ws()
	if !p.eat(':') {
		return false
	}
	p.ws()
	return true
}

// next consumes what follows a member or element of an object or array:
// a comma and the whitespace after it (more is true), or the closing byte
// (more is false). Anything else is a syntax error.
func (p *fastParser) next(closing byte) (more, ok bool) {
	p.ws()
	if p.eat(',') {
		p.ws()
		return true, true
	}
	return false, p.eat(closing)
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
		more, ok := p.open('{', '}')
		for ok && more {
			if _, ok = p.str(); !ok || !p.colon() || !p.skip(depth+1) {
				return false
			}
			more, ok = p.next('}')
		}
		return ok
	case c == '[':
		more, ok := p.open('[', ']')
		for ok && more {
			if !p.skip(depth + 1) {
				return false
			}
			more, ok = p.next(']')
		}
		return ok
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
