package host

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines(sub string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range strings.Split(s.b.String(), "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// testNode is the part of a Node the backend uses, over a real store in a
// temp dir.
func testNode(t *testing.T, listeners ...core.DispatchListener) (*Node, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := core.Open(core.Options{Dir: t.TempDir(), Logger: log, SegmentSize: 1 << 20, CQEntriesPerFile: 1024,
		MaxMessageSize: 64 << 10, Listeners: listeners})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	n := &Node{log: log, store: s, host: storehost.New(s, log)}
	n.metrics = newMetrics(n)
	return n, logs
}

func appendN(t *testing.T, n *Node, topic string, count int) []core.AppendResult {
	t.Helper()
	var out []core.AppendResult
	for i := range count {
		r, err := n.store.Append(&record.Message{Topic: topic, Body: []byte(strings.Repeat("b", 100) + string(rune('a'+i%26)))})
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func waitDispatched(t *testing.T, n *Node, end int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.store.WaitDispatched(ctx, end-1); err != nil {
		t.Fatalf("dispatch to %d: %v", end, err)
	}
}

func TestBackendReadAccess(t *testing.T) {
	n, _ := testNode(t)
	b := backend{n}
	if a := b.ReadAccess(); a != (remoting.ReadAccess{}) {
		t.Fatalf("unfenced master: %+v, want an authoritative log", a)
	}
	ctx := context.Background()
	n.host.ReportReplication(ctx, sdk.ReplicationState{Fenced: true, Reason: "master started with an empty log"})
	a := b.ReadAccess()
	if a.Refused == "" || !strings.Contains(a.Refused, "empty log") || a.Trailing {
		t.Fatalf("fenced master: %+v, want Refused naming the fence's reason", a)
	}
	// A slave is reported fenced by its plugin too, but serves reads.
	n.slave.Store(true)
	if a := b.ReadAccess(); a.Refused != "" || !a.Trailing {
		t.Fatalf("slave: %+v, want Trailing, not Refused", a)
	}
	n.slave.Store(false)
	n.host.ReportReplication(ctx, sdk.ReplicationState{})
	if a := b.ReadAccess(); a != (remoting.ReadAccess{}) {
		t.Fatalf("fence lifted: %+v", a)
	}
}

func TestBackendRaiseConsumerOffsetNeverLowers(t *testing.T) {
	n, _ := testNode(t)
	b := backend{n}
	for _, off := range []int64{50, 20, 80, 0} {
		if err := b.RaiseConsumerOffset("G", "T", 1, off); err != nil {
			t.Fatal(err)
		}
	}
	if off, ok := b.ConsumerOffset("G", "T", 1); !ok || off != 80 {
		t.Fatalf("offset %d %v, want 80", off, ok)
	}
	if err := b.RaiseConsumerOffset("bad@group", "T", 1, 5); err == nil {
		t.Fatal("invalid group accepted")
	}
}

// gateListener blocks dispatch until opened.
type gateListener struct{ open chan struct{} }

func (g *gateListener) Dispatch([]core.DispatchRecord) error { <-g.open; return nil }
func (g *gateListener) Sync() error                          { return nil }

// While the dispatcher is behind the visible end of the log, a pull past
// the queue's max is "not yet", not OFFSET_OVERFLOW_BADLY (which moves the
// consumer back to the max dispatched so far); once dispatch has caught
// up, the same pull is corrected to max as before.
func TestGetMessagesPastEndWaitsForDispatch(t *testing.T) {
	g := &gateListener{open: make(chan struct{})}
	n, _ := testNode(t, g)
	b := backend{n}
	appendN(t, n, "DQ", 3)
	// Queue entries are put before the listener is fed: the queue has
	// all 3 while the dispatched offset has not moved.
	deadline := time.Now().Add(5 * time.Second)
	for n.store.MaxQueueOffset("DQ", 0) < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p := n.store.Positions()
	if p.Dispatched >= p.Confirm {
		t.Fatalf("dispatch not held back: %+v", p)
	}
	start := time.Now()
	res, err := b.GetMessages(context.Background(), "DQ", 0, 7, 32, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != core.NotYetVisible || res.NextOffset != 7 {
		t.Fatalf("pull at 7 with dispatch behind: %v next %d, want NOT_YET_VISIBLE at 7", res.Status, res.NextOffset)
	}
	if d := time.Since(start); d < maxDispatchWait/2 || d > 3*maxDispatchWait {
		t.Fatalf("waited %v for dispatch, want about %v", d, maxDispatchWait)
	}
	// A missing queue likewise: not "NO_MATCHED_LOGIC_QUEUE, next 0".
	res, _ = b.GetMessages(context.Background(), "NOQ", 0, 200, 32, 1<<20, nil)
	if res.Status != core.NotYetVisible || res.NextOffset != 200 {
		t.Fatalf("pull of a missing queue at 200 with dispatch behind: %v next %d", res.Status, res.NextOffset)
	}
	close(g.open)
	waitDispatched(t, n, n.store.Positions().Confirm)
	res, _ = b.GetMessages(context.Background(), "DQ", 0, 7, 32, 1<<20, nil)
	if res.Status != core.OffsetOverflowBadly || res.MaxOffset != 3 {
		t.Fatalf("pull at 7 with dispatch caught up: %v max %d, want OFFSET_OVERFLOW_BADLY max 3", res.Status, res.MaxOffset)
	}
}

// segmentFile returns the path of the store's first commitlog segment.
func segmentFile(t *testing.T, n *Node) string {
	t.Helper()
	var found string
	filepath.WalkDir(n.store.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "00000000000000000000" && strings.Contains(p, "commitlog") {
			found = p
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no commitlog segment under %s", n.store.Dir())
	}
	return found
}

func damage(t *testing.T, path string, off int64, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func TestViewMessageDamagedBodyNotServed(t *testing.T) {
	n, logs := testNode(t)
	b := backend{n}
	recs := appendN(t, n, "VQ", 3)
	victim := recs[1]
	// A body byte: the record's framing stays intact, its CRC not.
	raw, err := n.store.ReadRecord(victim.PhysOffset)
	if err != nil {
		t.Fatal(err)
	}
	bodyAt := bytes.Index(raw, []byte("bbbb"))
	if bodyAt < 0 {
		t.Fatal("body not found in the record")
	}
	damage(t, segmentFile(t, n), victim.PhysOffset+int64(bodyAt)+1, []byte{'#'})

	if _, err := b.ReadMessage(context.Background(), recs[0].PhysOffset); err != nil {
		t.Fatalf("intact record: %v", err)
	}
	for range 3 {
		raw, err := b.ReadMessage(context.Background(), victim.PhysOffset)
		if err == nil {
			t.Fatalf("damaged record served whole (%d bytes)", len(raw))
		}
		if !errors.Is(err, remoting.ErrCorrupt) || errors.Is(err, remoting.ErrNotFound) {
			t.Fatalf("damaged record: %v, want ErrCorrupt (not ErrNotFound)", err)
		}
		if !strings.Contains(err.Error(), "CRC") || !strings.Contains(err.Error(), itoa(victim.PhysOffset)) {
			t.Fatalf("error %q does not name the damage and the offset %d", err, victim.PhysOffset)
		}
	}
	if got := counter(t, n, "keel_read_corrupt_records_total"); got != 1 {
		t.Fatalf("keel_read_corrupt_records_total = %v after 3 reads of one damaged record, want 1", got)
	}
	if l := logs.lines("damaged record"); len(l) != 1 || !strings.Contains(l[0], "level=ERROR") || !strings.Contains(l[0], "phys_offset="+itoa(victim.PhysOffset)) {
		t.Fatalf("log lines about the damage: %q, want one ERROR naming phys_offset=%d", l, victim.PhysOffset)
	}
	// An offset that is no record's start is "not found", not damage.
	if _, err := b.ReadMessage(context.Background(), recs[0].PhysOffset+3); !errors.Is(err, remoting.ErrNotFound) {
		t.Fatalf("offset inside a record: %v, want ErrNotFound", err)
	}
}

func TestPullOnDamagedTotalSizeReportedOnce(t *testing.T) {
	n, logs := testNode(t)
	b := backend{n}
	recs := appendN(t, n, "PQ", 4)
	waitDispatched(t, n, recs[3].End())
	victim := recs[2]
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(victim.Size+8))
	damage(t, segmentFile(t, n), victim.PhysOffset, size[:])

	for range 4 {
		_, err := b.GetMessages(context.Background(), "PQ", 0, 1, 32, 1<<20, nil)
		if err == nil {
			t.Fatal("pull over a record with a damaged TOTALSIZE succeeded")
		}
		if !errors.Is(err, remoting.ErrCorrupt) {
			t.Fatalf("pull error %v does not wrap ErrCorrupt", err)
		}
	}
	if got := counter(t, n, "keel_read_corrupt_records_total"); got != 1 {
		t.Fatalf("keel_read_corrupt_records_total = %v after 4 retries over one damaged record, want 1", got)
	}
	l := logs.lines("damaged record")
	if len(l) != 1 {
		t.Fatalf("damage logged %d times over 4 retries, want once: %q", len(l), l)
	}
	for _, want := range []string{"level=ERROR", "topic=PQ", "queue=0", "queue_offset=2", "phys_offset=" + itoa(victim.PhysOffset)} {
		if !strings.Contains(l[0], want) {
			t.Fatalf("log line %q lacks %s", l[0], want)
		}
	}
	// Records before it are still served one at a time.
	res, err := b.GetMessages(context.Background(), "PQ", 0, 1, 1, 1<<20, nil)
	if err != nil || res.Status != core.Found || len(res.Sizes) != 1 {
		t.Fatalf("pull of the intact record before it: %v %+v", err, res.Status)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// counter reads one series from the node's metric set.
func counter(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	var buf bytes.Buffer
	n.metrics.set.WritePrometheus(&buf)
	for _, l := range strings.Split(buf.String(), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			return v
		}
	}
	t.Fatalf("no series %s in:\n%s", name, buf.String())
	return 0
}

// settableConfirm is a ConfirmSource a test moves by hand (a replicated
// offset that restarted lower than what consumers have seen).
type settableConfirm struct{ off atomic.Int64 }

func (c *settableConfirm) ConfirmOffset() int64 { return c.off.Load() }

// TestGetMessagesBeyondVisibleEndWaits: with records in the log that are
// not yet visible (the confirm offset below the committed one, as on a
// visible-after-replication master whose replica has not acknowledged
// since a restart), a pull past the visible end is answered "not yet",
// never moved back to the visible maximum.
func TestGetMessagesBeyondVisibleEndWaits(t *testing.T) {
	conf := &settableConfirm{}
	log := slog.New(slog.DiscardHandler)
	s, err := core.Open(core.Options{Dir: t.TempDir(), Logger: log, SegmentSize: 1 << 20, CQEntriesPerFile: 1024,
		MaxMessageSize: 64 << 10, Confirm: conf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	n := &Node{log: log, store: s, host: storehost.New(s, log)}
	n.metrics = newMetrics(n)
	b := backend{n}
	res := appendN(t, n, "VQ", 5)
	conf.off.Store(res[1].End()) // two of five visible
	s.NotifyConfirm()
	waitDispatched(t, n, res[1].End())
	got, err := b.GetMessages(context.Background(), "VQ", 0, 4, 32, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != core.NotYetVisible || got.NextOffset != 4 {
		t.Fatalf("pull at 4 with 2 of 5 visible: %v next %d, want NOT_YET_VISIBLE at 4", got.Status, got.NextOffset)
	}
	conf.off.Store(res[4].End())
	s.NotifyConfirm()
	waitDispatched(t, n, res[4].End())
	if got, _ = b.GetMessages(context.Background(), "VQ", 0, 4, 32, 1<<20, nil); got.Status != core.Found {
		t.Fatalf("pull at 4 once all 5 are visible: %v", got.Status)
	}
}
