package core

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"time"

	"github.com/keelmq/keel/core/vfs"
)

// Checkpoint is the durable recovery state, written every CheckpointEvery
// and at shutdown.
//
// File format ("checkpoint" in the store root): two 128-byte slots at
// offsets 0 and 128, written alternately so a torn write of one leaves the
// other intact. Each slot, big-endian:
//
//	0  magic    uint32 0x4B43504B ("KCPK")
//	4  version  uint32 1
//	8  seq      uint64 (the slot with the larger valid seq wins)
//	16 flushed  int64  commitlog bytes below are durable
//	24 dispatched int64 consume queues and listeners are durable below
//	32 confirm  int64  last confirm offset
//	40 min      int64  commitlog minimum offset
//	48 physTs   int64  store timestamp of the last flushed record (ms)
//	56 logicsTs int64  store timestamp of the last dispatched record (ms)
//	64 verifyFrom int64 a record boundary about VerifyWindow bytes below
//	                   flushed, where crash recovery starts checking
//	72..123 reserved, zero
//	124 crc     uint32 CRC32-C of bytes [0,124)
type Checkpoint struct {
	Seq        uint64
	Flushed    int64
	Dispatched int64
	Confirm    int64
	Min        int64
	PhysTs     int64
	LogicsTs   int64
	VerifyFrom int64
}

const (
	ckptMagic   = 0x4B43504B
	ckptVersion = 1
	ckptSlot    = 128
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func (c *Checkpoint) encode() []byte {
	b := make([]byte, ckptSlot)
	binary.BigEndian.PutUint32(b[0:], ckptMagic)
	binary.BigEndian.PutUint32(b[4:], ckptVersion)
	binary.BigEndian.PutUint64(b[8:], c.Seq)
	binary.BigEndian.PutUint64(b[16:], uint64(c.Flushed))
	binary.BigEndian.PutUint64(b[24:], uint64(c.Dispatched))
	binary.BigEndian.PutUint64(b[32:], uint64(c.Confirm))
	binary.BigEndian.PutUint64(b[40:], uint64(c.Min))
	binary.BigEndian.PutUint64(b[48:], uint64(c.PhysTs))
	binary.BigEndian.PutUint64(b[56:], uint64(c.LogicsTs))
	binary.BigEndian.PutUint64(b[64:], uint64(c.VerifyFrom))
	binary.BigEndian.PutUint32(b[124:], crc32.Checksum(b[:124], castagnoli))
	return b
}

func decodeCheckpoint(b []byte) (Checkpoint, bool) {
	if len(b) < ckptSlot ||
		binary.BigEndian.Uint32(b[0:]) != ckptMagic ||
		binary.BigEndian.Uint32(b[4:]) != ckptVersion ||
		binary.BigEndian.Uint32(b[124:]) != crc32.Checksum(b[:124], castagnoli) {
		return Checkpoint{}, false
	}
	return Checkpoint{
		Seq:        binary.BigEndian.Uint64(b[8:]),
		Flushed:    int64(binary.BigEndian.Uint64(b[16:])),
		Dispatched: int64(binary.BigEndian.Uint64(b[24:])),
		Confirm:    int64(binary.BigEndian.Uint64(b[32:])),
		Min:        int64(binary.BigEndian.Uint64(b[40:])),
		PhysTs:     int64(binary.BigEndian.Uint64(b[48:])),
		LogicsTs:   int64(binary.BigEndian.Uint64(b[56:])),
		VerifyFrom: int64(binary.BigEndian.Uint64(b[64:])),
	}, true
}

// ErrBadCheckpoint: the checkpoint file exists but neither slot is valid.
// Without it the store cannot tell durable data from a torn tail, so Open
// refuses; Repair rebuilds it from a full CRC scan of the log.
var ErrBadCheckpoint = errors.New("checkpoint unreadable")

// ReadCheckpoint reads the newest valid slot of a checkpoint file. It
// returns ok=false when the file does not exist, and an error wrapping
// ErrBadCheckpoint when it exists but no slot is valid.
func ReadCheckpoint(fsys vfs.FS, path string) (c Checkpoint, ok bool, err error) {
	f, err := fsys.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return c, false, nil
		}
		return c, false, fmt.Errorf("open checkpoint: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 2*ckptSlot)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return c, false, fmt.Errorf("read checkpoint %s: %w", path, err)
	}
	a, okA := decodeCheckpoint(buf[:min(n, ckptSlot)])
	var b Checkpoint
	okB := false
	if n > ckptSlot {
		b, okB = decodeCheckpoint(buf[ckptSlot:n])
	}
	switch {
	case okA && okB:
		if b.Seq > a.Seq {
			return b, true, nil
		}
		return a, true, nil
	case okA:
		return a, true, nil
	case okB:
		return b, true, nil
	}
	return c, false, fmt.Errorf("%w: %s: no valid slot (both torn or not a keel checkpoint); `keel store repair` rebuilds it from a full CRC scan of the log (try --dry-run first)", ErrBadCheckpoint, path)
}

// checkpointFile writes checkpoints alternately into the two slots.
type checkpointFile struct {
	f    vfs.File
	last Checkpoint
}

func openCheckpointFile(fsys vfs.FS, path string, last Checkpoint, exists bool) (*checkpointFile, error) {
	var f vfs.File
	var err error
	if exists {
		f, err = fsys.OpenReadWrite(path)
	} else {
		f, err = fsys.Create(path)
	}
	if err != nil {
		return nil, fmt.Errorf("open checkpoint for writing: %w", err)
	}
	return &checkpointFile{f: f, last: last}, nil
}

// write durably records c (its Seq is assigned here).
func (cf *checkpointFile) write(c Checkpoint) error {
	c.Seq = cf.last.Seq + 1
	off := int64(c.Seq%2) * ckptSlot
	if _, err := cf.f.WriteAt(c.encode(), off); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := cf.f.Datasync(); err != nil {
		return fmt.Errorf("sync checkpoint: %w", err)
	}
	cf.last = c
	return nil
}

func (cf *checkpointFile) close() error { return cf.f.Close() }

func (s *Store) checkpointLoop() {
	t := time.NewTicker(s.opts.CheckpointEvery)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			if err := s.Checkpoint(); err != nil {
				s.log.Error("checkpoint", "err", err)
			}
			n++
			if n%5 == 0 {
				if err := s.meta.PersistAll(); err != nil {
					s.log.Error("persist metadata", "err", err)
				}
			}
		}
	}
}

// Checkpoint flushes the consume queues and listeners and durably records
// the flushed and dispatched offsets, bounding the work of the next
// recovery.
func (s *Store) Checkpoint() error {
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	d := s.dispatched.Load()
	dts := s.dispatchTs.Load()
	var derr error
	if err := s.cqs.Flush(); err != nil {
		derr = fmt.Errorf("checkpoint: flush consume queues: %w", err)
	} else {
		for _, l := range s.opts.Listeners {
			if err := l.Sync(); err != nil {
				derr = fmt.Errorf("checkpoint: sync dispatch listener: %w", err)
				break
			}
		}
	}
	if derr != nil {
		// The queues or an indexer could not be made durable: the
		// dispatched offset stays where the last checkpoint put it, but
		// the flushed offset still moves, so a failing indexer stops
		// neither the commitlog's progress nor, through the recovery
		// tail, the appends.
		d, dts = s.ckpt.last.Dispatched, s.ckpt.last.LogicsTs
		msg := derr.Error()
		s.ckptFail.Store(&msg)
	} else if s.ckptFail.Load() != nil {
		s.ckptFail.Store(nil)
	}
	c := Checkpoint{
		Flushed:    s.flushed.Load(),
		Dispatched: d,
		Confirm:    s.confirmOffset(),
		Min:        s.minOffset.Load(),
		PhysTs:     s.flushedTs.Load(),
		LogicsTs:   dts,
	}
	c.VerifyFrom = s.verifyFromLocked(c.Flushed, c.Min)
	if c == (Checkpoint{Seq: c.Seq}) {
		return derr
	}
	if err := s.ckpt.write(c); err != nil {
		return errors.Join(derr, fmt.Errorf("checkpoint: %w", err))
	}
	s.recorded(c)
	return derr
}

// recorded publishes a checkpoint just written (ckptMu held, or Open).
func (s *Store) recorded(c Checkpoint) {
	s.ckptFlushed.Store(c.Flushed)
	s.ckptDispatched.Store(c.Dispatched)
	s.ckptN.notify()
}

// verifyFromLocked records flushed in the history of checkpointed flush
// offsets (all record boundaries) and returns the newest of them that is at
// least VerifyWindow below flushed, or else the oldest one within
// 4×VerifyWindow of flushed (flushed itself at worst). ckptMu is held.
func (s *Store) verifyFromLocked(flushed, minOff int64) int64 {
	h := s.flushHist
	if n := len(h); n == 0 || h[n-1] != flushed {
		h = append(h, flushed)
	}
	// Drop history that is older than needed, and anything the log no
	// longer holds (retention) or that lies beyond it (truncation). An
	// entry more than 4 windows below flushed is dropped too: when flushes
	// are rare and large (async flush behind a big dirty backlog), the
	// previous checkpoint can be gigabytes back, and recovery must not
	// scan that far; the window is then empty until history builds up.
	i := 0
	for i < len(h) && (h[i] < minOff || h[i] > flushed || h[i] < flushed-4*s.opts.VerifyWindow) {
		i++
	}
	h = h[i:]
	for len(h) >= 2 && h[1] <= flushed-s.opts.VerifyWindow {
		h = h[1:]
	}
	s.flushHist = append(s.flushHist[:0], h...)
	if len(s.flushHist) == 0 {
		return max(minOff, flushed)
	}
	return s.flushHist[0]
}
