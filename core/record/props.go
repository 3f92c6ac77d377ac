package record

import (
	"bytes"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// The properties string.
//
// A properties string is a sequence of pairs "name 0x01 value", each ended
// by 0x02; the last pair's 0x02 is optional (RocketMQ 5's Java client omits
// it, the Go client writes it). The empty string holds no properties.
// A well-formed pair has a non-empty name; neither name nor value contains
// 0x01 or 0x02; values may be empty. When a name occurs more than once, the
// last pair wins (as Java's HashMap does).

// nextPair splits the pair starting at raw[i:]. It returns the name and the
// value (split at the first 0x01; ok=false when there is none), and the
// position after the pair's terminator.
func nextPair(raw []byte, i int) (name, value []byte, next int, ok bool) {
	end := bytes.IndexByte(raw[i:], PropertySeparator)
	if end < 0 {
		end = len(raw)
		next = len(raw)
	} else {
		end += i
		next = end + 1
	}
	pair := raw[i:end]
	sep := bytes.IndexByte(pair, NameValueSeparator)
	if sep < 0 {
		return pair, nil, next, false
	}
	return pair[:sep], pair[sep+1:], next, true
}

// ParseProperties parses a properties string into a map. It tolerates a
// missing final separator and returns an error wrapping
// ErrMalformedProperties (and so ErrInvalid) for anything else outside the
// grammar: an empty pair, a pair without 0x01, an empty name, or a value
// containing 0x01. The result is never nil on success.
func ParseProperties(raw []byte) (map[string]string, error) {
	if err := ValidateProperties(raw); err != nil {
		return nil, err
	}
	m := make(map[string]string, bytes.Count(raw, []byte{PropertySeparator})+1)
	for i := 0; i < len(raw); {
		name, value, next, _ := nextPair(raw, i)
		m[string(name)] = string(value)
		i = next
	}
	return m, nil
}

// ValidateProperties reports what ParseProperties would reject in raw,
// without building the map (and without allocating when raw is valid).
func ValidateProperties(raw []byte) error {
	for i := 0; i < len(raw); {
		name, value, next, ok := nextPair(raw, i)
		switch {
		case !ok && len(name) == 0:
			return fmt.Errorf("record: properties: empty pair at %d: %w", i, ErrMalformedProperties)
		case !ok:
			return fmt.Errorf("record: properties: pair %q at %d has no name/value separator: %w", name, i, ErrMalformedProperties)
		case len(name) == 0:
			return fmt.Errorf("record: properties: empty name at %d: %w", i, ErrMalformedProperties)
		case bytes.IndexByte(value, NameValueSeparator) >= 0:
			return fmt.Errorf("record: properties: value of %q at %d contains 0x01: %w", name, i, ErrMalformedProperties)
		}
		i = next
	}
	return nil
}

// lookup returns the value of the last well-formed-enough pair named key
// (split at the first 0x01, as Java does); pairs without 0x01 are skipped.
// It does not allocate.
func lookup(raw []byte, key string) ([]byte, bool) {
	var val []byte
	found := false
	for i := 0; i < len(raw); {
		name, value, next, ok := nextPair(raw, i)
		if ok && string(name) == key {
			val, found = value, true
		}
		i = next
	}
	return val, found
}

// GetProperty returns the value of key in raw, and whether it is present.
// On a well-formed string it agrees with ParseProperties; on a malformed one
// it is lenient: pairs without 0x01 are skipped and a value runs from the
// first 0x01 to the next 0x02. It allocates only the result.
func GetProperty(raw []byte, key string) (string, bool) {
	v, ok := lookup(raw, key)
	if !ok {
		return "", false
	}
	return string(v), true
}

// FirstProperty returns the first of names (in names' order) that raw
// holds, with its value as GetProperty gives it, in one pass over raw.
// At most 8 names; FirstProperty panics on more.
func FirstProperty(raw []byte, names ...string) (name, value string, ok bool) {
	if len(names) > 8 {
		panic(fmt.Sprintf("record: FirstProperty of %d names, at most 8", len(names)))
	}
	var vals [8][]byte
	var found [8]bool
	for i := 0; i < len(raw); {
		n, v, next, pairOK := nextPair(raw, i)
		if pairOK {
			for j, want := range names {
				if string(n) == want {
					vals[j], found[j] = v, true
				}
			}
		}
		i = next
	}
	for j, want := range names {
		if found[j] {
			return want, string(vals[j]), true
		}
	}
	return "", "", false
}

// dispatchProps finds TAGS, KEYS and UNIQ_KEY in one pass, without
// allocating; the results alias raw.
func dispatchProps(raw []byte) (tags, keys, uniq []byte) {
	for i := 0; i < len(raw); {
		name, value, next, ok := nextPair(raw, i)
		if ok {
			switch string(name) {
			case PropertyTags:
				tags = value
			case PropertyKeys:
				keys = value
			case PropertyUniqKey:
				uniq = value
			}
		}
		i = next
	}
	return tags, keys, uniq
}

// CheckProperty returns an error wrapping ErrMalformedProperties if name
// and value cannot be stored as a property: name empty, or either
// containing 0x01 or 0x02. Use it on untrusted input before SetProperty.
func CheckProperty(name, value string) error {
	if name == "" {
		return fmt.Errorf("record: property: empty name: %w", ErrMalformedProperties)
	}
	if strings.IndexByte(name, NameValueSeparator) >= 0 || strings.IndexByte(name, PropertySeparator) >= 0 {
		return fmt.Errorf("record: property name %q contains a separator: %w", name, ErrMalformedProperties)
	}
	if strings.IndexByte(value, NameValueSeparator) >= 0 || strings.IndexByte(value, PropertySeparator) >= 0 {
		return fmt.Errorf("record: property %q: value contains a separator: %w", name, ErrMalformedProperties)
	}
	return nil
}

func mustProperty(name, value string) {
	if err := CheckProperty(name, value); err != nil {
		panic(err)
	}
}

// EncodeProperties encodes props as a properties string: names in sorted
// order, every pair ended by 0x02. An empty or nil map gives an empty
// (nil) result. Precondition: every pair passes CheckProperty; EncodeProperties
// panics otherwise. The caller checks the result's length against
// MaxPropertiesSize.
func EncodeProperties(props map[string]string) []byte {
	if len(props) == 0 {
		return nil
	}
	names := make([]string, 0, len(props))
	n := 0
	for k, v := range props {
		mustProperty(k, v)
		names = append(names, k)
		n += len(k) + len(v) + 2
	}
	slices.Sort(names)
	out := make([]byte, 0, n)
	for _, k := range names {
		out = appendPair(out, k, props[k])
	}
	return out
}

func appendPair(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, NameValueSeparator)
	dst = append(dst, value...)
	return append(dst, PropertySeparator)
}

// SetProperty returns a new properties string (never aliasing raw) with
// every pair named name removed and "name 0x01 value 0x02" appended at the
// end; other pairs keep their bytes and order (a missing final separator is
// added). Precondition: name and value pass CheckProperty; SetProperty
// panics otherwise.
func SetProperty(raw []byte, name, value string) []byte {
	return EditProperties(raw, nil, name, value)
}

// RemoveProperty returns a new properties string (never aliasing raw)
// without the pairs named name; other pairs keep their bytes and order.
func RemoveProperty(raw []byte, name string) []byte {
	return EditProperties(raw, []string{name})
}

// EditProperties returns a new properties string (never aliasing raw),
// built in one pass over raw: every pair named in remove, or named by one
// of set's pairs, is dropped; the other pairs keep their bytes and order
// (each ended by 0x02, a missing final separator added); then set's pairs
// (name, value, name, value, ...) are appended in the order given. It is
// the same as RemoveProperty for each name of remove followed by
// SetProperty for each pair of set, with one copy instead of one per
// name. Precondition: set has an even length and each of its pairs
// passes CheckProperty, with no name twice; EditProperties panics
// otherwise.
func EditProperties(raw []byte, remove []string, set ...string) []byte {
	if len(set)%2 != 0 {
		panic(fmt.Sprintf("record: EditProperties: %d strings in set, not name/value pairs", len(set)))
	}
	n := len(raw) + 1
	for i := 0; i < len(set); i += 2 {
		mustProperty(set[i], set[i+1])
		for j := 0; j < i; j += 2 {
			if set[j] == set[i] {
				panic(fmt.Sprintf("record: EditProperties: property %s set twice", set[i]))
			}
		}
		n += len(set[i]) + len(set[i+1]) + 2
	}
	out := make([]byte, 0, n)
	for i := 0; i < len(raw); {
		name, _, next, ok := nextPair(raw, i)
		if !ok || !dropped(string(name), remove, set) {
			end := next
			if end > 0 && raw[end-1] == PropertySeparator {
				end--
			}
			out = append(out, raw[i:end]...)
			out = append(out, PropertySeparator)
		}
		i = next
	}
	for i := 0; i < len(set); i += 2 {
		out = appendPair(out, set[i], set[i+1])
	}
	return out
}

// dropped reports whether EditProperties drops a pair named name.
func dropped(name string, remove, set []string) bool {
	for i := 0; i < len(set); i += 2 {
		if set[i] == name {
			return true
		}
	}
	return slices.Contains(remove, name)
}

// IndexKeys yields the keys the hash index records for a KEYS property
// value: its space-separated parts, skipping empty ones (RocketMQ
// IndexService.buildIndex). The index stores each as topic + "#" + key,
// next to the UNIQ_KEY.
func IndexKeys(keys string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for k := range strings.SplitSeq(keys, KeySeparator) {
			if k != "" && !yield(k) {
				return
			}
		}
	}
}
