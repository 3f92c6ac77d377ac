package filter

import (
	"errors"
	"testing"
)

// props looks properties up in m.
func props(m map[string]string) Properties {
	return func(name string) (string, bool) { v, ok := m[name]; return v, ok }
}

// TestEval: RocketMQ's evaluation, three-valued, over string properties.
func TestEval(t *testing.T) {
	const (
		T = True
		F = False
		U = Unknown
	)
	msg := map[string]string{
		"a": "3", "s": "abc", "neg": "-2", "big": "3000000000", "f": "2.5", "fs": " 2.5d ",
		"TAGS": "TagA", "KEYS": "k1 k2", "e": "", "t": "true", "q": "it's", "nan": "NaN", "plus": "+3",
	}
	for _, tc := range []struct {
		expr string
		want Result
	}{
		// Numbers: the property is converted to the literal's type.
		{"a = 3", T}, {"a = 4", F}, {"a <> 4", T}, {"a <> 3", F},
		{"a > 2", T}, {"a >= 3", T}, {"a < 3", F}, {"a <= 3", T},
		{"a = 3.0", T}, {"a > 2.9", T}, {"a = 3L", T},
		{"a = 3000000000", F}, {"big = 3000000000", T}, {"big > 2147483648", T},
		{"neg < -1", T}, {"neg = -2", T}, {"plus = 3", T},
		{"f > 2", F}, // "2.5" is not an Integer: the evaluation fails
		{"f > 2.4", T}, {"fs = 2.5", T}, {"nan > 1.5", T}, {"nan = 1.5", F},
		{"3 = a", T}, {"2 < a", T}, {"3.0 = a", T},
		{"1 = 1", T}, {"1 = 1.0", T}, {"1 < 2", T}, {"2147483648 > 1", T},
		// BETWEEN is >= AND <=.
		{"a BETWEEN 0 AND 3", T}, {"a BETWEEN 4 AND 9", F}, {"a NOT BETWEEN 0 AND 3", F},
		{"a NOT BETWEEN 4 AND 9", T}, {"a BETWEEN 3 AND 3", T}, {"a BETWEEN 2.5 AND 3.5", T},
		{"missing BETWEEN 0 AND 3", U}, {"missing NOT BETWEEN 0 AND 3", U},
		// Strings: = and <>; IN.
		{"s = 'abc'", T}, {"s = 'ABC'", F}, {"s <> 'abc'", F}, {"s <> 'x'", T},
		{"q = 'it''s'", T}, {"e = ''", T},
		{"s IN ('x', 'abc')", T}, {"s IN ('x')", F}, {"s NOT IN ('x')", T}, {"s NOT IN ('abc')", F},
		{"a IN ('3')", T},
		// Two properties.
		{"a = a", T}, {"a = s", F}, {"a > neg", T}, {"f < a", T},
		// Booleans.
		{"TRUE", T}, {"FALSE", F}, {"NULL", U}, {"NOT TRUE", F}, {"NOT NULL", U},
		{"t = TRUE", T}, {"s = TRUE", F}, {"TRUE = TRUE", T}, {"TRUE = FALSE", F},
		{"(a = 3) = TRUE", T}, {"(a = 3) = (s = 'abc')", T},
		{"t", F}, {"NOT t", T}, {"missing", U}, {"NOT missing", U},
		// NULL: missing properties.
		{"missing IS NULL", T}, {"missing IS NOT NULL", F}, {"a IS NULL", F}, {"a IS NOT NULL", T},
		{"e IS NULL", F},
		{"missing = 1", U}, {"missing = 'x'", U}, {"missing <> 'x'", U},
		{"'x' = missing", F}, {"NOT ('x' = missing)", T}, // RocketMQ's asymmetry
		{"missing = other", T}, {"missing > 1", U}, {"1 < missing", U},
		{"missing IN ('x')", U}, {"missing NOT IN ('x')", U},
		// Three-valued AND and OR.
		{"a = 3 AND missing = 1", U}, {"a = 4 AND missing = 1", F}, {"missing = 1 AND a = 4", F},
		{"a = 3 OR missing = 1", T}, {"missing = 1 OR a = 3", T}, {"a = 4 OR missing = 1", U},
		{"NOT (a = 4 OR missing = 1)", U},
		// CONTAINS, STARTSWITH, ENDSWITH.
		{"s CONTAINS 'b'", T}, {"s CONTAINS 'x'", F}, {"s NOT CONTAINS 'x'", T}, {"s NOT CONTAINS 'b'", F},
		{"s STARTSWITH 'ab'", T}, {"s STARTSWITH 'bc'", F}, {"s ENDSWITH 'bc'", T}, {"s NOT ENDSWITH 'bc'", F},
		{"s CONTAINS ''", F}, {"s NOT CONTAINS ''", F},
		{"missing CONTAINS 'x'", F}, {"missing NOT CONTAINS 'x'", F}, {"NOT (missing CONTAINS 'x')", T},
		{"a CONTAINS '3'", T},
		// Unary minus.
		{"a > -a", U}, // -a is null (a property is a string): unknown
		{"-3 = -3", T}, {"-2147483648 = -2147483648", T}, {"- -3 = 3", T},
		// System properties are plain properties.
		{"TAGS = 'TagA'", T}, {"TAGS IN ('TagA', 'TagB')", T}, {"KEYS = 'k1 k2'", T},
		{"tags = 'TagA'", U}, // names are case-sensitive
		// RocketMQ's documented example.
		{"(TAGS is not null and TAGS in ('TagA', 'TagB')) and (a is not null and a between 0 and 3)", T},
	} {
		s, err := Compile(tc.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.expr, err)
			continue
		}
		got, err := s.Eval(props(msg))
		if tc.expr == "f > 2" {
			if !errors.Is(err, ErrEval) {
				t.Errorf("Eval(%q) = %v, %v; want an ErrEval", tc.expr, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Eval(%q) = %v, %v; want %v", tc.expr, got, err, tc.want)
		}
		if s.Match(props(msg)) != (tc.want == True) {
			t.Errorf("Match(%q) = %v, want %v", tc.expr, !(tc.want == True), tc.want == True)
		}
	}
}

// TestEvalFails: a property that does not convert fails the whole
// evaluation (a Java exception), which Match treats as no match, even
// where OR's other side would be true; a side that is never evaluated
// cannot fail.
func TestEvalFails(t *testing.T) {
	msg := props(map[string]string{"a": "x", "b": "1", "n": "3", "t": "true", "big": "3000000000"})
	for _, expr := range []string{
		"a = 1", "a > 1", "a = 1.5", "a = 3000000000", "1 = a", "a BETWEEN 0 AND 3",
		"a > b", "b > a", "a = 1 OR b = 1", "b = 1 AND a = 1", "n = 3.5 OR a = 1",
		"(b = 1) = 'true'", "NOT (a = 1)",
		"big > 2147483647", // Integer.valueOf("3000000000") fails
	} {
		s, err := Compile(expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", expr, err)
		}
		if r, err := s.Eval(msg); !errors.Is(err, ErrEval) {
			t.Errorf("Eval(%q) = %v, %v; want an error wrapping ErrEval", expr, r, err)
		}
		if s.Match(msg) {
			t.Errorf("Match(%q) = true after a failed evaluation", expr)
		}
	}
	for _, expr := range []string{"b = 1 OR a = 1", "b = 2 AND a = 1", "'true' = (b = 1)", "a IN ('x')", "a = 'x'"} {
		s, err := Compile(expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", expr, err)
		}
		if _, err := s.Eval(msg); err != nil {
			t.Errorf("Eval(%q): %v, want no error", expr, err)
		}
	}
}

// TestRocketMQExampleFilter: RocketMQ's filter example (a BETWEEN 0 AND 3
// over messages with a = 0..9) selects exactly a = 0, 1, 2, 3.
func TestRocketMQExampleFilter(t *testing.T) {
	s, err := Compile("a BETWEEN 0 AND 3")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"} {
		if s.Match(props(map[string]string{"a": a, "TAGS": "TagA"})) {
			got = append(got, a)
		}
	}
	if len(got) != 4 || got[0] != "0" || got[3] != "3" {
		t.Fatalf("a BETWEEN 0 AND 3 matched a = %v, want 0 1 2 3", got)
	}
	if s.Match(props(map[string]string{"TAGS": "TagA"})) {
		t.Fatal("a BETWEEN 0 AND 3 matched a message without a")
	}
}

func TestJavaParseDouble(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"1", true}, {"1.5", true}, {" 1.5 ", true}, {"1.5f", true}, {"1.5D", true}, {"-1e3", true},
		{"+.5", true}, {"NaN", true}, {"-Infinity", true}, {"0x1p3", true}, {"0x1p3f", true}, {"1e400", true},
		{"", false}, {"nan", false}, {"inf", false}, {"Inf", false}, {"1_0", false}, {"--1", false},
		{"0x1f", false}, {"1.5ff", false}, {"abc", false}, {"1,5", false},
	} {
		if _, ok := javaParseDouble(tc.in); ok != tc.ok {
			t.Errorf("javaParseDouble(%q) ok = %v, want %v", tc.in, ok, tc.ok)
		}
	}
}
