//go:build invariants

package core

import (
	"fmt"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// violate installs an invariants hook that raises the named position of
// every chain asserted at where above the position that follows it, and
// returns a function that removes the hook.
func violate(where, name string) func() {
	h := func(w string, chain []namedPos) {
		if w != where {
			return
		}
		for i := 0; i+1 < len(chain); i++ {
			if chain[i].name == name {
				chain[i].off = chain[i+1].off + 1
			}
		}
	}
	invariantsHook.Store(&h)
	return func() { invariantsHook.Store(nil) }
}

// mustPanic runs fn and returns what it panicked with.
func mustPanic(t *testing.T, fn func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic: the invariants check did not fire")
		}
		msg = fmt.Sprint(r)
	}()
	fn()
	return ""
}

// TestInvariantsFire shows each kind of assertion firing, through the hook,
// with every position named, and the store usable afterwards.
func TestInvariantsFire(t *testing.T) {
	for _, tc := range []struct {
		where, name string
		change      func(s *Store)
		want        string
	}{
		{"flush", "flushed", func(s *Store) { s.Flush() }, "flushed"},
		{"redispatch", "dispatched", func(s *Store) { s.RedispatchFromCheckpoint() }, "dispatched"},
		{"redispatch", "flushed", func(s *Store) { s.RedispatchFromCheckpoint() }, "flushed"},
	} {
		t.Run(tc.where+"/"+tc.name, func(t *testing.T) {
			// No background flush (no FlushInterval, no tail keeper): the
			// hook must fire on this goroutine only.
			o := testOptions(vfs.NewCrashFS(1), "/s")
			o.RecoveryTail = -1
			s := mustOpen(t, o)
			defer s.Close()
			appendN(t, s, 10, "m")
			if tc.where == "redispatch" {
				drain(t, s) // something to rewind
				if _, err := s.Flush(); err != nil {
					t.Fatal(err)
				}
				if err := s.Checkpoint(); err != nil {
					t.Fatal(err)
				}
				appendN(t, s, 10, "n")
				drain(t, s)
			}
			undo := violate(tc.where, tc.name)
			msg := mustPanic(t, func() { tc.change(s) })
			undo()
			if !strings.Contains(msg, "keel invariants: "+tc.where) || !strings.Contains(msg, tc.want+" ") {
				t.Fatalf("panic %q does not name %s at %s", msg, tc.want, tc.where)
			}
			for _, p := range []string{"min", "dispatched", "confirm", "flushed", "committed", "wrote"} {
				if !strings.Contains(msg, p+" ") {
					t.Errorf("panic %q does not name %s", msg, p)
				}
			}
			appendN(t, s, 1, "after") // the locks were released
		})
	}
}

// TestInvariantsHold runs appends, flushes, dispatch, checkpoints and a
// reopen with the assertions on and no hook: none fires.
func TestInvariantsHold(t *testing.T) {
	fs := vfs.NewCrashFS(1)
	s := mustOpen(t, testOptions(fs, "/s"))
	for i := 0; i < 5; i++ {
		appendN(t, s, 200, fmt.Sprintf("r%d-", i))
		if _, err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		drain(t, s)
		if err := s.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	s.RedispatchFromCheckpoint()
	drain(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, testOptions(fs, "/s"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// zeroConfirm is a confirm source that has heard from no replica yet.
type zeroConfirm struct{}

func (zeroConfirm) ConfirmOffset() int64 { return 0 }

// TestInvariantsConfirmBelowDispatched: a store reopened with a confirm
// source that starts at 0 (visible after replication, before any replica
// reports) has dispatched past its confirm offset; that is no violation,
// at open or on the appends that follow.
func TestInvariantsConfirmBelowDispatched(t *testing.T) {
	fs := vfs.NewCrashFS(1)
	s := mustOpen(t, testOptions(fs, "/s"))
	appendN(t, s, 50, "a-")
	drain(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o := testOptions(fs, "/s")
	o.Confirm = zeroConfirm{}
	s = mustOpen(t, o)
	appendN(t, s, 10, "b-")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
