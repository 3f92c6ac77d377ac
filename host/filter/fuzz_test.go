package filter

import (
	"errors"
	"testing"
)

// FuzzCompileEval: Compile never panics and either succeeds or returns a
// *SyntaxError; a compiled selector evaluates without panicking over a
// few property sets, its errors wrap ErrEval, and Match agrees with Eval.
// Seeds are in testdata/fuzz/FuzzCompileEval.
func FuzzCompileEval(f *testing.F) {
	for _, s := range []string{
		"a BETWEEN 0 AND 3", "TAGS IN ('TagA', 'TagB') AND a IS NOT NULL", "s = 'x''y' OR NOT (b > 2.5E3)",
		"a NOT CONTAINS 'x' AND b STARTSWITH 'y'", "-a < - -3L /* c */ -- d\n", "((a))", "a = 1 = TRUE",
	} {
		f.Add(s, "3", "abc")
	}
	f.Fuzz(func(t *testing.T, expr, a, b string) {
		s, err := Compile(expr)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Compile(%q): %v is not a *SyntaxError", expr, err)
			}
			if se.Pos < 0 || se.Pos > len(expr) {
				t.Fatalf("Compile(%q): offset %d outside the expression", expr, se.Pos)
			}
			return
		}
		if s.String() != expr {
			t.Fatalf("String() = %q, want %q", s.String(), expr)
		}
		for _, m := range []map[string]string{
			{}, {"a": a}, {"a": a, "b": b, "s": b, "TAGS": a}, {"a": "1", "b": "-2.5", "s": "", "TAGS": "TagA"},
		} {
			r, err := s.Eval(props(m))
			if err != nil && !errors.Is(err, ErrEval) {
				t.Fatalf("Eval(%q, %v): %v does not wrap ErrEval", expr, m, err)
			}
			if r < Unknown || r > True {
				t.Fatalf("Eval(%q, %v) = %d", expr, m, r)
			}
			if s.Match(props(m)) != (err == nil && r == True) {
				t.Fatalf("Match(%q, %v) disagrees with Eval = %v, %v", expr, m, r, err)
			}
		}
	})
}
