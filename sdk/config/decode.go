package config

import (
	"bytes"
	"errors"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

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
			key := e.Key()
			line, col := e.Position()
			if _, ok := s.idx.exact(key); !ok {
				// go-toml names a key inside an inline table without the
				// table's own path (store = { nope = 1 } gives "nope"):
				// take the full path of what stands at that position.
				key = s.pathAt(position{line, col}, key)
			}
			if scope != nil && !hasPrefix(key, scope) {
				continue
			}
			// go-toml names a whole header ([a.b] when a is unknown); the
			// problem is the first part that names nothing.
			path := key[:firstUnknown(root, key)+1]
			if key := FormatKey(path); seen[key] {
				continue
			}
			seen[FormatKey(path)] = true
			pos := position{line, col}
			if ent, ok := s.idx.exact(key); ok {
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
// key that names no field inside an inline table (go-toml's strict mode
// does not look inside them), a key that matches a field only
// case-insensitively (TOML keys are case-sensitive), and a key below a
// Duration, Size or Ratio (go-toml hands
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
					// go-toml's strict mode misses unknown keys inside an
					// inline table (config = { nope = 1 }): it reported none
					// here, so this one is ours to report.
					key := FormatKey(e.path[:k+1])
					if !seen[key] {
						seen[key] = true
						out = append(out, s.errAt(e.partPos[k], e.path[:k+1], unknownKeyMsg(root, e.path[:k+1])))
					}
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
