package engine

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/keelmq/keel/bench/matrix"
)

func run(t *testing.T, c matrix.Cell) *Result {
	t.Helper()
	res, err := Run(context.Background(), Spec{Cell: c, Dir: filepath.Join(t.TempDir(), "cell"), Warmup: 20 * time.Millisecond,
		Duration: 250 * time.Millisecond, SegmentSize: 4 << 20, Queues: 4})
	if err != nil {
		t.Fatalf("%s: %v", c.Key(), err)
	}
	if res.Msgs == 0 || res.MsgsPerSec <= 0 || res.Latency.Count() != uint64(res.Msgs) {
		t.Fatalf("%s: nothing measured: %+v", c.Key(), res)
	}
	if res.Statuses[StatusOK] != res.Msgs {
		t.Errorf("%s: statuses %v for %d msgs", c.Key(), res.Statuses, res.Msgs)
	}
	return res
}

func TestCells(t *testing.T) {
	for _, tc := range []struct {
		cell       matrix.Cell
		wantFsyncs bool // at least one fsync per 100 acks
	}{
		{matrix.Cell{Workload: "produce", Flush: "sync", Replication: "none", Index: "hash", Mode: "builtin", BodyBytes: 128, Producers: 8}, true},
		{matrix.Cell{Workload: "produce", Flush: "async", Replication: "none", Index: "none", Mode: "builtin", BodyBytes: 1000, Producers: 2}, false},
		{matrix.Cell{Workload: "produce", Flush: "buffered", Replication: "async", Index: "none", Mode: "builtin", BodyBytes: 64, Producers: 2}, false},
		{matrix.Cell{Workload: "produce", Flush: "sync", Replication: "sync", Index: "hash", Mode: "builtin", BodyBytes: 128, Producers: 16}, true},
		{matrix.Cell{Workload: "produce-consume", Flush: "async", Replication: "sync", Index: "hash", Mode: "builtin", BodyBytes: 128, Producers: 4}, false},
	} {
		t.Run(tc.cell.Key(), func(t *testing.T) {
			res := run(t, tc.cell)
			if tc.wantFsyncs && (res.Fsyncs == 0 || res.Fsyncs > res.Msgs) {
				t.Errorf("sync flush: %d fsyncs for %d acks", res.Fsyncs, res.Msgs)
			}
			if res.RecordBytes <= tc.cell.BodyBytes {
				t.Errorf("record size %d <= body %d", res.RecordBytes, tc.cell.BodyBytes)
			}
			if res.CPUSecPerMillion <= 0 {
				t.Errorf("cpu per million = %v", res.CPUSecPerMillion)
			}
			if tc.cell.Workload == "produce-consume" && (res.Consumed == 0 || res.EndToEnd.Count() == 0) {
				t.Errorf("nothing consumed: %d", res.Consumed)
			}
			if tc.cell.Replication != "none" && res.ReplLagMaxBytes < 0 {
				t.Errorf("negative lag")
			}
		})
	}
}

func TestUnavailable(t *testing.T) {
	for _, c := range []matrix.Cell{
		{Workload: "produce", Flush: "sync", Replication: "none", Index: "none", Mode: "external", BodyBytes: 10, Producers: 1},
		{Workload: "produce", Flush: "nope", Replication: "none", Index: "none", Mode: "builtin", BodyBytes: 10, Producers: 1},
	} {
		_, err := Run(context.Background(), Spec{Cell: c, Dir: t.TempDir(), Duration: time.Millisecond})
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("%s: err %v, want ErrUnavailable", c.Key(), err)
		}
	}
}

func TestRecordSizeConstant(t *testing.T) {
	a, b := RecordSize(128), RecordSize(4096)
	if b-a != 4096-128 {
		t.Fatalf("record sizes %d and %d do not differ by the body difference", a, b)
	}
}
