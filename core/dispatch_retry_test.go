package core

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core/vfs"
)

// failingListener fails every Dispatch while failing is set.
type failingListener struct {
	failing atomic.Bool
	calls   atomic.Int64
}

func (l *failingListener) Dispatch([]DispatchRecord) error {
	l.calls.Add(1)
	if l.failing.Load() {
		return errors.New("no space left on device")
	}
	return nil
}
func (l *failingListener) Sync() error { return nil }

// syncBuffer is a bytes.Buffer safe for the store's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestDispatchRetryBacksOff: a listener that keeps failing with the same
// error is retried with a growing delay and logged once, not ten times a
// second (a full disk used to write the same error line ~10 times a second
// for as long as it lasted); when it succeeds again dispatch catches up
// and says it recovered.
func TestDispatchRetryBacksOff(t *testing.T) {
	l := &failingListener{}
	l.failing.Store(true)
	var logs syncBuffer
	o := testOptions(vfs.NewCrashFS(1), "/retry")
	o.Listeners = []DispatchListener{l}
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s := mustOpen(t, o)
	defer s.Close()
	if _, err := s.Append(msg("T", 0, "x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	// With a fixed 100 ms delay 2 s is about 20 passes; with the delay
	// doubling from 100 ms (100+200+400+800 ms, then 1.6 s) at most 6.
	if n := l.calls.Load(); n < 2 || n > 8 {
		t.Errorf("%d dispatch passes in 2 s of failures, want the retries to back off (2 to 8)", n)
	}
	if n := strings.Count(logs.String(), "dispatch failed"); n != 1 {
		t.Errorf("the same dispatch error was logged %d times in 2 s, want once:\n%s", n, logs.String())
	}
	l.failing.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for s.dispatched.Load() < s.confirmOffset() {
		if time.Now().After(deadline) {
			t.Fatal("dispatch did not catch up once the listener recovered")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for !strings.Contains(logs.String(), "dispatch recovered") {
		if time.Now().After(deadline) {
			t.Fatalf("no recovery logged:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
