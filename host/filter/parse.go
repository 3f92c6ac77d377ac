package filter

import (
	"math"
	"strconv"
)

// maxDepth bounds how deeply parentheses and unary operators may nest, so
// that compiling cannot exhaust the stack. (Chains of binary operators are
// parsed iteratively.)
const maxDepth = 1000

// parser is a recursive-descent parser over a lexer with one token of
// look-ahead (two for IS NOT NULL and NOT BETWEEN/IN/CONTAINS).
type parser struct {
	lex   lexer
	tok   token // the current token
	ahead []token
	depth int
}

// advance moves to the next token.
func (p *parser) advance() error {
	if len(p.ahead) > 0 {
		p.tok, p.ahead = p.ahead[0], p.ahead[1:]
		return nil
	}
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

// peek returns the token after the current one.
func (p *parser) peek() (token, error) {
	if len(p.ahead) == 0 {
		t, err := p.lex.next()
		if err != nil {
			return token{}, err
		}
		p.ahead = append(p.ahead, t)
	}
	return p.ahead[0], nil
}

func (p *parser) isKeyword(word string) bool { return p.tok.kind == tokKeyword && p.tok.text == word }
func (p *parser) isOp(op string) bool        { return p.tok.kind == tokOp && p.tok.text == op }

// expect consumes the operator op or fails.
func (p *parser) expect(op string) error {
	if !p.isOp(op) {
		return p.unexpected(strconv.Quote(op))
	}
	return p.advance()
}

// unexpected is the error for the current token where want was expected.
func (p *parser) unexpected(want string) error {
	if p.tok.kind == tokEOF {
		return errorAt(p.tok.pos, "unexpected end of expression, want %s", want)
	}
	return errorAt(p.tok.pos, "unexpected %s, want %s", describe(p.tok), want)
}

func describe(t token) string {
	switch t.kind {
	case tokString:
		return "string " + value{k: kString, s: t.text}.String()
	case tokIdent:
		return "identifier " + t.text
	}
	return strconv.Quote(t.text)
}

// nest counts one more level of nesting at pos; the caller undoes it
// (depth--) when the nested part is parsed.
func (p *parser) nest(pos int) error {
	p.depth++
	if p.depth > maxDepth {
		return errorAt(pos, "expression nests deeper than %d levels", maxDepth)
	}
	return nil
}

// selector is the whole expression: a condition and nothing after it.
func (p *parser) selector() (node, error) {
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, p.unexpected("an operator or the end of the expression")
	}
	return asCondition(n, 0)
}

func (p *parser) or() (node, error)  { return p.chain("OR", p.and) }
func (p *parser) and() (node, error) { return p.chain("AND", p.equality) }

// chain parses operand { keyword operand } (keyword AND or OR), left to
// right, both sides of each taken as conditions.
func (p *parser) chain(keyword string, operand func() (node, error)) (node, error) {
	l, err := operand()
	for err == nil && p.isKeyword(keyword) {
		pos := p.tok.pos
		var r node
		if err = p.advance(); err == nil {
			r, err = operand()
		}
		if err == nil {
			l, err = logic(l, r, pos, keyword == "AND")
		}
	}
	return l, err
}

func logic(l, r node, pos int, and bool) (node, error) {
	l, err := asCondition(l, pos)
	if err != nil {
		return nil, err
	}
	if r, err = asCondition(r, pos); err != nil {
		return nil, err
	}
	if and {
		return &andNode{l, r}, nil
	}
	return &orNode{l, r}, nil
}

// equality is comparison { (= | <>) comparison | IS [NOT] NULL }.
func (p *parser) equality() (node, error) {
	l, err := p.comparison()
	for err == nil {
		pos := p.tok.pos
		switch {
		case p.isOp("=") || p.isOp("<>"):
			ne := p.isOp("<>")
			if err = p.advance(); err != nil {
				return nil, err
			}
			var r node
			if r, err = p.comparison(); err != nil {
				return nil, err
			}
			l, err = equal(l, r, pos, ne)
		case p.isKeyword("IS"):
			if err = p.advance(); err != nil {
				return nil, err
			}
			not := p.isKeyword("NOT")
			if not {
				if err = p.advance(); err != nil {
					return nil, err
				}
			}
			if !p.isKeyword("NULL") {
				return nil, p.unexpected("NULL")
			}
			err = p.advance()
			l = &eqNode{l, &constNode{null}}
			if not {
				l = &notNode{l}
			}
		default:
			return l, nil
		}
	}
	return nil, err
}

// equal builds l = r (or l <> r) after RocketMQ's checks: neither side is
// the NULL constant, and TRUE or FALSE is not compared with another kind
// of constant.
func equal(l, r node, pos int, ne bool) (node, error) {
	for _, side := range [...]node{l, r} {
		if c, ok := side.(*constNode); ok && c.v.k == kNull {
			return nil, errorAt(pos, "NULL cannot be compared with = or <> (use IS NULL)")
		}
	}
	lc, lok := l.(*constNode)
	rc, rok := r.(*constNode)
	if lok && rok && lc.isBool() && !rc.isBool() {
		return nil, errorAt(pos, "%s cannot be compared with %s", lc, rc)
	}
	var n node = &eqNode{l, r}
	if ne {
		n = &notNode{n}
	}
	return n, nil
}

// comparison is unary followed by any number of > >= < <= [NOT] BETWEEN,
// [NOT] IN, [NOT] CONTAINS, STARTSWITH or ENDSWITH.
func (p *parser) comparison() (node, error) {
	l, err := p.unary()
	for err == nil {
		pos := p.tok.pos
		not := false
		if p.isKeyword("NOT") {
			next, err := p.peek()
			if err != nil {
				return nil, err
			}
			if next.kind != tokKeyword || !postfixAfterNot[next.text] {
				return l, nil
			}
			not = true
			if err = p.advance(); err != nil {
				return nil, err
			}
		}
		switch {
		case !not && p.tok.kind == tokOp && orderOps[p.tok.text]:
			op := p.tok.text
			var r node
			if err = p.advance(); err == nil {
				r, err = p.unary()
			}
			if err == nil {
				l, err = order(op, l, r, pos)
			}
		case p.isKeyword("BETWEEN"):
			l, err = p.between(l, pos, not)
		case p.isKeyword("IN"):
			l, err = p.in(l, pos, not)
		case p.tok.kind == tokKeyword && stringOps[p.tok.text]:
			op := p.tok.text
			var s string
			if err = p.advance(); err == nil {
				s, err = p.stringLiteral()
			}
			l = &strNode{op: op, x: l, search: s, not: not}
		default:
			return l, nil
		}
	}
	return nil, err
}

var (
	orderOps        = map[string]bool{">": true, ">=": true, "<": true, "<=": true}
	stringOps       = map[string]bool{"CONTAINS": true, "STARTSWITH": true, "ENDSWITH": true}
	postfixAfterNot = map[string]bool{"BETWEEN": true, "IN": true, "CONTAINS": true, "STARTSWITH": true, "ENDSWITH": true}
)

// order builds l op r after RocketMQ's check that neither side is a
// non-numeric constant or a condition.
func order(op string, l, r node, pos int) (node, error) {
	for _, side := range [...]node{l, r} {
		if c, ok := side.(*constNode); ok {
			if !c.v.isNumber() {
				return nil, errorAt(pos, "value %s cannot be compared with %s", c, op)
			}
		} else if isCondition(side) {
			return nil, errorAt(pos, "value %s cannot be compared with %s", side, op)
		}
	}
	return &cmpNode{op: op, l: l, r: r}, nil
}

// between parses "BETWEEN low AND high" after l: l >= low AND l <= high,
// or, with NOT, l < low OR l > high. Constant bounds must not be NULL and
// must be in order.
func (p *parser) between(l node, pos int, not bool) (node, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	low, err := p.unary()
	if err != nil {
		return nil, err
	}
	if !p.isKeyword("AND") {
		return nil, p.unexpected("AND")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	high, err := p.unary()
	if err != nil {
		return nil, err
	}
	if not {
		lt, err := order("<", l, low, pos)
		if err != nil {
			return nil, err
		}
		gt, err := order(">", l, high, pos)
		if err != nil {
			return nil, err
		}
		return &orNode{lt, gt}, nil
	}
	lc, lok := low.(*constNode)
	hc, hok := high.(*constNode)
	if lok && hok {
		if lc.v.k == kNull || hc.v.k == kNull {
			return nil, errorAt(pos, "the bounds of BETWEEN cannot be NULL")
		}
		if c, err := compareValues(hc.v, lc.v); err != nil || c < 0 {
			return nil, errorAt(pos, "the bounds of BETWEEN are out of order: %s must be less than or equal to %s", lc, hc)
		}
	}
	ge, err := order(">=", l, low, pos)
	if err != nil {
		return nil, err
	}
	le, err := order("<=", l, high, pos)
	if err != nil {
		return nil, err
	}
	return &andNode{ge, le}, nil
}

// in parses "IN ('a', 'b', ...)" after l, which must be a property.
func (p *parser) in(l node, pos int, not bool) (node, error) {
	prop, ok := l.(*propNode)
	if !ok {
		return nil, errorAt(pos, "IN needs a property on its left, got %s", l)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if err := p.expect("("); err != nil {
		return nil, err
	}
	set := make(map[string]struct{})
	for {
		s, err := p.stringLiteral()
		if err != nil {
			return nil, err
		}
		set[s] = struct{}{}
		if !p.isOp(",") {
			break
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if err := p.expect(")"); err != nil {
		return nil, err
	}
	return &inNode{prop: prop, set: set, not: not}, nil
}

func (p *parser) stringLiteral() (string, error) {
	if p.tok.kind != tokString {
		return "", p.unexpected("a string literal")
	}
	s := p.tok.text
	return s, p.advance()
}

// unary is + unary, - unary, NOT unary, or a primary.
func (p *parser) unary() (node, error) {
	pos := p.tok.pos
	switch {
	case p.isOp("+"), p.isOp("-"), p.isKeyword("NOT"):
		op := p.tok.text
		if err := p.nest(pos); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		p.depth--
		switch op {
		case "+":
			return x, nil
		case "-":
			return &negNode{x}, nil
		}
		if x, err = asCondition(x, pos); err != nil {
			return nil, err
		}
		return &notNode{x}, nil
	}
	return p.primary()
}

// primary is a literal, a property or a parenthesized expression.
func (p *parser) primary() (node, error) {
	t := p.tok
	switch {
	case t.kind == tokIdent:
		return &propNode{t.text}, p.advance()
	case t.kind == tokString:
		return &constNode{value{k: kString, s: t.text}}, p.advance()
	case t.kind == tokInt:
		v, err := intLiteral(t)
		if err != nil {
			return nil, err
		}
		return &constNode{v}, p.advance()
	case t.kind == tokFloat:
		v, err := floatLiteral(t)
		if err != nil {
			return nil, err
		}
		return &constNode{v}, p.advance()
	case t.kind == tokKeyword && (t.text == "TRUE" || t.text == "FALSE"):
		return &constNode{boolValue(t.text == "TRUE")}, p.advance()
	case t.kind == tokKeyword && t.text == "NULL":
		return &constNode{null}, p.advance()
	case p.isOp("("):
		if err := p.nest(t.pos); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		p.depth--
		return n, p.expect(")")
	}
	return nil, p.unexpected("a literal, a property or (")
}

// intLiteral is an Integer when it fits in 32 bits, else a Long; beyond 64
// bits it is an error.
func intLiteral(t token) (value, error) {
	text := t.text
	if last := text[len(text)-1]; last == 'l' || last == 'L' {
		text = text[:len(text)-1]
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return null, errorAt(t.pos, "integer %s is out of the range of a Long", t.text)
	}
	if math.MinInt32 <= n && n <= math.MaxInt32 {
		return value{k: kInt, n: n}, nil
	}
	return value{k: kLong, n: n}, nil
}

// floatLiteral is a Double, which RocketMQ requires to be finite and not
// below the smallest positive Double (so a literal 0.0 is refused).
func floatLiteral(t token) (value, error) {
	f, ok := javaParseDouble(t.text)
	switch {
	case !ok:
		return null, errorAt(t.pos, "malformed number %s", t.text)
	case math.IsInf(f, 0):
		return null, errorAt(t.pos, "%s is greater than the largest Double", t.text)
	case f < math.SmallestNonzeroFloat64:
		return null, errorAt(t.pos, "%s is less than the smallest positive Double", t.text)
	}
	return value{k: kDouble, f: f}, nil
}

// asCondition returns n as a condition: n itself if it is one, a property
// cast to a condition, or an error for anything else (a literal, a
// negation).
func asCondition(n node, pos int) (node, error) {
	if isCondition(n) {
		return n, nil
	}
	if _, ok := n.(*propNode); ok {
		return &castNode{n}, nil
	}
	return nil, errorAt(pos, "%s is not a condition (it will not result in a boolean value)", n)
}
