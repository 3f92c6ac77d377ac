package schedule

import (
	"strings"
	"testing"
	"time"
)

func TestParseLevelsDefault(t *testing.T) {
	l, err := ParseLevels(DefaultLevels)
	if err != nil {
		t.Fatal(err)
	}
	if l.Max() != 18 {
		t.Fatalf("default table has %d levels, want 18", l.Max())
	}
	for level, want := range map[int32]time.Duration{1: time.Second, 3: 10 * time.Second, 5: time.Minute, 16: 30 * time.Minute, 18: 2 * time.Hour} {
		if got := l.Delay(level); got != want {
			t.Errorf("level %d: %s, want %s", level, got, want)
		}
	}
	if got := l.String(); got != DefaultLevels {
		t.Errorf("String() = %q, want %q", got, DefaultLevels)
	}
	if got := l.Clamp(40); got != 18 {
		t.Errorf("Clamp(40) = %d, want 18", got)
	}
	if got := l.Clamp(2); got != 2 {
		t.Errorf("Clamp(2) = %d, want 2", got)
	}
}

func TestParseLevelsUnitsAndSpaces(t *testing.T) {
	l, err := ParseLevels("  1s  2m\t3h 1d ")
	if err != nil {
		t.Fatal(err)
	}
	want := Levels{time.Second, 2 * time.Minute, 3 * time.Hour, 24 * time.Hour}
	if len(l) != len(want) {
		t.Fatalf("got %v, want %v", l, want)
	}
	for i := range want {
		if l[i] != want[i] {
			t.Errorf("level %d: %s, want %s", i+1, l[i], want[i])
		}
	}
}

func TestParseLevelsErrorsNameTheEntry(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "no delay levels"},
		{"1s 5s 10x", `delay level 3 "10x": the unit must be s, m, h or d`},
		{"1s 0s", `delay level 2 "0s": want a positive whole number`},
		{"1s -5s", `delay level 2 "-5s": want a positive whole number`},
		{"1.5s", `delay level 1 "1.5s": want a positive whole number`},
		{"s", `delay level 1 "s": want a positive whole number`},
		{"1s 400d", `delay level 2 "400d": longer than`},
		{strings.Repeat("1s ", MaxLevels+1), "more than 256"},
	} {
		_, err := ParseLevels(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseLevels(%q) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
}
