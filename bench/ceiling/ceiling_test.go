package ceiling

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/keelmq/keel/core/vfs"
)

func TestNewStat(t *testing.T) {
	for _, tc := range []struct {
		in            []float64
		med, min, max float64
	}{
		{nil, 0, 0, 0},
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
	} {
		s := NewStat(tc.in)
		if s.Median != tc.med || s.Min != tc.min || s.Max != tc.max {
			t.Errorf("NewStat(%v) = %+v", tc.in, s)
		}
		if len(tc.in) > 0 && s.Runs[0] != tc.in[0] {
			t.Errorf("runs must keep the measured order: %v", s.Runs)
		}
	}
}

// TestRunOS runs every probe briefly on the real disk and checks the
// results are plausible and the probe files are gone afterwards.
func TestRunOS(t *testing.T) {
	dir := t.TempDir()
	res, err := Run(context.Background(), Options{Dir: dir, FileSize: 1 << 20, Duration: 50 * time.Millisecond,
		Repeats: 2, LargeWrite: 256 << 10, RecordBytes: []int{200}, Producers: []int{1, 8}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.SeqWrite) != 4 || len(res.Serial) != 2 || len(res.Group) != 4 {
		t.Fatalf("probes: %+v", res)
	}
	for _, s := range res.SeqWrite {
		if s.MBPerSec.Median <= 0 || len(s.MBPerSec.Runs) != 2 {
			t.Errorf("seq %s %d: %+v", s.Method, s.WriteBytes, s.MBPerSec)
		}
	}
	if res.SerialPerSec(200) <= 0 || res.GroupPerSec(8, 190) <= 0 || res.GroupPerSec(3, 200) != 0 {
		t.Errorf("lookups: serial %v group8 %v group3 %v", res.SerialPerSec(200), res.GroupPerSec(8, 190), res.GroupPerSec(3, 200))
	}
	if res.BestSeqMBPerSec() < res.SeqMBPerSec(MethodPwrite, 4096) {
		t.Error("best bandwidth below one of the probes")
	}
	for _, g := range res.Group {
		if g.AvgBatch < 1 || g.AvgBatch > float64(g.Producers) {
			t.Errorf("group %d: avg batch %v outside [1, producers]", g.Producers, g.AvgBatch)
		}
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Errorf("probe files left behind: %v", left)
	}
}

// TestGroupCommitDurable checks on CrashFS that the group-commit probe
// really syncs what it releases: after a crash the durable bytes cover
// every released record.
func TestGroupCommitDurable(t *testing.T) {
	for _, m := range []Method{MethodMmap, MethodPwrite} {
		fs := vfs.NewCrashFS(1)
		o := Options{Dir: "/probe", FS: fs, FileSize: 64 << 10, LargeWrite: 16 << 10, Duration: 30 * time.Millisecond, RecordBytes: []int{100}}
		r, err := GroupCommitRun(context.Background(), o, m, 4, 100)
		if err != nil {
			t.Fatal(err)
		}
		st := fs.Stats()
		if r.Records == 0 || st.Datasyncs == 0 {
			t.Fatalf("%s: records %d datasyncs %d", m, r.Records, st.Datasyncs)
		}
		// Every released record was synced: the synced bytes (counted per
		// changed 4 KiB page) cover the records written.
		if st.SyncedBytes < r.Records*100/2 {
			t.Errorf("%s: synced %d bytes for %d records", m, st.SyncedBytes, r.Records)
		}
	}
}

func TestOptionsErrors(t *testing.T) {
	for _, o := range []Options{
		{},
		{Dir: "x", FileSize: 100, LargeWrite: 200},
		{Dir: "x", RecordBytes: []int{0}},
		{Dir: "x", Producers: []int{-1}},
	} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v) should fail", o)
		}
	}
}
