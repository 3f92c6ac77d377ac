package core

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"pgregory.net/rapid"
)

type modelRec struct {
	topic string
	qid   int32
	body  string
	phys  int64
}

// TestModel drives a store with random appends, batches, flushes, clean
// reopens, power cuts after a flush, truncations and write-buffer commits,
// and checks it against a list model: every queue returns exactly the
// model's records in order, reads by physical offset agree, and offsets
// are contiguous.
func TestModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		fs := vfs.NewCrashFS(rapid.Int64().Draw(rt, "seed"))
		o := testOptions(fs, "/m")
		o.SegmentSize = 8 << 10
		o.MaxMessageSize = 1 << 10
		o.CQEntriesPerFile = 16
		if rapid.Bool().Draw(rt, "wbuf") {
			o.WriteBuffer = 12 << 10
			o.CommitOnWait = rapid.Bool().Draw(rt, "commitOnWait")
		}
		s, err := Open(o)
		if err != nil {
			rt.Fatal(err)
		}
		defer func() { s.Close() }()
		var model []modelRec
		flushedLen := 0 // model prefix known durable
		topics := []string{"A", "B", "%RETRY%g"}
		commit := func() {
			if o.CommitOnWait {
				// What a flusher does: wait for anything past committed.
				if p := s.Positions(); p.Wrote > p.Committed {
					if _, err := s.WaitCommitted(context.Background(), p.Committed); err != nil {
						rt.Fatal(err)
					}
				}
				return
			}
			if _, err := s.Commit(); err != nil {
				rt.Fatal(err)
			}
		}
		check := func() {
			commit()
			drain(rt, s)
			byQueue := map[queueKey][]modelRec{}
			for _, m := range model {
				k := queueKey{m.topic, m.qid}
				byQueue[k] = append(byQueue[k], m)
			}
			for k, recs := range byQueue {
				g, err := s.GetMessages(k.topic, k.qid, 0, len(recs)+5, 1<<30, nil)
				if err != nil {
					rt.Fatal(err)
				}
				if len(g.Sizes) != len(recs) {
					rt.Fatalf("queue %v: %d records, model %d (status %v)", k, len(g.Sizes), len(recs), g.Status)
				}
				pos := 0
				for i, sz := range g.Sizes {
					r, err := record.Decode(g.Data[pos : pos+int(sz)])
					if err != nil {
						rt.Fatal(err)
					}
					if string(r.Body) != recs[i].body || r.PhysOffset != recs[i].phys || r.QueueOffset != int64(i) {
						rt.Fatalf("queue %v entry %d: %q@%d qo=%d, model %q@%d", k, i, r.Body, r.PhysOffset, r.QueueOffset, recs[i].body, recs[i].phys)
					}
					pos += int(sz)
				}
			}
		}
		n := 0
		rt.Repeat(map[string]func(*rapid.T){
			"append": func(rt *rapid.T) {
				cnt := rapid.IntRange(1, 4).Draw(rt, "batch")
				topic := rapid.SampledFrom(topics).Draw(rt, "topic")
				qid := int32(rapid.IntRange(0, 2).Draw(rt, "qid"))
				var msgs []*record.Message
				for i := 0; i < cnt; i++ {
					body := fmt.Sprintf("m%d-%s", n, bytes.Repeat([]byte("x"), rapid.IntRange(0, 300).Draw(rt, "len")))
					n++
					msgs = append(msgs, msg(topic, qid, body))
				}
				res, err := s.AppendBatch(msgs, nil)
				if err != nil {
					rt.Fatal(err)
				}
				for i, r := range res {
					model = append(model, modelRec{topic, qid, string(msgs[i].Body), r.PhysOffset})
				}
			},
			"flush": func(rt *rapid.T) {
				commit()
				if _, err := s.Flush(); err != nil {
					rt.Fatal(err)
				}
				flushedLen = len(model)
			},
			"reopen": func(rt *rapid.T) {
				if err := s.Close(); err != nil {
					rt.Fatal(err)
				}
				if s, err = Open(o); err != nil {
					rt.Fatal(err)
				}
				flushedLen = len(model)
			},
			"powercut": func(rt *rapid.T) {
				// Everything flushed survives; the unflushed tail may or may
				// not, but only as a prefix of the model.
				s.abandon()
				fs.CrashWith(vfs.CrashOptions{TornPages: rapid.Bool().Draw(rt, "torn")})
				if s, err = Open(o); err != nil {
					rt.Fatal(err)
				}
				end := s.Positions().Committed
				kept := flushedLen
				for kept < len(model) && model[kept].phys < end {
					kept++
				}
				if kept > flushedLen && model[kept-1].phys+1 > end {
					rt.Fatalf("log end %d cuts record at %d", end, model[kept-1].phys)
				}
				model = model[:kept]
				flushedLen = kept
			},
			"truncate": func(rt *rapid.T) {
				commit()
				if len(model) == 0 {
					return
				}
				i := rapid.IntRange(0, len(model)-1).Draw(rt, "cut")
				if err := s.Truncate(model[i].phys); err != nil {
					rt.Fatal(err)
				}
				model = model[:i]
				flushedLen = min(flushedLen, i)
			},
			"": func(rt *rapid.T) { check() },
		})
		check()
	})
}
