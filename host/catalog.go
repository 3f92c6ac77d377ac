package host

import (
	"fmt"
	"sort"

	"github.com/keelmq/keel/sdk"
)

// Catalog is the builtin plugins a node may load: for each kind, the names
// profiles use (`plugin = "<name>"`) and a factory of fresh instances.
// keel's own is internal/builtins.Catalog; a test builds its own.
//
// The zero value is an empty catalog, and so is a nil *Catalog for
// Names and Lookup. Add fills a catalog before it is handed to a node;
// after that it is only read, and reads are safe from any goroutine. Add
// must not run concurrently with anything else on the same catalog.
type Catalog struct {
	byKind map[sdk.Kind]map[string]Factory
}

// Add adds the builtin name of kind. A name already in the catalog for
// that kind is an error (the catalog is unchanged).
func (c *Catalog) Add(kind sdk.Kind, name string, f Factory) error {
	if _, dup := c.Lookup(kind, name); dup {
		return fmt.Errorf("builtin %s plugin %q added twice", kind, name)
	}
	if c.byKind == nil {
		c.byKind = map[sdk.Kind]map[string]Factory{}
	}
	if c.byKind[kind] == nil {
		c.byKind[kind] = map[string]Factory{}
	}
	c.byKind[kind][name] = f
	return nil
}

// Names lists the builtin names of kind, sorted.
func (c *Catalog) Names(kind sdk.Kind) []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.byKind[kind]))
	for name := range c.byKind[kind] {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the factory of the builtin name of kind.
func (c *Catalog) Lookup(kind sdk.Kind, name string) (Factory, bool) {
	if c == nil {
		return nil, false
	}
	f, ok := c.byKind[kind][name]
	return f, ok
}
