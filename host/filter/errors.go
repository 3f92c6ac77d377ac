package filter

import (
	"errors"
	"fmt"
)

// SyntaxError is an expression Compile refuses: one that does not parse,
// or one RocketMQ's compile-time checks reject.
type SyntaxError struct {
	// Pos is the byte offset in the expression where the problem was
	// found.
	Pos int
	// Msg says what is wrong.
	Msg string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("at offset %d: %s", e.Pos, e.Msg) }

func errorAt(pos int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

// ErrEval is wrapped by every evaluation failure (a property that does
// not parse as the number it is compared with, two properties under > that
// are not numbers). A failed evaluation does not match.
var ErrEval = errors.New("filter: evaluation failed")

func evalErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrEval, fmt.Sprintf(format, args...))
}
