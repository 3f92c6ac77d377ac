package cq

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

func TestSet(t *testing.T) {
	root := filepath.Join(t.TempDir(), "cq")
	opts := testOpts(vfs.OS)
	s, err := OpenSet(opts, root)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 0 || s.MaxPhysOffset() != 0 {
		t.Fatalf("new set: len %d maxPhys %d", s.Len(), s.MaxPhysOffset())
	}
	if s.Get("A", 0) != nil {
		t.Fatal("Get on empty set returned a queue")
	}
	if _, err := s.GetOrCreate("a/b", 0); !errors.Is(err, ErrInvalidTopic) {
		t.Fatalf("GetOrCreate bad topic: %v", err)
	}
	if _, err := s.GetOrCreate("A", 70000); !errors.Is(err, ErrInvalidQueueID) {
		t.Fatalf("GetOrCreate bad id: %v", err)
	}
	// Three queues sharing one commitlog stream, interleaved.
	type qk struct {
		topic string
		id    int32
	}
	keys := []qk{{"A", 0}, {"A", 1}, {"%RETRY%g", 0}}
	next := map[qk]int64{}
	var physEnd int64
	for i := int64(0); i < 60; i++ {
		k := keys[i%3]
		q, err := s.GetOrCreate(k.topic, k.id)
		if err != nil {
			t.Fatal(err)
		}
		mustPut(t, q, next[k], ent(i))
		next[k]++
		physEnd = ent(i).End()
	}
	if q1, _ := s.GetOrCreate("A", 0); q1 != s.Get("A", 0) {
		t.Fatal("GetOrCreate returned a different queue than Get")
	}
	if s.Len() != 3 || s.MaxPhysOffset() != physEnd {
		t.Fatalf("len %d maxPhys %d want 3, %d", s.Len(), s.MaxPhysOffset(), physEnd)
	}
	var order []string
	s.Each(func(q *Queue) bool {
		order = append(order, q.Topic()+"/"+string(rune('0'+q.QueueID())))
		return true
	})
	if len(order) != 3 || order[0] != "%RETRY%g/0" || order[1] != "A/0" || order[2] != "A/1" {
		t.Fatalf("Each order %v", order)
	}
	n := 0
	s.Each(func(*Queue) bool { n++; return false })
	if n != 1 {
		t.Fatalf("Each did not stop: %d", n)
	}

	// Stray entries in the root are ignored on open.
	for _, p := range []string{filepath.Join(root, "stray.txt"), filepath.Join(root, "A", "notanid")} {
		f, err := vfs.OS.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if err := vfs.OS.MkdirAll(filepath.Join(root, "A", "007"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetOrCreate("A", 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetOrCreate after Close: %v", err)
	}

	s, err = OpenSet(opts, root)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != 3 || s.MaxPhysOffset() != physEnd {
		t.Fatalf("reopened: len %d maxPhys %d", s.Len(), s.MaxPhysOffset())
	}
	for _, k := range keys {
		q := s.Get(k.topic, k.id)
		if q == nil || q.Max() != 20 {
			t.Fatalf("queue %v after reopen: %v", k, q)
		}
	}
	// Truncate every queue at the commitlog offset of message 45.
	if err := s.TruncatePhys(ent(45).Offset); err != nil {
		t.Fatal(err)
	}
	if got := s.MaxPhysOffset(); got != ent(44).End() {
		t.Fatalf("MaxPhysOffset after truncate %d, want %d", got, ent(44).End())
	}
	if s.Get("A", 0).Max() != 15 || s.Get("A", 1).Max() != 15 || s.Get("%RETRY%g", 0).Max() != 15 {
		t.Fatalf("maxes after truncate: %d %d %d", s.Get("A", 0).Max(), s.Get("A", 1).Max(), s.Get("%RETRY%g", 0).Max())
	}
	// Retention at message 30: each queue's Min moves to its first entry
	// at or above it (message 30 is A/0's 10th, 31 A/1's, 32 %RETRY%g's).
	if err := s.SetMinPhysOffset(ent(30).Offset); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if got := s.Get(k.topic, k.id).Min(); got != 10 {
			t.Fatalf("Min of %v = %d, want 10", k, got)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete("A", 1); err != nil {
		t.Fatal(err)
	}
	if s.Get("A", 1) != nil || s.Len() != 2 {
		t.Fatal("Delete left the queue")
	}
	if _, err := vfs.OS.Stat(filepath.Join(root, "A", "1")); err == nil {
		t.Fatal("Delete left the directory")
	}
	if err := s.Delete("nope", 3); err != nil {
		t.Fatalf("Delete of absent queue: %v", err)
	}
	if err := s.RemoveAll(); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 0 || s.MaxPhysOffset() != 0 {
		t.Fatal("RemoveAll left queues")
	}
	if names := listFiles(t, vfs.OS, root); len(names) != 0 {
		t.Fatalf("RemoveAll left %v", names)
	}
	// The set stays usable.
	q, err := s.GetOrCreate("B", 0)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, q, 7, ent(0))
	if s.MaxPhysOffset() != ent(0).End() {
		t.Fatal("set unusable after RemoveAll")
	}
}

func TestSetOpenFailureClosesQueues(t *testing.T) {
	root := t.TempDir()
	opts := testOpts(vfs.OS)
	s, err := OpenSet(opts, root)
	if err != nil {
		t.Fatal(err)
	}
	q, _ := s.GetOrCreate("A", 0)
	putRange(t, q, 0, 3)
	q, _ = s.GetOrCreate("B", 0)
	putRange(t, q, 0, 3)
	s.Close()
	// Corrupt B: a file of the wrong size.
	createRaw(t, vfs.OS, filepath.Join(root, "B", "0"), 8, testEPF*EntrySize*2)
	if _, err := OpenSet(opts, root); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("OpenSet = %v, want ErrCorrupt", err)
	}
}
