package filter

import "fmt"

// Result is the three-valued outcome of evaluating a selector.
type Result int8

const (
	// Unknown is SQL's unknown (Java's null): a missing property made
	// the condition undecidable. It does not match.
	Unknown Result = iota
	// False does not match.
	False
	// True matches.
	True
)

func (r Result) String() string {
	switch r {
	case True:
		return "TRUE"
	case False:
		return "FALSE"
	}
	return "UNKNOWN"
}

// Selector is a compiled SQL92 expression. It is immutable and safe for
// concurrent use.
type Selector struct {
	expr string
	root node
}

// Compile parses expr and applies RocketMQ's compile-time checks (see the
// package documentation). The error is a *SyntaxError wrapped with the
// expression.
func Compile(expr string) (*Selector, error) {
	p := &parser{lex: lexer{src: expr}}
	root, err := p.compile()
	if err != nil {
		return nil, fmt.Errorf("filter: compiling SQL92 expression %q: %w", expr, err)
	}
	return &Selector{expr: expr, root: root}, nil
}

// compile reads the first token and parses the whole expression.
func (p *parser) compile() (node, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	return p.selector()
}

// String returns the expression the selector was compiled from.
func (s *Selector) String() string { return s.expr }

// Eval evaluates the selector over props. An error (wrapping ErrEval)
// means the evaluation failed, as a Java exception would: RocketMQ then
// does not deliver the message, and neither does Match.
func (s *Selector) Eval(props Properties) (Result, error) {
	v, err := s.root.eval(props)
	switch {
	case err != nil:
		return Unknown, err
	case v.k != kBool:
		return Unknown, nil
	case v.b:
		return True, nil
	}
	return False, nil
}

// Match reports whether a message with props is delivered: the selector
// evaluates to True without error.
func (s *Selector) Match(props Properties) bool {
	r, err := s.Eval(props)
	return err == nil && r == True
}
