package builtins

import (
	"slices"
	"testing"

	flush "github.com/keelmq/keel/plugins/flush-strategies"
	"github.com/keelmq/keel/sdk"
)

func TestCatalog(t *testing.T) {
	c := Catalog()
	if got := c.Names(sdk.KindFlush); !slices.Equal(got, slices.Sorted(slices.Values(flush.Names()))) {
		t.Errorf("flush builtins %v, want %v", got, flush.Names())
	}
	if got := c.Names(sdk.KindIndex); !slices.Equal(got, []string{"hash"}) {
		t.Errorf("index builtins %v", got)
	}
	if got := c.Names(sdk.KindReplication); !slices.Equal(got, []string{"async", "sync"}) {
		t.Errorf("replication builtins %v", got)
	}
	for _, kind := range []sdk.Kind{sdk.KindFlush, sdk.KindIndex, sdk.KindReplication} {
		for _, name := range c.Names(kind) {
			f, _ := c.Lookup(kind, name)
			if p := f(); p == nil {
				t.Errorf("%s builtin %q: factory made nil", kind, name)
			}
		}
	}
}
