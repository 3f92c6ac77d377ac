package meta

import (
	"fmt"
	"maps"
	"slices"
)

// The rules the tables share about their content, a map guarded by the
// embedded table's mu. Each *Locked function must be called with mu held
// for writing.

// setLocked stores v under k unless it is there already, and records the
// change in t; it reports whether the table changed.
func setLocked[K, V comparable](t *table, m map[K]V, k K, v V) bool {
	if old, ok := m[k]; ok && old == v {
		return false
	}
	m[k] = v
	t.changedLocked()
	return true
}

// insertLocked stores v under k if k is absent, recording the change in t,
// and returns v and true; if k is present it returns the stored value and
// false.
func insertLocked[K comparable, V any](t *table, m map[K]V, k K, v V) (V, bool) {
	if old, ok := m[k]; ok {
		return old, false
	}
	m[k] = v
	t.changedLocked()
	return v, true
}

// deleteLocked removes k, recording the change in t, and reports whether k
// was there.
func deleteLocked[K comparable, V any](t *table, m map[K]V, k K) bool {
	if _, ok := m[k]; !ok {
		return false
	}
	delete(m, k)
	t.changedLocked()
	return true
}

// replaceLocked is the version-gated replace of topics and subscription
// groups (RocketMQ's): if v differs from t's version, *content becomes a
// copy of src, t adopts v, and it reports true; if they are equal it does
// nothing and reports false.
func replaceLocked[K comparable, V any](t *table, content *map[K]V, src map[K]V, v DataVersion) bool {
	if t.version.Equal(v) {
		return false
	}
	*content = orEmpty(maps.Clone(src))
	t.adoptLocked(v)
	return true
}

// mergeMax is the merge of consumer and delay offsets (see the package
// doc): every offset of src that dst lacks or holds lower is copied into
// dst, never lowering one. It reports whether dst changed.
func mergeMax[K comparable](dst, src map[K]int64) bool {
	changed := false
	for k, off := range src {
		if cur, ok := dst[k]; !ok || off > cur {
			dst[k] = off
			changed = true
		}
	}
	return changed
}

// orEmpty returns m, or an empty map if m is nil (a table decoded from a
// file or snapshot without one).
func orEmpty[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return map[K]V{}
	}
	return m
}

// sortedValues returns m's values in the order of their names.
func sortedValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[name])
	}
	return out
}

// config is what the topic and subscription group tables hold.
type config interface {
	// name is the key the config is stored under.
	name() string
	Validate() error
}

// validateConfigs checks a name → config table as decoded from a file or
// snapshot: every config valid and stored under its own name. kind names a
// config in the error ("topic", "group"), table the table; errors wrap
// ErrInvalid.
func validateConfigs[C config](table, kind string, m map[string]C) error {
	for name, c := range m {
		if name != c.name() {
			return fmt.Errorf("%w: %s key %q holds %s %q", ErrInvalid, table, name, kind, c.name())
		}
		if err := c.Validate(); err != nil {
			return err
		}
	}
	return nil
}
