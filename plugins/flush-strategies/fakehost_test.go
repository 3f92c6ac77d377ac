package flushstrategies

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
)

// fakeHost is an sdk.Host with scripted positions. With buffered set,
// appends land in wrote and Commit moves them to committed, as a store with
// a write buffer does. Flush captures its target (committed) on entry, as
// core.Store.Flush does, then waits for gate (if set) and applies it.
type fakeHost struct {
	mu        sync.Mutex
	buffered  bool
	wrote     int64
	committed int64
	flushed   int64
	changed   chan struct{} // closed and replaced when committed changes

	gate     chan struct{} // if non-nil, each Flush receives from it before finishing
	entered  chan int64    // if non-nil, each Flush sends its target on entry
	flushErr error

	flushCalls  int
	commitCalls int
	order       []string // "commit" and "flush" calls in order
	logs        []string
}

var _ sdk.Host = (*fakeHost)(nil)

func newFakeHost() *fakeHost { return &fakeHost{changed: make(chan struct{})} }

// add appends n bytes.
func (h *fakeHost) add(n int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.wrote += n
	if !h.buffered {
		h.committed = h.wrote
		close(h.changed)
		h.changed = make(chan struct{})
	}
}

func (h *fakeHost) snapshot() (wrote, committed, flushed int64, flushes, commits int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wrote, h.committed, h.flushed, h.flushCalls, h.commitCalls
}

// ungate makes later Flush calls finish without waiting.
func (h *fakeHost) ungate() {
	h.mu.Lock()
	h.gate, h.entered = nil, nil
	h.mu.Unlock()
}

func (h *fakeHost) setFlushErr(err error) {
	h.mu.Lock()
	h.flushErr = err
	h.mu.Unlock()
}

func (h *fakeHost) logged() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.logs...)
}

func (h *fakeHost) Positions(ctx context.Context) (sdk.Positions, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return sdk.Positions{Confirm: h.committed, Flushed: h.flushed, Committed: h.committed, Dispatched: h.committed}, nil
}

func (h *fakeHost) WaitCommitted(ctx context.Context, after int64) (int64, error) {
	for {
		h.mu.Lock()
		c, ch := h.committed, h.changed
		h.mu.Unlock()
		if c > after {
			return c, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return c, ctx.Err()
		}
	}
}

func (h *fakeHost) Commit(ctx context.Context) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.commitCalls++
	h.order = append(h.order, "commit")
	if h.committed != h.wrote {
		h.committed = h.wrote
		close(h.changed)
		h.changed = make(chan struct{})
	}
	return h.committed, nil
}

func (h *fakeHost) Flush(ctx context.Context) (int64, error) {
	h.mu.Lock()
	h.flushCalls++
	h.order = append(h.order, "flush")
	target, gate, entered, err := h.committed, h.gate, h.entered, h.flushErr
	h.mu.Unlock()
	if err != nil {
		return h.flushed, err
	}
	if entered != nil {
		entered <- target
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if target > h.flushed {
		h.flushed = target
	}
	return h.flushed, nil
}

func (h *fakeHost) ReadLog(context.Context, int64, int) ([]byte, error) {
	return nil, sdk.ErrNotSupported
}
func (h *fakeHost) AppendLog(context.Context, int64, []byte) error { return sdk.ErrNotSupported }
func (h *fakeHost) TruncateLog(context.Context, int64) error       { return sdk.ErrNotSupported }
func (h *fakeHost) ReadRecord(context.Context, int64) ([]byte, error) {
	return nil, sdk.ErrNotSupported
}
func (h *fakeHost) Epochs(context.Context) ([]sdk.Epoch, error)  { return nil, nil }
func (h *fakeHost) SetEpochs(context.Context, []sdk.Epoch) error { return sdk.ErrNotSupported }
func (h *fakeHost) MetaSnapshot(context.Context) ([]byte, error) { return nil, sdk.ErrNotSupported }
func (h *fakeHost) MetaApply(context.Context, []byte) error      { return sdk.ErrNotSupported }
func (h *fakeHost) ReportReplication(context.Context, sdk.ReplicationState) error {
	return sdk.ErrNotSupported
}
func (h *fakeHost) Log(ctx context.Context, level int, msg string, attrs map[string]string) {
	h.mu.Lock()
	h.logs = append(h.logs, fmt.Sprintf("%d %s %v", level, msg, attrs))
	h.mu.Unlock()
}

// eventually polls cond every millisecond for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// configured returns the strategy name configured from a [flush.config]
// body (TOML lines).
func configured(t testing.TB, name, body string) sdk.FlushStrategy {
	t.Helper()
	s, err := New(name)
	if err != nil {
		t.Fatal(err)
	}
	doc := "[flush]\nplugin = \"" + name + "\"\n[flush.config]\n" + body
	if err := s.Configure(context.Background(), sdk.Config{Name: name, File: "test.toml", Document: []byte(doc), Section: "flush"}); err != nil {
		t.Fatal(err)
	}
	return s
}

var errDisk = errors.New("fdatasync: input/output error")
