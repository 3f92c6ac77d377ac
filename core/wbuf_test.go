package core

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestCommitOnWait: appends stay in the ring (the segment file is not
// written, through its mapping or otherwise) until WaitCommitted, which
// commits everything appended with pwrite and returns past it; a failed
// write makes the store read-only and the error reaches the waiter; a
// batch larger than half the ring is refused.
func TestCommitOnWait(t *testing.T) {
	fs := vfs.NewCrashFS(22)
	o := testOptions(fs, "/cow")
	o.WriteBuffer = 64 << 10
	o.CommitOnWait = true
	s := mustOpen(t, o)
	ctx := context.Background()

	seg := filepath.Join("/cow", "commitlog", fmt.Sprintf("%020d", 0))
	fileHas := func(body string) bool {
		f, err := fs.Open(seg)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 4096)
		if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		return bytes.Contains(buf, []byte(body))
	}
	var last AppendResult
	for i := 0; i < 3; i++ {
		r, err := s.Append(msg("T", 0, fmt.Sprintf("cow-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		last = r
	}
	if p := s.Positions(); p.Committed != 0 || p.Wrote != last.End() {
		t.Fatalf("after appends: %+v", p)
	}
	if fileHas("cow-0") {
		t.Fatal("an append reached the segment file before anyone waited")
	}
	writes := fs.Stats().Writes
	c, err := s.WaitCommitted(ctx, 0)
	if err != nil || c != last.End() {
		t.Fatalf("WaitCommitted = %d, %v; want %d", c, err, last.End())
	}
	if got := fs.Stats().Writes - writes; got != 1 {
		t.Fatalf("committing three appends took %d writes, want one pwrite", got)
	}
	if !fileHas("cow-2") {
		t.Fatal("committed records not in the segment file")
	}

	// A waiter blocks until the next append, then returns past it.
	got := make(chan int64, 1)
	go func() {
		c, err := s.WaitCommitted(ctx, last.End())
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	select {
	case c := <-got:
		t.Fatalf("WaitCommitted returned %d with nothing appended", c)
	case <-time.After(20 * time.Millisecond):
	}
	r, err := s.Append(msg("T", 0, "cow-late"))
	if err != nil {
		t.Fatal(err)
	}
	if c := <-got; c != r.End() {
		t.Fatalf("WaitCommitted after an append = %d, want %d", c, r.End())
	}

	// Too big for the ring.
	big := msg("T", 0, strings.Repeat("x", 40<<10))
	if _, err := s.Append(big); !errors.Is(err, ErrMessage) {
		t.Fatalf("batch over half the ring: %v, want ErrMessage", err)
	}

	// A failed pwrite: read-only, the waiter learns why, nothing committed.
	before := s.Positions().Committed
	if _, err := s.Append(msg("T", 0, "cow-eio")); err != nil {
		t.Fatal(err)
	}
	fs.InjectFault(vfs.Fault{Ops: vfs.OpWrite, PathPrefix: "/cow/commitlog", Count: 1})
	if _, err := s.WaitCommitted(ctx, before); !errors.Is(err, ErrReadOnly) || !errors.Is(err, vfs.ErrIO) {
		t.Fatalf("WaitCommitted after a failed write: %v, want ErrReadOnly wrapping EIO", err)
	}
	if p := s.Positions(); p.Committed != before {
		t.Fatalf("committed moved to %d past a failed write (was %d)", p.Committed, before)
	}
	if _, err := s.Append(msg("T", 0, "after")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("append on a read-only store: %v", err)
	}
	s.Close()
}

func TestCommitOnWaitNeedsBuffer(t *testing.T) {
	o := testOptions(vfs.NewCrashFS(1), "/x")
	o.CommitOnWait = true
	if _, err := Open(o); err == nil {
		t.Fatal("CommitOnWait without a write buffer opened")
	}
}

// TestOnFlushed: the callback runs once with true after the flush that
// covers the offset (inline when already flushed), with false after its
// timeout, and with false at Close for what was never flushed.
func TestOnFlushed(t *testing.T) {
	fs := vfs.NewCrashFS(23)
	s := mustOpen(t, testOptions(fs, "/of"))
	r, err := s.Append(msg("T", 0, "one"))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan bool, 4)
	s.OnFlushed(r.End(), time.Hour, func(ok bool) { got <- ok })
	select {
	case ok := <-got:
		t.Fatalf("called (%v) before a flush", ok)
	default:
	}
	if _, err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if ok := <-got; !ok {
		t.Fatal("flush covered the offset, callback got false")
	}
	s.OnFlushed(r.End(), time.Hour, func(ok bool) { got <- ok })
	if ok := <-got; !ok {
		t.Fatal("already flushed: want an immediate true")
	}
	r2, _ := s.Append(msg("T", 0, "two"))
	s.OnFlushed(r2.End(), 5*time.Millisecond, func(ok bool) { got <- ok })
	if ok := <-got; ok {
		t.Fatal("timeout: callback got true")
	}
	r3, _ := s.Append(msg("T", 0, "three"))
	s.OnFlushed(r3.End()+1, time.Hour, func(ok bool) { got <- ok }) // past the end: never flushed
	s.Close()
	if ok := <-got; ok {
		t.Fatal("close: callback for an offset never flushed got true")
	}
	select {
	case ok := <-got:
		t.Fatalf("a callback ran twice (%v)", ok)
	case <-time.After(20 * time.Millisecond):
	}
}

// TestAppendRaw copies one store's log into another with AppendRaw (as a
// replica does, across segment ends), compares the bytes, and checks that
// a failed write makes the replica read-only instead of half-appending.
func TestAppendRaw(t *testing.T) {
	src := mustOpen(t, testOptions(vfs.NewCrashFS(31), "/src"))
	defer src.Close()
	for i := 0; i < 600; i++ {
		if _, err := src.Append(msg("T", int32(i%3), fmt.Sprintf("raw-%04d", i))); err != nil {
			t.Fatal(err)
		}
	}
	fs := vfs.NewCrashFS(32)
	dst := mustOpen(t, testOptions(fs, "/dst"))
	end := src.Positions().Committed
	for off := int64(0); off < end; {
		b, err := src.ReadLog(off, 7000)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.AppendRaw(off, b); err != nil {
			t.Fatalf("AppendRaw at %d: %v", off, err)
		}
		off += int64(len(b))
	}
	if got := dst.Positions().Committed; got != end {
		t.Fatalf("replica ends at %d, source at %d", got, end)
	}
	for off := int64(0); off < end; {
		a, _ := src.ReadLog(off, 1<<20)
		b, err := dst.ReadLog(off, 1<<20)
		if err != nil || !bytes.Equal(a, b) {
			t.Fatalf("bytes differ at %d (%v)", off, err)
		}
		off += int64(len(a))
	}
	drain(t, dst)
	verifyStore(t, dst)

	r, err := src.Append(msg("T", 0, "after"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := src.ReadLog(r.PhysOffset, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	fs.InjectFault(vfs.Fault{Ops: vfs.OpWrite, PathPrefix: "/dst/commitlog", Count: 1})
	if err := dst.AppendRaw(r.PhysOffset, b); !errors.Is(err, ErrReadOnly) || !errors.Is(err, vfs.ErrIO) {
		t.Fatalf("AppendRaw with a failing write: %v, want ErrReadOnly wrapping EIO", err)
	}
	if got := dst.Positions().Committed; got != end {
		t.Fatalf("a failed AppendRaw moved the end to %d (was %d)", got, end)
	}
	dst.Close()
}
