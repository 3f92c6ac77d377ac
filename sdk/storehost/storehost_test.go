package storehost

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk"
)

func testStore(t *testing.T) *core.Store {
	t.Helper()
	s, err := core.Open(core.Options{Dir: t.TempDir(), SegmentSize: 256 << 10, CQEntriesPerFile: 1024, MaxMessageSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addr := netip.MustParseAddrPort("127.0.0.1:10911")
	for i := 0; i < 300; i++ {
		m := &record.Message{Topic: "T", QueueID: int32(i % 4), Body: bytes.Repeat([]byte{byte(i)}, 1000),
			BornHost: addr, StoreHost: addr, BornTimestamp: 1}
		if _, err := s.Append(m); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestReadLogInto: the same bytes as ReadLog at every batch of the log
// (segment ends included), read into one reused buffer without
// allocating; empty at the end; sdk.ErrOffset beyond it.
func TestReadLogInto(t *testing.T) {
	s := testStore(t)
	h := New(s, nil)
	ctx := context.Background()
	end := s.Positions().Committed
	buf := make([]byte, 0, 64<<10)
	for off := int64(0); off < end; {
		want, err := h.ReadLog(ctx, off, 16<<10)
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.ReadLogInto(ctx, off, 16<<10, buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || len(got) == 0 {
			t.Fatalf("at %d: ReadLogInto gave %d bytes, ReadLog %d (or they differ)", off, len(got), len(want))
		}
		if &got[0] != &buf[:1][0] {
			t.Fatalf("at %d: ReadLogInto did not fill the caller's buffer", off)
		}
		off += int64(len(got))
	}
	if allocs := testing.AllocsPerRun(20, func() {
		if _, err := h.ReadLogInto(ctx, 0, 16<<10, buf); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("ReadLogInto into a large enough buffer allocates %v times per call", allocs)
	}
	if b, err := h.ReadLogInto(ctx, end, 16<<10, buf); err != nil || len(b) != 0 {
		t.Fatalf("at the end: %d bytes, %v", len(b), err)
	}
	if _, err := h.ReadLogInto(ctx, end+1, 16<<10, buf); !errors.Is(err, sdk.ErrOffset) {
		t.Fatalf("beyond the end: %v, want sdk.ErrOffset", err)
	}
	// A buffer too small grows.
	if b, err := h.ReadLogInto(ctx, 0, 16<<10, nil); err != nil || len(b) < 16<<10-2000 {
		t.Fatalf("nil buffer: %d bytes, %v", len(b), err)
	}
}
