package core

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// FuzzRecover damages a crashed store's commitlog at fuzzer-chosen places
// and opens it: recovery must never panic; it either refuses with an error
// or opens a store that serves reads and appends.
func FuzzRecover(f *testing.F) {
	f.Add([]byte{0, 0, 0xff}, false)
	f.Add([]byte{0, 4, 0x01, 0, 100, 0x80}, true)
	f.Add([]byte{0x10, 0x00, 0x00, 0x20, 0x00, 0x00}, false)
	f.Add([]byte{0x02, 0x5a, 0x33}, true)
	f.Fuzz(func(t *testing.T, edits []byte, checkpointed bool) {
		fs := vfs.NewCrashFS(1)
		o := testOptions(fs, "/fz")
		o.SegmentSize = 16 << 10
		o.Logger = quietLogger()
		s, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 60; i++ {
			if _, err := s.Append(msg(fmt.Sprintf("T%d", i%2), int32(i%3), fmt.Sprintf("body-%d", i))); err != nil {
				t.Fatal(err)
			}
			if i == 30 {
				s.Flush()
				if checkpointed {
					drain(t, s)
					s.Checkpoint()
				}
			}
		}
		for _, seg := range *s.segs.Load() {
			seg.sync()
		}
		s.abandon()
		fs.CrashWith(vfs.CrashOptions{})
		seg := filepath.Join("/fz", CommitlogDir, segmentName(0))
		fh, err := fs.OpenReadWrite(seg)
		if err != nil {
			t.Fatal(err)
		}
		for len(edits) >= 3 {
			pos := int64(binary.BigEndian.Uint16(edits)) % o.SegmentSize
			b := []byte{0}
			fh.ReadAt(b, pos)
			b[0] ^= edits[2]
			fh.WriteAt(b, pos)
			edits = edits[3:]
		}
		fh.Sync()
		fh.Close()
		s, err = Open(o)
		if err != nil {
			return // refused (corruption below the checkpoint): fine
		}
		defer s.Close()
		p := s.Positions()
		for off := p.Min; off < p.Committed; {
			rec, err := s.ReadRecord(off)
			if err != nil {
				break
			}
			off += int64(len(rec))
		}
		drain(t, s)
		s.Queues(func(topic string, qid int32, lo, hi int64) bool {
			s.GetMessages(topic, qid, lo, int(hi-lo)+1, 1<<20, nil)
			return true
		})
		if _, err := s.Append(msg("T0", 0, "after")); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}
