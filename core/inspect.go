package core

import (
	"bytes"
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
	Dir         string
	SegmentSize int64
	Segments    []SegmentReport
	Checkpoint  *Checkpoint
	// CheckpointErr is why the checkpoint file could not be read (it wraps
	// ErrBadCheckpoint), nil when it was read or does not exist.
	CheckpointErr error
	AbortMarker   bool // the store was not closed cleanly (or is open now)
	Epochs        []epoch.Entry
	Queues        []QueueReport
	End           int64  // end of the valid log found by the scan
	FirstBad      int64  // offset of the first invalid record before the zeroed tail, -1 if none
	FirstBadError string // why it is invalid
	// LogEnd is where the log's data ends, past any damage: the end of
	// the last record found from FirstBad on (intact, or damaged with a
	// known extent), or the last non-zero byte of damage nothing intact
	// follows. It equals End when FirstBad is -1. A repair cuts
	// [FirstBad, LogEnd).
	LogEnd int64
	// LostRecords counts the records in [FirstBad, LogEnd): every damaged
	// stretch counts as one record (the bytes of a record whose TOTALSIZE
	// is damaged cannot tell how many they held), every intact record
	// found after it as one. 0 when FirstBad is -1.
	LostRecords int
	Records     []record.Record
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
	if err := rep.readState(fsys, dir); err != nil {
		return nil, err
	}
	minOff := int64(0)
	if len(starts) > 0 {
		minOff = starts[0]
		if rep.Checkpoint != nil && rep.Checkpoint.Min > minOff {
			minOff = rep.Checkpoint.Min
		}
	}
	sc := segmentScan{o: o, rep: rep, dumpFrom: o.DumpFrom, scanning: true}
	if sc.dumpFrom == 0 {
		sc.dumpFrom = minOff
	}
	rep.End = minOff
	segSize := o.SegmentSize
	for i, st := range starts {
		path := filepath.Join(cl, segmentName(st))
		data, err := readWhole(fsys, path)
		if err != nil {
			return nil, err
		}
		if segSize == 0 {
			segSize = int64(len(data))
		}
		off := int64(0)
		if i == 0 && minOff > st {
			off = minOff - st
		}
		sc.segment(path, st, off, data)
	}
	if !sc.damaged {
		rep.LogEnd = rep.End
	}
	rep.SegmentSize = segSize
	if rep.Queues, err = inspectQueues(fsys, filepath.Join(dir, ConsumeQueueDir)); err != nil {
		return nil, err
	}
	return rep, nil
}

// readState fills in the checkpoint (or why it is unreadable), the abort
// marker and the epoch history of the store in dir.
func (rep *Report) readState(fsys vfs.FS, dir string) error {
	if ck, ok, err := ReadCheckpoint(fsys, filepath.Join(dir, CheckpointFile)); errors.Is(err, ErrBadCheckpoint) {
		rep.CheckpointErr = err
	} else if err != nil {
		return err
	} else if ok {
		rep.Checkpoint = &ck
	}
	if _, err := fsys.Stat(filepath.Join(dir, AbortFile)); err == nil {
		rep.AbortMarker = true
	}
	if h, err := epoch.Open(fsys, filepath.Join(dir, EpochFile)); err == nil {
		rep.Epochs = h.Entries()
	}
	return nil
}

// readWhole returns the contents of the file at path.
func readWhole(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	defer f.Close()
	size, _ := f.Size()
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("inspect: read %s: %w", path, err)
	}
	return data, nil
}

// segmentScan walks the segments of a log in order for Inspect.
type segmentScan struct {
	o        InspectOptions
	rep      *Report
	dumpFrom int64
	scanning bool // the valid log has not ended yet
	damaged  bool // FirstBad found: the rest of the log is what a repair cuts
}

// segment scans the segment starting at st, whose contents are data, from
// off, and adds its SegmentReport.
func (sc *segmentScan) segment(path string, st, off int64, data []byte) {
	rep, o := sc.rep, sc.o
	sr := SegmentReport{File: path, Start: st}
	if sc.damaged {
		if n, end := scanLost(data, st, 0, false, o.CheckCRC); n > 0 {
			rep.LostRecords += n
			rep.LogEnd = max(rep.LogEnd, end)
		}
	}
	for sc.scanning && off < int64(len(data)) {
		n, info, err := checkAt(data, st, off, o.CheckCRC)
		if err != nil {
			if !allZero(data[off:min(int64(len(data)), off+64)]) {
				rep.FirstBad = st + off
				rep.FirstBadError = err.Error()
				sc.damaged = true
				n, end := scanLost(data, st, off, true, o.CheckCRC)
				rep.LostRecords += n
				rep.LogEnd = max(rep.LogEnd, end)
			}
			sc.scanning = false
			break
		}
		if !info.Blank && len(rep.Records) < o.DumpRecords && st+off >= sc.dumpFrom {
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
	if sc.scanning || sr.Bytes > 0 {
		rep.End = st + sr.Bytes
		if sr.Bytes == int64(len(data)) {
			rep.End = st + int64(len(data))
		}
	}
	rep.Segments = append(rep.Segments, sr)
}

// inspectQueues reports the bounds of every consume queue under qroot.
func inspectQueues(fsys vfs.FS, qroot string) ([]QueueReport, error) {
	topics, err := fsys.ReadDir(qroot)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("inspect queues: %w", err)
	}
	var out []QueueReport
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
			out = append(out, QueueReport{Topic: t, QueueID: qid, Min: lo, Max: hi})
		}
	}
	return out, nil
}

// checkAt checks the record at data[off:], the segment starting at st:
// record.Check, plus the record's own physical offset.
func checkAt(data []byte, st, off int64, checkCRC bool) (int, record.Info, error) {
	n, info, err := record.Check(data[off:], checkCRC)
	if err == nil && !info.Blank && info.PhysOffset != st+off {
		err = fmt.Errorf("%w: record claims offset %d", record.ErrCorrupt, info.PhysOffset)
	}
	return n, info, err
}

// scanLost walks the part of a segment (data, starting at log offset st)
// that lies beyond damage, from off: damaged is true when off is the
// damaged record itself. It returns how many records the stretch holds
// (each damaged stretch counting as one) and the log offset where its
// data ends (meaningless when it holds none). A damaged record whose layout is
// consistent but whose body CRC fails is stepped over by its TOTALSIZE;
// any other damage is skipped by searching for the next intact record
// (magic code, CRC, and its own physical offset).
func scanLost(data []byte, st, off int64, damaged bool, checkCRC bool) (records int, end int64) {
	end = st + off
	size := int64(len(data))
	for off < size {
		if !damaged {
			n, info, err := checkAt(data, st, off, checkCRC)
			switch {
			case err == nil && info.Blank:
				return records, st + off + int64(n)
			case err == nil:
				records++
				off += int64(n)
				end = st + off
				continue
			case allZero(data[off:min(size, off+64)]):
				return records, end // the zeroed tail
			}
		}
		damaged = false
		records++
		if n, ok := badCRCSize(data[off:]); ok {
			off += n
			end = st + off
			continue
		}
		next := resync(data, st, off+1, checkCRC)
		if next < 0 {
			// Nothing intact follows: the damage runs to the last
			// non-zero byte.
			last := int64(len(bytes.TrimRight(data[off:], "\x00")))
			return records, st + off + max(last, 1)
		}
		off = next
		end = st + off
	}
	return records, end
}

// badCRCSize reports the TOTALSIZE of a record whose only fault is its body
// CRC (its lengths add up, so its extent is known).
func badCRCSize(b []byte) (int64, bool) {
	if _, _, err := record.Check(b, true); !errors.Is(err, record.ErrBadCRC) || len(b) < 4 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint32(b)), true
}

// resync returns the offset in data, from from on, of the next intact
// message record (checked with checkCRC, at its own physical offset), or
// -1 if there is none.
func resync(data []byte, st, from int64, checkCRC bool) int64 {
	for from+8 <= int64(len(data)) {
		// Candidates are found by the magic code's first three bytes
		// (shared by V1 and V2), 4 bytes into a record.
		i := bytes.Index(data[from+4:], magicPrefix[:])
		if i < 0 {
			return -1
		}
		p := from + int64(i)
		if m := binary.BigEndian.Uint32(data[p+4:]); m == record.MagicV1 || m == record.MagicV2 {
			if _, info, err := checkAt(data, st, p, checkCRC); err == nil && !info.Blank {
				return p
			}
		}
		from = p + 1
	}
	return -1
}

var magicPrefix = [3]byte{byte(record.MagicV1 >> 24), byte(record.MagicV1 >> 16 & 0xFF), byte(record.MagicV1 >> 8 & 0xFF)}

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
