package core

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// TestRepairRebuildsUnreadableCheckpoint: a checkpoint whose two slots are
// both damaged makes Open refuse with ErrBadCheckpoint (it cannot tell
// durable data from a torn tail), and names the fix; a dry-run repair says
// it would rebuild the checkpoint and changes nothing; the repair rebuilds
// it from a full CRC scan, after which the store opens with every record
// and queue entry back.
func TestRepairRebuildsUnreadableCheckpoint(t *testing.T) {
	fs := vfs.NewCrashFS(21)
	o := testOptions(fs, "/ck")
	s := mustOpen(t, o)
	res := appendN(t, s, 400, "c")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ckPath := filepath.Join(o.Dir, CheckpointFile)
	f, err := fs.OpenReadWrite(ckPath)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, 2*ckptSlot), 0); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.Close()

	_, err = Open(o)
	if !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("open with a damaged checkpoint: %v, want ErrBadCheckpoint", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("keel store repair")) {
		t.Fatalf("the error names no fix: %v", err)
	}
	plan, err := Repair(o, true)
	if err != nil || !plan.RebuildCheckpoint || plan.CutAt != -1 {
		t.Fatalf("dry run: %+v %v, want a checkpoint rebuild and no cut", plan, err)
	}
	if _, err := Open(o); !errors.Is(err, ErrBadCheckpoint) {
		t.Fatalf("a dry run changed the store: open now %v", err)
	}
	if plan, err = Repair(o, false); err != nil || !plan.RebuildCheckpoint {
		t.Fatalf("repair: %+v %v", plan, err)
	}
	s = mustOpen(t, o)
	defer s.Close()
	drain(t, s)
	for _, r := range res {
		if _, err := s.ReadRecord(r.PhysOffset); err != nil {
			t.Fatalf("record at %d after the repair: %v", r.PhysOffset, err)
		}
	}
	for q := int32(0); q < 2; q++ { // appendN alternates two queues
		if got := s.MaxQueueOffset("T", q); got != int64(len(res)/2) {
			t.Fatalf("queue T/%d holds %d entries after the repair, want %d", q, got, len(res)/2)
		}
	}
	verifyStore(t, s)
}
