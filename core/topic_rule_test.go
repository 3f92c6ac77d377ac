package core

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
)

// TestAppendRefusesInvalidTopic: a topic meta.ValidateTopicName rejects is
// an ErrMessage (and record.ErrInvalid, meta.ErrInvalid) from Append and
// AppendBatch, alone or after valid messages in the batch, and nothing is
// stored: no bytes and no queue offset.
func TestAppendRefusesInvalidTopic(t *testing.T) {
	s := mustOpen(t, testOptions(vfs.NewCrashFS(41), "/s"))
	defer s.Close()
	for _, topic := range []string{"a.b", "", strings.Repeat("x", meta.MaxTopicNameLen+1), "a/b", "a b"} {
		end := s.Positions().Committed
		_, err := s.Append(msg(topic, 0, "m"))
		if !errors.Is(err, ErrMessage) || !errors.Is(err, record.ErrInvalid) || !errors.Is(err, meta.ErrInvalid) {
			t.Errorf("Append to %.20q: %v, want ErrMessage, record.ErrInvalid and meta.ErrInvalid", topic, err)
		}
		res, err := s.AppendBatch([]*record.Message{msg("T", 0, "ok"), msg("T", 0, "ok"), msg(topic, 0, "bad")}, nil)
		if !errors.Is(err, ErrMessage) || !errors.Is(err, meta.ErrInvalid) || len(res) != 0 {
			t.Errorf("AppendBatch ending with %.20q: %d results, %v; want none and ErrMessage wrapping meta.ErrInvalid", topic, len(res), err)
		}
		if got := s.Positions().Committed; got != end {
			t.Fatalf("a refused append to %.20q moved the log end from %d to %d", topic, end, got)
		}
	}
	r, err := s.Append(msg("T", 0, "first"))
	if err != nil || r.QueueOffset != 0 || r.PhysOffset != 0 {
		t.Fatalf("first valid append: %+v, %v; want queue offset 0 at 0", r, err)
	}
}

// topicRecord appends one message to topic at a fresh store and returns the
// store, the record's offset and its bytes.
func topicRecord(t *testing.T, s *Store, topic string, body string) (AppendResult, []byte) {
	t.Helper()
	r, err := s.Append(msg(topic, 0, body))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.ReadLog(r.PhysOffset, int(r.Size))
	if err != nil || len(b) != int(r.Size) {
		t.Fatalf("read record back: %d bytes, %v", len(b), err)
	}
	return r, b
}

// renameTopic overwrites in rec, a record's bytes, the topic from with to
// (same length): the topic is outside the body, so the CRC still holds, as
// in a record written when the topic name rule was laxer.
func renameTopic(t *testing.T, rec []byte, from, to string) {
	t.Helper()
	i := bytes.Index(rec, []byte(from))
	if i < 0 || len(from) != len(to) {
		t.Fatalf("topic %q not in the record", from)
	}
	copy(rec[i:], to)
}

// TestAppendRawRefusesInvalidTopic: replicated bytes holding a record whose
// topic breaks the rule are refused whole (record.ErrCorrupt wrapping
// meta.ErrInvalid), nothing written.
func TestAppendRawRefusesInvalidTopic(t *testing.T) {
	src := mustOpen(t, testOptions(vfs.NewCrashFS(42), "/src"))
	defer src.Close()
	_, ok := topicRecord(t, src, "T", "first")
	_, bad := topicRecord(t, src, "a_b", "second")
	renameTopic(t, bad, "a_b", "a.b")
	data := append(append([]byte(nil), ok...), bad...)

	dst := mustOpen(t, testOptions(vfs.NewCrashFS(43), "/dst"))
	defer dst.Close()
	err := dst.AppendRaw(0, data)
	if !errors.Is(err, record.ErrCorrupt) || !errors.Is(err, meta.ErrInvalid) {
		t.Fatalf("AppendRaw of a record to topic a.b: %v, want record.ErrCorrupt wrapping meta.ErrInvalid", err)
	}
	if got := dst.Positions().Committed; got != 0 {
		t.Fatalf("a refused AppendRaw moved the log end to %d", got)
	}
	if err := dst.AppendRaw(0, ok); err != nil {
		t.Fatalf("AppendRaw of the valid record alone: %v", err)
	}
}

// TestDispatchSkipsInvalidTopic: a record in the log whose topic breaks the
// rule (as a log written before Append kept it may hold) is skipped by the
// consume queues with one ERROR per topic, and dispatch goes on past it
// instead of retrying for ever.
func TestDispatchSkipsInvalidTopic(t *testing.T) {
	w := &warnings{}
	g := &gate{}
	o := testOptions(vfs.NewCrashFS(44), "/s")
	o.Confirm = g
	o.Logger = slog.New(w)
	s := mustOpen(t, o)
	defer s.Close()

	legacy := func(body string) {
		t.Helper()
		r, err := s.Append(msg("a_b", 0, body))
		if err != nil {
			t.Fatal(err)
		}
		s.appendMu.Lock()
		seg := s.active
		rel := r.PhysOffset - seg.start
		renameTopic(t, seg.data[rel:rel+int64(r.Size)], "a_b", "a.b")
		s.appendMu.Unlock()
	}
	legacy("one")
	if _, err := s.Append(msg("T", 0, "after")); err != nil {
		t.Fatal(err)
	}
	legacy("two")
	g.open.Store(true)
	s.NotifyConfirm()
	drain(t, s)

	if s.dispatchFail.Load() != nil {
		t.Fatalf("dispatch failed: %s", *s.dispatchFail.Load())
	}
	if q := s.cqs.Get("a.b", 0); q != nil {
		t.Fatal("a consume queue was created for topic a.b")
	}
	res, err := s.GetMessages("T", 0, 0, 10, 1<<20, nil)
	if err != nil || len(res.Sizes) != 1 {
		t.Fatalf("the record after the skipped one: %d records, %v; want 1", len(res.Sizes), err)
	}
	s.RedispatchFromCheckpoint()
	drain(t, s)
	if m := w.take(); len(m) != 1 || !strings.Contains(m[0], "skipping records whose topic breaks the topic name rule") {
		t.Fatalf("logs at WARN and above: %q; want the one ERROR for topic a.b", m)
	}
}
