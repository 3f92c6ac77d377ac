package recovery

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	MaybeChild()
	os.Exit(m.Run())
}

func TestPowerCut(t *testing.T) {
	for _, flush := range []string{"sync", "async"} {
		t.Run(flush, func(t *testing.T) {
			res, err := Run(context.Background(), Spec{Dir: "/store", Size: 2 << 20, Crash: PowerCut, Flush: flush,
				Producers: 3, BodyBytes: 100, SegmentSize: 1 << 20, CrashAfter: 100 * time.Millisecond, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", res)
			if !res.Crashed || res.Acked == 0 || res.StoreBytes < 2<<20 || res.DispatchedMs < res.ReadyMs {
				t.Fatalf("implausible: %+v", res)
			}
			if flush == "sync" && res.AckedLost != 0 {
				t.Fatalf("sync flush lost %d acknowledged messages at a power cut", res.AckedLost)
			}
		})
	}
}

func TestKill9(t *testing.T) {
	for _, flush := range []string{"sync", "async"} {
		t.Run(flush, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			res, err := Run(context.Background(), Spec{Dir: dir, Size: 2 << 20, Crash: Kill9, Flush: flush,
				Producers: 2, BodyBytes: 100, SegmentSize: 1 << 20, CrashAfter: 100 * time.Millisecond,
				Command: []string{os.Args[0], "-test.run=^$"}})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", res)
			if !res.Crashed || res.Acked == 0 || res.StoreBytes < 2<<20 {
				t.Fatalf("implausible: %+v", res)
			}
			// SIGKILL keeps the page cache: nothing acknowledged is lost,
			// whatever the flush strategy.
			if res.AckedLost != 0 {
				t.Fatalf("kill -9 lost %d acknowledged messages", res.AckedLost)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("store dir left behind")
			}
		})
	}
}

func TestSpecErrors(t *testing.T) {
	for _, s := range []Spec{{}, {Dir: "/x", Crash: "meteor", Flush: "sync"}, {Dir: "/x", Crash: Kill9, Flush: "sometimes"}} {
		if _, err := Run(context.Background(), s); err == nil {
			t.Errorf("%+v should fail", s)
		}
	}
}
