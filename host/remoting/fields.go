package remoting

import (
	"slices"
	"strings"
)

// Field is one extension header field.
type Field struct {
	Key, Value string
}

// Fields are a command's extension header fields, in arrival (or Set)
// order. A decoded header may hold the same key more than once; the last
// one counts (Get scans from the end), as it would in a JSON object read
// into a map. A slice rather than a map because a header has a dozen
// fields that are read a few times each: decoding into one allocation and
// scanning it costs a fraction of building a hash map per request.
//
// The zero value is empty and ready to use.
type Fields []Field

// FieldsOf returns m's entries as Fields, sorted by key (for tests and
// callers that hold a map).
func FieldsOf(m map[string]string) Fields {
	if len(m) == 0 {
		return nil
	}
	f := make(Fields, 0, len(m))
	for k, v := range m {
		f = append(f, Field{k, v})
	}
	slices.SortFunc(f, byKey)
	return f
}

// Get returns the value of key k and whether it is present.
func (f Fields) Get(k string) (string, bool) {
	for i := len(f) - 1; i >= 0; i-- {
		if f[i].Key == k {
			return f[i].Value, true
		}
	}
	return "", false
}

// Set sets key k to v: it replaces the last occurrence of k, or appends.
func (f *Fields) Set(k, v string) {
	s := *f
	for i := len(s) - 1; i >= 0; i-- {
		if s[i].Key == k {
			s[i].Value = v
			return
		}
	}
	*f = append(s, Field{k, v})
}

// Map returns the fields as a map (last occurrence wins); nil when empty.
func (f Fields) Map() map[string]string {
	if len(f) == 0 {
		return nil
	}
	m := make(map[string]string, len(f))
	for _, e := range f {
		m[e.Key] = e.Value
	}
	return m
}

// Unique appends to dst the fields sorted by key (byte order) with only
// the last occurrence of each key kept, and returns it: the canonical
// order the encoders write, and the order RocketMQ's request signatures
// take the values in (package host/acl).
func (f Fields) Unique(dst []Field) []Field {
	start := len(dst)
	dst = append(dst, f...)
	s := dst[start:]
	// Stable insertion sort: headers are small, and stability keeps the
	// last occurrence of a key last within its run.
	if len(s) <= 32 {
		for i := 1; i < len(s); i++ {
			for j := i; j > 0 && s[j].Key < s[j-1].Key; j-- {
				s[j], s[j-1] = s[j-1], s[j]
			}
		}
	} else {
		slices.SortStableFunc(s, byKey)
	}
	w := 0
	for i := range s {
		if i+1 < len(s) && s[i+1].Key == s[i].Key {
			continue // a later occurrence follows
		}
		s[w] = s[i]
		w++
	}
	return dst[:start+w]
}

func byKey(a, b Field) int { return strings.Compare(a.Key, b.Key) }
