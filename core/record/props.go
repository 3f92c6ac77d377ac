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
	mustProperty(name, value)
	out := make([]byte, 0, len(raw)+len(name)+len(value)+3)
	out = appendWithout(out, raw, name)
	return appendPair(out, name, value)
}

// RemoveProperty returns a new properties string (never aliasing raw)
// without the pairs named name; other pairs keep their bytes and order.
func RemoveProperty(raw []byte, name string) []byte {
	return appendWithout(make([]byte, 0, len(raw)+1), raw, name)
}

// appendWithout appends raw's pairs other than those named name to dst,
// each ended by 0x02.
func appendWithout(dst, raw []byte, name string) []byte {
	for i := 0; i < len(raw); {
		n, _, next, ok := nextPair(raw, i)
		if !ok || string(n) != name {
			end := next
			if end > 0 && raw[end-1] == PropertySeparator {
				end--
			}
			dst = append(dst, raw[i:end]...)
			dst = append(dst, PropertySeparator)
		}
		i = next
	}
	return dst
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
