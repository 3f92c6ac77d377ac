package filter

import "strings"

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tokEOF tokKind = iota
	tokIdent
	tokInt    // decimal integer literal, optional L suffix
	tokFloat  // floating-point literal
	tokString // single-quoted string literal (text is the decoded value)
	tokOp     // = <> > >= < <= ( ) , + -
	tokKeyword
)

// keywords are the reserved words, upper-cased.
var keywords = map[string]bool{
	"NOT": true, "AND": true, "OR": true, "BETWEEN": true, "IN": true,
	"TRUE": true, "FALSE": true, "NULL": true, "IS": true,
	"CONTAINS": true, "STARTSWITH": true, "ENDSWITH": true,
}

// token is one lexical token. For a keyword text is upper-cased; for a
// string literal it is the decoded value; otherwise it is the source text.
type token struct {
	kind tokKind
	text string
	pos  int // byte offset in the expression
}

// lexer splits an expression into tokens.
type lexer struct {
	src string
	pos int
}

// next returns the next token, or an error for text that is no token.
func (l *lexer) next() (token, error) {
	if err := l.skip(); err != nil {
		return token{}, err
	}
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	c := l.src[l.pos]
	switch {
	case isIdentStart(c):
		for l.pos < len(l.src) && isIdentPart(l.src[l.pos]) {
			l.pos++
		}
		word := l.src[start:l.pos]
		if up := strings.ToUpper(word); keywords[up] {
			return token{kind: tokKeyword, text: up, pos: start}, nil
		}
		return token{kind: tokIdent, text: word, pos: start}, nil
	case isDigit(c) || c == '.' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]):
		return l.number()
	case c == '\'':
		return l.str()
	}
	for _, op := range [...]string{"<>", ">=", "<=", "=", ">", "<", "(", ")", ",", "+", "-"} {
		if strings.HasPrefix(l.src[l.pos:], op) {
			l.pos += len(op)
			return token{kind: tokOp, text: op, pos: start}, nil
		}
	}
	return token{}, errorAt(start, "unexpected character %q", rune(c))
}

// skip passes white space and comments. A "--" comment must end with a
// line break (as in RocketMQ's grammar); without one the dashes are read
// as minus signs.
func (l *lexer) skip() error {
	for l.pos < len(l.src) {
		rest := l.src[l.pos:]
		switch {
		case strings.IndexByte(" \t\n\r\f", rest[0]) >= 0:
			l.pos++
		case strings.HasPrefix(rest, "--") && strings.ContainsAny(rest, "\n\r"):
			l.pos += strings.IndexAny(rest, "\n\r") + 1
		case strings.HasPrefix(rest, "/*"):
			end := strings.Index(rest[2:], "*/")
			if end < 0 {
				return errorAt(l.pos, "unterminated /* comment")
			}
			l.pos += 2 + end + 2
		default:
			return nil
		}
	}
	return nil
}

// number reads an integer ("0", or a decimal without a leading zero, with
// an optional L) or a float (5.5, 5., .5, 5E10, 5.5E-3), the longest that
// matches.
func (l *lexer) number() (token, error) {
	start := l.pos
	digits := func() int {
		n := 0
		for l.pos < len(l.src) && isDigit(l.src[l.pos]) {
			l.pos++
			n++
		}
		return n
	}
	intDigits := digits()
	isFloat := false
	if l.pos < len(l.src) && l.src[l.pos] == '.' {
		l.pos++
		digits()
		isFloat = true
	}
	if l.exponent() {
		isFloat = true
	}
	if isFloat {
		return token{kind: tokFloat, text: l.src[start:l.pos], pos: start}, nil
	}
	if intDigits > 1 && l.src[start] == '0' {
		// "0" is a literal on its own: "007" is three of them.
		l.pos = start + 1
	} else if l.pos < len(l.src) && (l.src[l.pos] == 'l' || l.src[l.pos] == 'L') && l.src[start] != '0' {
		l.pos++
	}
	return token{kind: tokInt, text: l.src[start:l.pos], pos: start}, nil
}

// exponent reads an exponent (E, an optional sign, digits) if one follows.
func (l *lexer) exponent() bool {
	p := l.pos
	if p >= len(l.src) || (l.src[p] != 'e' && l.src[p] != 'E') {
		return false
	}
	p++
	if p < len(l.src) && (l.src[p] == '+' || l.src[p] == '-') {
		p++
	}
	if p >= len(l.src) || !isDigit(l.src[p]) {
		return false
	}
	for p < len(l.src) && isDigit(l.src[p]) {
		p++
	}
	l.pos = p
	return true
}

// str reads a single-quoted string; a doubled quote inside stands for one.
func (l *lexer) str() (token, error) {
	start := l.pos
	var b strings.Builder
	for p := start + 1; p < len(l.src); p++ {
		c := l.src[p]
		if c != '\'' {
			b.WriteByte(c)
			continue
		}
		if p+1 < len(l.src) && l.src[p+1] == '\'' {
			b.WriteByte('\'')
			p++
			continue
		}
		l.pos = p + 1
		return token{kind: tokString, text: b.String(), pos: start}, nil
	}
	return token{}, errorAt(start, "unterminated string literal")
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isIdentStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '$'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }
