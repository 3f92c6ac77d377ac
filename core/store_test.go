package core

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
)

var testHost = netip.MustParseAddrPort("127.0.0.1:10911")

func testOptions(fs vfs.FS, dir string) Options {
	return Options{
		Dir:              dir,
		FS:               fs,
		SegmentSize:      64 << 10,
		MaxMessageSize:   8 << 10,
		CQEntriesPerFile: 64,
	}
}

func msg(topic string, qid int32, body string) *record.Message {
	return &record.Message{
		Topic: topic, QueueID: qid, Body: []byte(body),
		Properties: record.EncodeProperties(map[string]string{"TAGS": "t", "KEYS": "k-" + body}),
		BornHost:   testHost, StoreHost: testHost, BornTimestamp: 1,
	}
}

func mustOpen(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

// fataler is what the test helpers need of testing.TB and rapid.T.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// drain waits until everything committed is dispatched.
func drain(t fataler, s *Store) {
	t.Helper()
	for i := 0; i < 10000; i++ {
		if _, err := s.dispatchOnce(); err != nil {
			t.Fatalf("dispatch: %v", err)
		}
		if s.dispatched.Load() >= s.confirmOffset() {
			return
		}
	}
	t.Fatalf("dispatch did not catch up: %+v", s.Positions())
}

func TestAppendReadReopen(t *testing.T) {
	fs := vfs.NewCrashFS(1)
	o := testOptions(fs, "/s")
	s := mustOpen(t, o)
	var res []AppendResult
	for i := 0; i < 2000; i++ { // several segments of 64 KiB
		r, err := s.Append(msg("T", int32(i%3), fmt.Sprintf("body-%04d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(i / 3); r.QueueOffset != want {
			t.Fatalf("msg %d: queue offset %d, want %d", i, r.QueueOffset, want)
		}
		res = append(res, r)
	}
	for i := 1; i < len(res); i++ {
		if res[i].PhysOffset < res[i-1].End() {
			t.Fatalf("records overlap: %+v then %+v", res[i-1], res[i])
		}
	}
	if len(*s.segs.Load()) < 3 {
		t.Fatalf("expected several segments, got %d", len(*s.segs.Load()))
	}
	drain(t, s)
	check := func(s *Store) {
		t.Helper()
		for i, r := range res {
			b, err := s.ReadRecord(r.PhysOffset)
			if err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
			rec, err := record.Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if string(rec.Body) != fmt.Sprintf("body-%04d", i) || rec.QueueOffset != r.QueueOffset || rec.PhysOffset != r.PhysOffset {
				t.Fatalf("record %d mismatch: %q qo=%d po=%d", i, rec.Body, rec.QueueOffset, rec.PhysOffset)
			}
		}
		for q := int32(0); q < 3; q++ {
			if got := s.MaxQueueOffset("T", q); got != 667-int64(boolInt(q > 1)) {
				t.Fatalf("queue %d max %d", q, got)
			}
			g, err := s.GetMessages("T", q, 10, 5, 1<<20, nil)
			if err != nil || g.Status != Found || len(g.Sizes) != 5 || g.NextOffset != 15 {
				t.Fatalf("get queue %d: %v %+v", q, err, g.Status)
			}
			first, _ := record.Decode(g.Data[:g.Sizes[0]])
			if want := fmt.Sprintf("body-%04d", 30+int(q)); string(first.Body) != want {
				t.Fatalf("queue %d offset 10 body %q want %q", q, first.Body, want)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, o)
	if s.Recovery().Crashed {
		t.Fatal("clean close reported as crash")
	}
	check(s)
	// Appends continue with the right queue offsets after a reopen.
	r, err := s.Append(msg("T", 0, "after"))
	if err != nil || r.QueueOffset != 667 {
		t.Fatalf("append after reopen: %v %+v", err, r)
	}
	s.Close()
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestOffsetCorrection(t *testing.T) {
	s := mustOpen(t, testOptions(vfs.NewCrashFS(2), "/s"))
	defer s.Close()
	if g, _ := s.GetMessages("T", 0, 5, 10, 1<<20, nil); g.Status != NoMatchedLogicQueue || g.NextOffset != 0 {
		t.Fatalf("unknown queue: %+v", g)
	}
	for i := 0; i < 10; i++ {
		if _, err := s.Append(msg("T", 0, "x")); err != nil {
			t.Fatal(err)
		}
	}
	drain(t, s)
	cases := []struct {
		off    int64
		status GetStatus
		next   int64
	}{
		{10, OffsetOverflowOne, 10},
		{500, OffsetOverflowBadly, 10}, // corrected to max, never 0
		{3, Found, 10},
	}
	for _, c := range cases {
		g, err := s.GetMessages("T", 0, c.off, 32, 1<<20, nil)
		if err != nil || g.Status != c.status || g.NextOffset != c.next {
			t.Fatalf("offset %d: got %v next %d err %v, want %v next %d", c.off, g.Status, g.NextOffset, err, c.status, c.next)
		}
	}
	// Tag filter.
	g, _ := s.GetMessages("T", 0, 0, 32, 1<<20, func(code int64) bool { return code == record.TagsHashCode("other") })
	if g.Status != NoMatchedMessage || g.NextOffset != 10 {
		t.Fatalf("filter: %v next %d", g.Status, g.NextOffset)
	}
}

func TestMessageLimits(t *testing.T) {
	s := mustOpen(t, testOptions(vfs.NewCrashFS(3), "/s"))
	defer s.Close()
	big := msg("T", 0, string(bytes.Repeat([]byte("x"), 8<<10+1)))
	if _, err := s.Append(big); !errors.Is(err, ErrMessage) || !errors.Is(err, record.ErrTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	if p := s.Positions(); p.Committed != 0 {
		t.Fatalf("rejected message wrote bytes: %+v", p)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
