package filter

import (
	"errors"
	"strings"
	"testing"
)

// TestCompileAccepts: expressions RocketMQ compiles, with the tree they
// compile to (String of the root: conditions in parentheses, <> as NOT =,
// BETWEEN spelt out, a property used as a condition printed bare).
func TestCompileAccepts(t *testing.T) {
	for _, tc := range []struct{ expr, tree string }{
		{"a = 1", "(a = 1)"},
		{"a <> 'x'", "NOT (a = 'x')"},
		{"a > 1 AND b < 2.5 OR c >= 3 AND d <= 4", "(((a > 1) AND (b < 2.5)) OR ((c >= 3) AND (d <= 4)))"},
		{"a = 1 OR b = 2 AND c = 3", "((a = 1) OR ((b = 2) AND (c = 3)))"},
		{"(a = 1 OR b = 2) AND c = 3", "(((a = 1) OR (b = 2)) AND (c = 3))"},
		{"a BETWEEN 0 AND 3", "((a >= 0) AND (a <= 3))"},
		{"a between 3 and 3", "((a >= 3) AND (a <= 3))"},
		{"a NOT BETWEEN 0 AND 3", "((a < 0) OR (a > 3))"},
		{"a BETWEEN -5 AND -1", "((a >= (- 5)) AND (a <= (- 1)))"},
		{"a BETWEEN b AND 3", "((a >= b) AND (a <= 3))"},
		{"a IN ('x')", "a IN ('x')"},
		{"a NOT IN ('x')", "a NOT IN ('x')"},
		{"a IS NULL", "(a = NULL)"},
		{"a IS NOT NULL", "NOT (a = NULL)"},
		{"a is not null and a in ('it''s')", "(NOT (a = NULL) AND a IN ('it''s'))"},
		{"NOT a = 1", "(NOT a = 1)"},
		{"NOT (a = 1)", "NOT (a = 1)"},
		{"a", "a"},
		{"NOT a", "NOT a"},
		{"TRUE", "TRUE"},
		{"FALSE OR NULL", "(FALSE OR NULL)"},
		{"a = TRUE", "(a = TRUE)"},
		{"TRUE = FALSE", "(TRUE = FALSE)"},
		{"'x' = TRUE", "('x' = TRUE)"},
		{"a = b", "(a = b)"},
		{"a = 1 = TRUE", "((a = 1) = TRUE)"},
		{"a > -b", "(a > (- b))"},
		{"a > +1", "(a > 1)"},
		{"a > - - 1", "(a > (- (- 1)))"},
		{"a = 2147483647", "(a = 2147483647)"},
		{"a = 2147483648", "(a = 2147483648)"},
		{"a = 9223372036854775807L", "(a = 9223372036854775807)"},
		{"a = 5l", "(a = 5)"},
		{"a = 5.", "(a = 5)"},
		{"a = .5", "(a = 0.5)"},
		{"a = 5E2", "(a = 500)"},
		{"a = 5.5e-1", "(a = 0.55)"},
		{"a = 00.5", "(a = 0.5)"},
		{"a CONTAINS 'x'", "(a CONTAINS 'x')"},
		{"a NOT STARTSWITH 'x'", "(a NOT STARTSWITH 'x')"},
		{"a endswith ''", "(a ENDSWITH '')"},
		{"TAGS = 'TagA'", "(TAGS = 'TagA')"},
		{"$a_1 = 1", "($a_1 = 1)"},
		{"_ = 1", "(_ = 1)"},
		{"a = 1 -- a comment\n", "(a = 1)"},
		{"/* c */ a /* d */ = 1", "(a = 1)"},
		{" \t\r\n\fa=1", "(a = 1)"},
		{"andx = 1", "(andx = 1)"},
		// RocketMQ's documented example (docs/en/Example_Filter.md).
		{"(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a is not null and a between 0 and 3)", ""},
	} {
		s, err := Compile(tc.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.expr, err)
			continue
		}
		if tc.tree != "" && s.root.String() != tc.tree {
			t.Errorf("Compile(%q) = %s, want %s", tc.expr, s.root, tc.tree)
		}
		if s.String() != tc.expr {
			t.Errorf("Compile(%q).String() = %q", tc.expr, s.String())
		}
	}
}

// TestCompileRefuses: what RocketMQ refuses to compile, with a word of the
// message and the offset it is reported at.
func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct {
		expr, msg string
		pos       int
	}{
		{"", "unexpected end", 0},
		{"   ", "unexpected end", 3},
		{"*", "unexpected character", 0},
		{"a = ", "unexpected end", 4},
		{"a = 1 b", "unexpected identifier b", 6},
		{"a == 1", `unexpected "="`, 3},
		{"a != 1", "unexpected character '!'", 2},
		{"a.b = 1", "unexpected character '.'", 1},
		{"a-b = 1", `unexpected "-"`, 1},
		{"a#b = 1", "unexpected character '#'", 1},
		{"a LIKE 'x%'", "unexpected identifier LIKE", 2},
		{"a + 1 = 2", `unexpected "+"`, 2},
		{"1", "not a condition", 0},
		{"'x'", "not a condition", 0},
		{"-a", "not a condition", 0},
		{"a = 1 AND 2", "not a condition", 6},
		{"NOT 1", "not a condition", 0},
		{"a = NULL", "use IS NULL", 2},
		{"NULL = a", "use IS NULL", 5},
		{"a <> NULL", "use IS NULL", 2},
		{"TRUE = 1", "TRUE cannot be compared with 1", 5},
		{"FALSE = 'x'", "cannot be compared", 6},
		{"a > 'x'", "cannot be compared with >", 2},
		{"a < TRUE", "cannot be compared", 2},
		{"a >= NULL", "cannot be compared", 2},
		{"'1' <= a", "cannot be compared", 4},
		{"(a = 1) > 2", "cannot be compared", 8},
		{"a > 1 > 2", "cannot be compared", 6},
		{"a BETWEEN 'a' AND 'b'", "", 2},
		{"a BETWEEN 3 AND 0", "out of order", 2},
		{"a BETWEEN 3.5 AND 3", "out of order", 2},
		{"a BETWEEN NULL AND 3", "cannot be NULL", 2},
		{"a BETWEEN 0 OR 3", "want AND", 12},
		{"a NOT BETWEEN 'a' AND 3", "cannot be compared", 2},
		{"1 IN ('x')", "needs a property", 2},
		{"(a = 1) IN ('x')", "needs a property", 8},
		{"a IN ()", "want a string literal", 6},
		{"a IN (1)", "want a string literal", 6},
		{"a IN ('x',)", "want a string literal", 10},
		{"a IN ('x'", `want ")"`, 9},
		{"a IN 'x'", `want "("`, 5},
		{"a CONTAINS b", "want a string literal", 11},
		{"a IS 1", "want NULL", 5},
		{"a IS NOT 1", "want NULL", 9},
		{"a NOT = 1", "unexpected \"NOT\"", 2},
		{"a = 'x", "unterminated string", 4},
		{"a = 1 /* x", "unterminated /* comment", 6},
		{"a = 1 -- no line break", "unexpected", 6},
		{"a = 007", "unexpected \"0\"", 5},
		{"a = 0L", "unexpected identifier L", 5},
		{"a = 9223372036854775808", "out of the range of a Long", 4},
		{"a = 0.0", "less than the smallest positive Double", 4},
		{"a = 1e400", "greater than the largest Double", 4},
		{"(a = 1", `want ")"`, 6},
		{"a = 1)", "unexpected \")\"", 5},
		{"AND = 1", `unexpected "AND"`, 0},
		{"a = 1 OR", "unexpected end", 8},
		{"a = é", "unexpected character", 4},
		{strings.Repeat("(", maxDepth+1) + "a" + strings.Repeat(")", maxDepth+1), "nests deeper", maxDepth},
		{strings.Repeat("NOT ", maxDepth+1) + "a", "nests deeper", 4 * maxDepth},
	} {
		_, err := Compile(tc.expr)
		if err == nil {
			t.Errorf("Compile(%.60q) succeeded, want an error containing %q", tc.expr, tc.msg)
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Compile(%.60q): %v is not a *SyntaxError", tc.expr, err)
			continue
		}
		if !strings.Contains(se.Msg, tc.msg) || se.Pos != tc.pos {
			t.Errorf("Compile(%.60q) = %q at %d, want %q at %d", tc.expr, se.Msg, se.Pos, tc.msg, tc.pos)
		}
		if !strings.Contains(err.Error(), "compiling SQL92 expression") {
			t.Errorf("Compile(%.60q) error %q does not say what was being done", tc.expr, err)
		}
	}
}

// TestNestingWithinLimit: maxDepth levels compile.
func TestNestingWithinLimit(t *testing.T) {
	expr := strings.Repeat("(", maxDepth) + "a" + strings.Repeat(")", maxDepth)
	if _, err := Compile(expr); err != nil {
		t.Fatalf("%d parentheses: %v", maxDepth, err)
	}
	long := "a = 1" + strings.Repeat(" OR a = 1", 20000)
	s, err := Compile(long)
	if err != nil {
		t.Fatalf("a chain of 20000 ORs: %v", err)
	}
	if !s.Match(props(map[string]string{"a": "1"})) {
		t.Fatal("a chain of 20000 ORs does not match")
	}
}
