package host

import (
	"slices"
	"testing"

	"github.com/keelmq/keel/sdk"
)

func TestCatalog(t *testing.T) {
	var c Catalog
	f := func() sdk.Plugin { return nil }
	for _, name := range []string{"b", "a"} {
		if err := c.Add(sdk.KindFlush, name, f); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Add(sdk.KindFlush, "a", f); err == nil {
		t.Error("a duplicate name was added")
	}
	if err := c.Add(sdk.KindIndex, "a", f); err != nil {
		t.Errorf("the same name under another kind: %v", err)
	}
	if got := c.Names(sdk.KindFlush); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Names = %v, want [a b]", got)
	}
	if _, ok := c.Lookup(sdk.KindReplication, "a"); ok {
		t.Error("Lookup found a name of another kind")
	}
	var nilCat *Catalog
	if _, ok := nilCat.Lookup(sdk.KindFlush, "a"); ok || nilCat.Names(sdk.KindFlush) != nil {
		t.Error("a nil catalog is not empty")
	}
}
