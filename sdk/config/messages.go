package config

import (
	"fmt"
	"reflect"
	"strings"
)

// firstUnknown returns the index of the first part of path that names no
// field of a struct, or len(path)-1 when there is none (the last part is the
// unknown one, below a map or an interface).
func firstUnknown(root reflect.Type, path []string) int {
	for k := 0; k < len(path)-1; k++ {
		t, ok := typeAt(root, path[:k])
		if !ok {
			break
		}
		if names := fieldNames(t); names != nil {
			if _, ok := typeAt(root, path[:k+1]); !ok {
				return k
			}
		}
	}
	return len(path) - 1
}

// unknownKeyMsg explains an unknown key: what is allowed in its table and,
// if one is close, which key was probably meant.
func unknownKeyMsg(root reflect.Type, path []string) string {
	if len(path) == 0 {
		return "unknown key"
	}
	parent, name := path[:len(path)-1], path[len(path)-1]
	t, ok := typeAt(root, parent)
	if !ok {
		return "unknown key"
	}
	names := fieldNames(t)
	if names == nil {
		return "unknown key"
	}
	where := "at top level"
	if len(parent) > 0 {
		where = "in [" + FormatKey(parent) + "]"
	}
	msg := "unknown key"
	if guess := closest(name, names); guess != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", guess)
	}
	if len(names) == 0 {
		return msg + "; nothing is allowed " + where
	}
	return msg + "; allowed " + where + ": " + strings.Join(names, ", ")
}

// rewriteMessage makes go-toml's type-mismatch messages say what the key
// wants ("want a string, got an integer") instead of naming Go types.
func rewriteMessage(msg string, root reflect.Type, path []string) string {
	const prefix = "cannot decode TOML "
	if !strings.HasPrefix(msg, prefix) {
		return msg
	}
	got, _, found := strings.Cut(msg[len(prefix):], " into ")
	if !found {
		return msg
	}
	t, ok := typeAt(root, path)
	if !ok {
		return msg
	}
	return "want " + describeType(t) + ", got " + article(got)
}

func article(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}

// describeType says, for a user, what values a Go type accepts.
func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case durationType:
		return `a duration string (e.g. "500ms", "2s")`
	case sizeType:
		return `a size (e.g. "4MiB" or a number of bytes)`
	case ratioType:
		return `a ratio (e.g. 0.75 or "75%")`
	}
	pt := reflect.PointerTo(t)
	if pt.Implements(textUnmarshalerType) && !pt.Implements(tomlUnmarshalerType) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "a table"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "a " + t.String()
	}
}

// closest returns the allowed name nearest to name (edit distance at most 2,
// case-insensitive), or "".
func closest(name string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editDistance(strings.ToLower(name), strings.ToLower(a)); d < bestD && d < len(name) {
			best, bestD = a, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		if a == b {
			return 0
		}
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
