package epoch

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error wraps
// ErrCorrupt, and that whatever it accepts is a valid history whose
// canonical encoding is exactly the input.
func FuzzParse(f *testing.F) {
	f.Add(Marshal(nil))
	f.Add(Marshal([]Entry{{1, 0}}))
	f.Add(Marshal([]Entry{{1, 0}, {2, 100}, {3, 100}, {2147483647, 9223372036854775807}}))
	f.Add([]byte("1\n0\n1-0\n"))
	f.Add([]byte("2\n12345\n1-0\n2-5\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if err := Validate(entries); err != nil {
			t.Fatalf("Parse accepted an invalid history %v: %v", entries, err)
		}
		if out := Marshal(entries); !bytes.Equal(out, data) {
			t.Fatalf("Parse accepted %q but Marshal gives %q", data, out)
		}
	})
}
