package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// Error is one problem found in a TOML document (a profile, or a plugin's
// section of one). Its Error string is
//
//	FILE:LINE:COL: KEY: MSG                 a problem at a place in the file
//	FILE: KEY: MSG                          a problem with a default value or a missing key
//	FILE: --set OVERRIDE: KEY: MSG          a problem caused by a --set override
//
// for example
//
//	profiles/x.toml:12:12: flush.config.interval: invalid duration "5 parsecs" (want e.g. "500ms", "2s")
//
// A problem with a value points at the value; an unknown key points at the
// key. MSG says what is allowed.
type Error struct {
	// File is the document's name as its reader was given it (the
	// profile's path).
	File string
	// Line and Col locate the problem in File (1-based; Col counts bytes).
	// Both are 0 when the problem has no place in the file: a default value,
	// a missing key, or an override.
	Line, Col int
	// Override is the --set argument ("store.segment_size=1KiB") that caused
	// the problem, or "" when the file did.
	Override string
	// Key is the dotted path of the key concerned ("flush.config.interval"),
	// or "" for a problem with the whole document (a syntax error).
	Key string
	// Msg says what is wrong and what is allowed.
	Msg string
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Col)
	}
	b.WriteString(": ")
	if e.Override != "" {
		b.WriteString("--set ")
		b.WriteString(e.Override)
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is several problems found in one document, in document order.
// Its Error string has one problem per line. errors.As finds the first
// *Error. A nil or empty ErrorList means no problem; use Err to turn it into
// an error value.
type ErrorList []*Error

// Error implements error.
func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the problems, for errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Err returns nil for an empty list, the single *Error for a list of one,
// and the list otherwise. Never return an ErrorList as an error without it:
// a nil ErrorList in an error interface is not a nil error.
func (l ErrorList) Err() error {
	switch len(l) {
	case 0:
		return nil
	case 1:
		return l[0]
	default:
		return l
	}
}

// Sort orders the problems by position; problems without one come last, in
// the order found.
func (l ErrorList) Sort() {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i], l[j]
		if (a.Line == 0) != (b.Line == 0) {
			return a.Line != 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

// Source is one parsed TOML document, indexed so that problems found while
// or after decoding it can be reported at a line and column: the profile
// file, or the one-line document of a --set override. A Source is immutable
// after NewSource and safe for concurrent use.
type Source struct {
	file     string
	doc      []byte
	idx      *docIndex
	override string // the --set argument, "" for the file
}

// NewSource parses and indexes doc. file names it in errors. override is ""
// for a file, or the --set argument ("store.segment_size=1KiB") doc was made
// from: errors about an override name the argument instead of a line and
// column. NewSource keeps doc; the caller must not modify it afterwards. A
// syntax error is returned as an *Error at the place of the error.
func NewSource(file string, doc []byte, override string) (*Source, error) {
	s, err := newSource(file, doc, override)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newSource is NewSource with the error as an *Error (nil when none); the
// returned Source indexes the expressions before a syntax error.
func newSource(file string, doc []byte, override string) (*Source, *Error) {
	idx, err := indexDocument(doc)
	s := &Source{file: file, doc: doc, idx: idx, override: override}
	if err != nil {
		pos, msg, _ := parserErrorPos(doc, err)
		return s, s.errAt(pos, nil, "syntax error: "+msg)
	}
	return s, nil
}

// errAt builds an Error at pos about path; for an override the position is
// dropped (it is a position in the one-line override document).
func (s *Source) errAt(pos position, path []string, msg string) *Error {
	e := &Error{File: s.file, Key: FormatKey(path), Msg: msg}
	if s.override != "" {
		e.Override = s.override
	} else {
		e.Line, e.Col = pos.Line, pos.Col
	}
	return e
}

// Decode decodes the whole document strictly into target, a non-nil
// pointer (usually to a struct holding defaults: keys the document does not
// set leave target's fields as they are), and returns every problem as an
// *Error with the key's dotted path, what is allowed, and the line and
// column of the offending key or value (or the --set argument, for an
// override):
//
//   - unknown keys, including keys that match a field only
//     case-insensitively and keys below a Duration, Size or Ratio; all of
//     them are reported, sorted by position;
//   - a value of the wrong type ("want an integer, got a string");
//   - a value rejected by a field's UnmarshalTOML or UnmarshalText, with
//     that method's message.
//
// fresh returns a new, empty target of the same type each time it is
// called; Decode uses it, on copies, to find the key of an error go-toml
// reports without a position (one returned by a field's own parser). With
// a nil fresh such an error has no position. On error target may be partly
// written. The result is nil when there is no problem; call Err on it to
// get an error value.
func (s *Source) Decode(target any, fresh func() any) ErrorList {
	return s.decode(target, fresh, nil)
}

// decode is Decode; with a non-nil scope, only keys at or below scope are
// checked: unknown keys elsewhere (which the target does not describe) are
// ignored.
func (s *Source) decode(target any, fresh func() any, scope []string) ErrorList {
	dec := toml.NewDecoder(bytes.NewReader(s.doc)).DisallowUnknownFields().EnableUnmarshalerInterface()
	err := dec.Decode(target)
	root := reflect.TypeOf(target)
	if err == nil {
		return s.checkPaths(root, scope)
	}
	var sm *toml.StrictMissingError
	var de *toml.DecodeError
	switch {
	case errors.As(err, &sm):
		var out ErrorList
		seen := map[string]bool{}
		for i := range sm.Errors {
			e := &sm.Errors[i]
			if scope != nil && !hasPrefix(e.Key(), scope) {
				continue
			}
			// go-toml names a whole header ([a.b] when a is unknown); the
			// problem is the first part that names nothing.
			path := e.Key()[:firstUnknown(root, e.Key())+1]
			if key := FormatKey(path); seen[key] {
				continue
			}
			seen[FormatKey(path)] = true
			line, col := e.Position()
			pos := position{line, col}
			if ent, ok := s.idx.exact(e.Key()); ok {
				pos = ent.partPos[len(path)-1] // the unknown part of a dotted key
			}
			out = append(out, s.errAt(pos, path, unknownKeyMsg(root, path)))
		}
		if len(out) == 0 {
			return s.checkPaths(root, scope)
		}
		out.Sort()
		return out
	case errors.As(err, &de):
		line, col := de.Position()
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		path := s.pathAt(position{line, col}, de.Key())
		return ErrorList{s.errAt(position{line, col}, path, rewriteMessage(msg, root, path))}
	default:
		msg := err.Error()
		if ent, ok := s.locate(fresh, msg); ok {
			return ErrorList{s.errAt(ent.valPos, ent.path, msg)}
		}
		return ErrorList{s.errAt(position{}, nil, msg)}
	}
}

// pathAt returns the full dotted path of the key or value at pos, or
// fallback when the index has nothing there. go-toml names some errors (a
// duplicate key) by the expression's key alone, without its table.
func (s *Source) pathAt(pos position, fallback []string) []string {
	for _, e := range s.idx.entries {
		if e.valPos == pos && e.kind != unstable.Table && e.kind != unstable.ArrayTable {
			return e.path
		}
	}
	for _, e := range s.idx.entries {
		for _, pp := range e.partPos {
			if pp == pos {
				return e.path
			}
		}
	}
	return fallback
}

// checkPaths finds keys go-toml accepts but a strict reading does not: a
// key that matches a field only case-insensitively (TOML keys are
// case-sensitive), and a key below a Duration, Size or Ratio (go-toml hands
// the value of "a.b = 1" to a's UnmarshalTOML whatever b is). With a
// non-nil scope, only keys below scope are checked.
func (s *Source) checkPaths(root reflect.Type, scope []string) ErrorList {
	var out ErrorList
	seen := map[string]bool{}
	for _, e := range s.idx.entries {
		if scope != nil && (len(e.path) <= len(scope) || !hasPrefix(e.path, scope)) {
			continue
		}
		t := root
	walk:
		for k, name := range e.path {
			for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
				t = t.Elem()
			}
			switch t.Kind() {
			case reflect.Struct:
				ft, exact, ok := fieldLookup(t, name)
				if !ok {
					break walk
				}
				if !exact {
					key := FormatKey(e.path[:k+1])
					if !seen[key] {
						seen[key] = true
						out = append(out, s.errAt(e.partPos[k], e.path[:k+1], unknownKeyMsg(root, e.path[:k+1])+" (keys are case-sensitive)"))
					}
					break walk
				}
				t = ft
			case reflect.Map:
				t = t.Elem()
			default:
				if isScalarType(t) {
					key := FormatKey(e.path[:k])
					if !seen[key] {
						seen[key] = true
						out = append(out, s.errAt(e.partPos[k], e.path[:k+1], "unknown key: "+key+" is "+describeType(t)+", not a table"))
					}
				}
				break walk
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	out.Sort()
	return out
}

// isScalarType reports whether t is one of this package's value types.
func isScalarType(t reflect.Type) bool {
	return t == durationType || t == sizeType || t == ratioType
}

// locate finds the first top-level expression whose decoding fails with
// message msg, by decoding ever longer prefixes of the document into fresh
// targets (binary search: decoding proceeds in document order, so a prefix
// that fails makes every longer prefix fail). It returns the expression's
// entry, or, for an inline table, the scalar inside it that fails alone with
// the same message.
func (s *Source) locate(fresh func() any, msg string) (*entry, bool) {
	n := len(s.idx.cuts)
	if n == 0 || fresh == nil {
		return nil, false
	}
	fails := func(k int) bool {
		dec := toml.NewDecoder(bytes.NewReader(s.doc[:s.idx.cuts[k]])).EnableUnmarshalerInterface()
		return dec.Decode(fresh()) != nil
	}
	if !fails(n - 1) {
		return nil, false
	}
	lo, hi := 0, n-1
	for lo < hi {
		mid := (lo + hi) / 2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	var first *entry
	for i := range s.idx.entries {
		e := &s.idx.entries[i]
		if e.expr != lo {
			continue
		}
		if first == nil {
			first = e
			continue
		}
		if e.raw == "" {
			continue
		}
		one := []byte(FormatKey(e.path) + " = " + e.raw + "\n")
		err := toml.NewDecoder(bytes.NewReader(one)).EnableUnmarshalerInterface().Decode(fresh())
		if err != nil && err.Error() == msg {
			return e, true
		}
	}
	return first, first != nil
}

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

var (
	tomlUnmarshalerType = reflect.TypeOf((*unstable.Unmarshaler)(nil)).Elem()
	textUnmarshalerType = reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
	durationType        = reflect.TypeOf(Duration(0))
	sizeType            = reflect.TypeOf(Size(0))
	ratioType           = reflect.TypeOf(Ratio(0))
)

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

// typeAt follows path from root through struct fields (matched the way
// go-toml matches them: tag name, then field name, then case-insensitively),
// map values and slice elements. ok is false when the path leaves the typed
// part (an interface) or names no field.
func typeAt(root reflect.Type, path []string) (reflect.Type, bool) {
	t := root
	for _, name := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := fieldByKey(t, name)
			if !ok {
				return nil, false
			}
			t = f
		case reflect.Map:
			t = t.Elem()
		default:
			return nil, false
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t, true
}

// tomlFields lists a struct's TOML keys and field types, flattening untagged
// embedded structs as go-toml does.
func tomlFields(t reflect.Type) (names []string, types []reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("toml")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				n, ty := tomlFields(ft)
				names = append(names, n...)
				types = append(types, ty...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
		types = append(types, f.Type)
	}
	return names, types
}

// fieldNames lists the keys a table of type t allows, or nil when it allows
// any key (a map or an interface).
func fieldNames(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	names, _ := tomlFields(t)
	if names == nil {
		names = []string{}
	}
	return names
}

func fieldByKey(t reflect.Type, key string) (reflect.Type, bool) {
	ft, _, ok := fieldLookup(t, key)
	return ft, ok
}

// fieldLookup finds the field of struct t that go-toml decodes key into;
// exact is false when only a case-insensitive match exists.
func fieldLookup(t reflect.Type, key string) (ft reflect.Type, exact, ok bool) {
	names, types := tomlFields(t)
	for i, n := range names {
		if n == key {
			return types[i], true, true
		}
	}
	for i, n := range names {
		if strings.EqualFold(n, key) {
			return types[i], false, true
		}
	}
	return nil, false, false
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
