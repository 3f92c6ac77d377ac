package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path/filepath"

	"github.com/keelmq/keel/core/cq"
	"github.com/keelmq/keel/core/epoch"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
)

// Report is what Inspect finds in a store directory, read-only.
type Report struct {
	Dir           string
	SegmentSize   int64
	Segments      []SegmentReport
	Checkpoint    *Checkpoint
	AbortMarker   bool // the store was not closed cleanly (or is open now)
	Epochs        []epoch.Entry
	Queues        []QueueReport
	End           int64  // end of the valid log found by the scan
	FirstBad      int64  // offset of the first invalid record before the zeroed tail, -1 if none
	FirstBadError string // why it is invalid
	Records       []record.Record
}

// SegmentReport describes one segment file.
type SegmentReport struct {
	File    string
	Start   int64
	Records int
	Bytes   int64 // bytes of valid records (and padding)
}

// QueueReport describes one consume queue.
type QueueReport struct {
	Topic    string
	QueueID  int32
	Min, Max int64
}

// InspectOptions selects what Inspect reads.
type InspectOptions struct {
	FS          vfs.FS
	SegmentSize int64 // 0: taken from the first segment's file size
	// DumpRecords > 0 decodes that many records from DumpFrom (a physical
	// offset; 0 means the log minimum).
	DumpRecords int
	DumpFrom    int64
	CheckCRC    bool
}

// Inspect reads a store directory without modifying it: segments,
// positions, checkpoint, epochs and queues, and optionally records. It
// scans every segment (checking CRCs when asked), so it costs time in
// proportion to the log; it is a debugging tool, not part of recovery.
func Inspect(dir string, o InspectOptions) (*Report, error) {
	fsys := o.FS
	if fsys == nil {
		fsys = vfs.OS
	}
	rep := &Report{Dir: dir, FirstBad: -1}
	cl := filepath.Join(dir, CommitlogDir)
	names, err := fsys.ReadDir(cl)
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", dir, err)
	}
	var starts []int64
	for _, n := range names {
		if v, ok := parseSegmentName(n); ok {
			starts = append(starts, v)
		}
	}
	segSize := o.SegmentSize
	if ck, ok, err := ReadCheckpoint(fsys, filepath.Join(dir, CheckpointFile)); err != nil {
		return nil, err
	} else if ok {
		rep.Checkpoint = &ck
	}
	if _, err := fsys.Stat(filepath.Join(dir, AbortFile)); err == nil {
		rep.AbortMarker = true
	}
	if h, err := epoch.Open(fsys, filepath.Join(dir, EpochFile)); err == nil {
		rep.Epochs = h.Entries()
	}
	minOff := int64(0)
	if len(starts) > 0 {
		minOff = starts[0]
		if rep.Checkpoint != nil && rep.Checkpoint.Min > minOff {
			minOff = rep.Checkpoint.Min
		}
	}
	dumpFrom := o.DumpFrom
	if dumpFrom == 0 {
		dumpFrom = minOff
	}
	rep.End = minOff
	scanning := true
	for i, st := range starts {
		path := filepath.Join(cl, segmentName(st))
		f, err := fsys.Open(path)
		if err != nil {
			return nil, fmt.Errorf("inspect: %w", err)
		}
		size, _ := f.Size()
		if segSize == 0 {
			segSize = size
		}
		data := make([]byte, size)
		if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
			f.Close()
			return nil, fmt.Errorf("inspect: read %s: %w", path, err)
		}
		f.Close()
		sr := SegmentReport{File: path, Start: st}
		off := int64(0)
		if i == 0 && minOff > st {
			off = minOff - st
		}
		for scanning && off < int64(len(data)) {
			n, info, err := record.Check(data[off:], o.CheckCRC)
			if err == nil && !info.Blank && info.PhysOffset != st+off {
				err = fmt.Errorf("%w: record claims offset %d", record.ErrCorrupt, info.PhysOffset)
			}
			if err != nil {
				if !allZero(data[off:min(int64(len(data)), off+64)]) {
					rep.FirstBad = st + off
					rep.FirstBadError = err.Error()
				}
				scanning = false
				break
			}
			if !info.Blank && len(rep.Records) < o.DumpRecords && st+off >= dumpFrom {
				if r, err := record.Decode(append([]byte(nil), data[off:off+int64(n)]...)); err == nil {
					rep.Records = append(rep.Records, *r)
				}
			}
			off += int64(n)
			sr.Bytes = off
			if info.Blank {
				break
			}
			sr.Records++
		}
		if scanning || sr.Bytes > 0 {
			rep.End = st + sr.Bytes
			if sr.Bytes == int64(len(data)) {
				rep.End = st + int64(len(data))
			}
		}
		rep.Segments = append(rep.Segments, sr)
	}
	rep.SegmentSize = segSize
	qroot := filepath.Join(dir, ConsumeQueueDir)
	topics, err := fsys.ReadDir(qroot)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("inspect queues: %w", err)
	}
	for _, t := range topics {
		qids, err := fsys.ReadDir(filepath.Join(qroot, t))
		if err != nil {
			continue
		}
		for _, qs := range qids {
			var qid int32
			if _, err := fmt.Sscanf(qs, "%d", &qid); err != nil {
				continue
			}
			lo, hi, err := queueBounds(fsys, filepath.Join(qroot, t, qs))
			if err != nil {
				return nil, fmt.Errorf("inspect queue %s/%s: %w", t, qs, err)
			}
			rep.Queues = append(rep.Queues, QueueReport{Topic: t, QueueID: qid, Min: lo, Max: hi})
		}
	}
	return rep, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// queueBounds reads a queue directory's files read-only: Min is the first
// non-blank entry, Max one past the last valid one.
func queueBounds(fsys vfs.FS, dir string) (lo, hi int64, err error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	lo = -1
	for _, n := range names {
		base, ok := parseSegmentName(n)
		if !ok {
			continue
		}
		f, err := fsys.Open(filepath.Join(dir, n))
		if err != nil {
			return 0, 0, err
		}
		size, _ := f.Size()
		data := make([]byte, size)
		_, rerr := f.ReadAt(data, 0)
		f.Close()
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return 0, 0, rerr
		}
		for i := 0; i+cq.EntrySize <= len(data); i += cq.EntrySize {
			e := data[i : i+cq.EntrySize]
			off := int64(binary.BigEndian.Uint64(e))
			sz := int32(binary.BigEndian.Uint32(e[8:]))
			if sz <= 0 || off < 0 {
				return max(lo, 0), hi, nil
			}
			q := (base + int64(i)) / cq.EntrySize
			if lo < 0 && sz != math.MaxInt32 {
				lo = q
			}
			hi = q + 1
		}
	}
	return max(lo, 0), hi, nil
}
