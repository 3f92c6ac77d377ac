package builtins

import (
	"slices"
	"testing"

	"github.com/keelmq/keel/host"
	flush "github.com/keelmq/keel/plugins/flush-strategies"
	"github.com/keelmq/keel/sdk"
)

func TestRegister(t *testing.T) {
	Register()
	Register() // a second call is a no-op, not a duplicate-name panic
	if got := host.Builtins(sdk.KindFlush); !slices.Equal(got, slices.Sorted(slices.Values(flush.Names()))) {
		t.Errorf("flush builtins %v, want %v", got, flush.Names())
	}
	if got := host.Builtins(sdk.KindIndex); !slices.Equal(got, []string{"hash"}) {
		t.Errorf("index builtins %v", got)
	}
	if got := host.Builtins(sdk.KindReplication); !slices.Equal(got, []string{"async", "sync"}) {
		t.Errorf("replication builtins %v", got)
	}
}
