package replication

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

var _ LogIntoReader = (*storehost.Host)(nil)

// plainHost hides every optional capability of the host it wraps (as a
// host reached over the plugin protocol would) and counts ReadLog calls.
type plainHost struct {
	sdk.Host
	reads atomic.Int64
}

func (h *plainHost) ReadLog(ctx context.Context, from int64, maxBytes int) ([]byte, error) {
	h.reads.Add(1)
	return h.Host.ReadLog(ctx, from, maxBytes)
}

// intoHost counts how the replicator reads the log: ReadLog, ReadLogInto
// with an empty buffer, ReadLogInto with a buffer it had filled before.
type intoHost struct {
	*storehost.Host
	plain, fresh, reused atomic.Int64
}

func (h *intoHost) ReadLog(ctx context.Context, from int64, maxBytes int) ([]byte, error) {
	h.plain.Add(1)
	return h.Host.ReadLog(ctx, from, maxBytes)
}

func (h *intoHost) ReadLogInto(ctx context.Context, from int64, maxBytes int, buf []byte) ([]byte, error) {
	if cap(buf) > 0 {
		h.reused.Add(1)
	} else {
		h.fresh.Add(1)
	}
	return h.Host.ReadLogInto(ctx, from, maxBytes, buf)
}

// TestStreamReadsIntoReusedBuffer: a master whose host has LogIntoReader
// streams through it, reusing one buffer (one fresh read, the rest into
// the buffer), and the replica gets identical bytes; a host without the
// capability is read with ReadLog.
func TestStreamReadsIntoReusedBuffer(t *testing.T) {
	for _, capable := range []bool{true, false} {
		dirs := tempDirs(t, "m", "s")
		m := newNode(t, "m", dirs[0], false)
		var ih *intoHost
		var ph *plainHost
		m.wrap = func(h sdk.Host) sdk.Host {
			if capable {
				ih = &intoHost{Host: h.(*storehost.Host)}
				return ih
			}
			ph = &plainHost{Host: h}
			return ph
		}
		m.start(RoleMaster, "", fastOpts())
		s := newNode(t, "s", dirs[1], false)
		s.start(RoleSlave, m.repl.Addr(), fastOpts())
		var end int64
		for i := 0; i < 20; i++ {
			end = m.appendN(50, 3000, "r")
			time.Sleep(time.Millisecond) // several frames
		}
		eventually(t, 5*time.Second, "slave has the log", func() bool { return s.store.Positions().Committed == end })
		for off := int64(0); off < end; {
			mb, err := m.store.ReadLog(off, int(end))
			if err != nil {
				t.Fatal(err)
			}
			sb, err := s.store.ReadLog(off, int(end))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mb, sb) {
				t.Fatalf("slave bytes at %d differ from the master's", off)
			}
			off += int64(len(mb))
		}
		if capable {
			if ih.plain.Load() != 0 || ih.fresh.Load() != 1 || ih.reused.Load() == 0 {
				t.Fatalf("capable host: ReadLog %d, ReadLogInto fresh %d reused %d; want 0, 1, >0",
					ih.plain.Load(), ih.fresh.Load(), ih.reused.Load())
			}
		} else if ph.reads.Load() == 0 {
			t.Fatal("host without LogIntoReader was never read with ReadLog")
		}
		s.close()
		m.close()
	}
}
