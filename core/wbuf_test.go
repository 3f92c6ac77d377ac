package core

import (
	"fmt"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

func TestWriteBuffer(t *testing.T) {
	fs := vfs.NewCrashFS(21)
	o := testOptions(fs, "/wb")
	o.WriteBuffer = 64 << 10
	s := mustOpen(t, o)
	r, err := s.Append(msg("T", 0, "first"))
	if err != nil {
		t.Fatal(err)
	}
	p := s.Positions()
	if p.Committed != 0 || p.Wrote != r.End() {
		t.Fatalf("before commit: %+v", p)
	}
	if _, err := s.ReadRecord(r.PhysOffset); err == nil {
		t.Fatal("uncommitted record readable")
	}
	if c, _ := s.Commit(); c != r.End() {
		t.Fatalf("commit returned %d want %d", c, r.End())
	}
	if _, err := s.ReadRecord(r.PhysOffset); err != nil {
		t.Fatalf("committed record unreadable: %v", err)
	}
	// Many segments' worth, larger than the ring: inline commits and
	// BLANK padding go through the ring.
	var res []AppendResult
	for i := 0; i < 3000; i++ {
		r, err := s.Append(msg("T", int32(i%2), fmt.Sprintf("b-%05d", i)))
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
		if i%700 == 0 {
			s.Commit()
		}
	}
	s.Commit()
	drain(t, s)
	verifyStore(t, s)
	for _, r := range res {
		if _, err := s.ReadRecord(r.PhysOffset); err != nil {
			t.Fatalf("record at %d: %v", r.PhysOffset, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Uncommitted bytes are lost in a crash; committed and flushed ones are not.
	s = mustOpen(t, o)
	before := s.Positions().Committed
	s.Append(msg("T", 0, "volatile"))
	s.abandon()
	fs.CrashWith(vfs.CrashOptions{})
	s = mustOpen(t, o)
	defer s.Close()
	if got := s.Positions().Committed; got != before {
		t.Fatalf("after crash end %d, want %d", got, before)
	}
	verifyStore(t, s)
}
