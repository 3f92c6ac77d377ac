package indexhash

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"

	"github.com/keelmq/keel/core/vfs"
)

// CheckpointFile is the name of the index's checkpoint in its directory.
//
// Format: two 128-byte slots at offsets 0 and 128, written alternately so a
// torn write of one leaves the other; the valid slot with the larger seq
// wins. Each slot, big-endian:
//
//	0   magic      uint32 0x4B494458 ("KIDX")
//	4   version    uint32 1
//	8   seq        uint64
//	16  hashSlots  int32  slots per file, fixed for the directory
//	20  flags      uint32 bit 0: clean (written by Stop after a full sync);
//	                      bit 1: lastFile is set
//	24  lastFile   int64  creation time (ms) naming the newest durable file
//	32  count      int32  its indexCount: entries [1,count) are durable
//	36  usedSlots  int32  its hashSlotCount (meaningful when clean)
//	40  beginTs    int64  its header fields for that count
//	48  endTs      int64
//	56  beginPhy   int64
//	64  endPhy     int64
//	72  indexedEnd int64  every record below this commitlog offset is indexed
//	80..123 reserved, zero
//	124 crc        uint32 CRC32-C of bytes [0,124)
//
// Every file older than lastFile is complete and durable; files newer than
// it are not covered and are deleted when the index opens.
const CheckpointFile = "checkpoint"

const (
	ckMagic    = 0x4B494458
	ckVersion  = 1
	ckSlot     = 128
	ckClean    = 1 << 0
	ckHasFile  = 1 << 1
	ckDataSize = 124
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkpoint is the durable state of the index.
type checkpoint struct {
	seq        uint64
	slots      int32
	clean      bool
	hasFile    bool
	lastFile   int64
	h          header // of lastFile, when hasFile
	indexedEnd int64
}

func (c *checkpoint) encode() []byte {
	b := make([]byte, ckSlot)
	be := binary.BigEndian
	be.PutUint32(b[0:], ckMagic)
	be.PutUint32(b[4:], ckVersion)
	be.PutUint64(b[8:], c.seq)
	be.PutUint32(b[16:], uint32(c.slots))
	var flags uint32
	if c.clean {
		flags |= ckClean
	}
	if c.hasFile {
		flags |= ckHasFile
	}
	be.PutUint32(b[20:], flags)
	be.PutUint64(b[24:], uint64(c.lastFile))
	be.PutUint32(b[32:], uint32(c.h.count))
	be.PutUint32(b[36:], uint32(c.h.usedSlots))
	be.PutUint64(b[40:], uint64(c.h.beginTs))
	be.PutUint64(b[48:], uint64(c.h.endTs))
	be.PutUint64(b[56:], uint64(c.h.beginPhy))
	be.PutUint64(b[64:], uint64(c.h.endPhy))
	be.PutUint64(b[72:], uint64(c.indexedEnd))
	be.PutUint32(b[ckDataSize:], crc32.Checksum(b[:ckDataSize], castagnoli))
	return b
}

// decodeCheckpoint decodes one slot; ok is false when it is torn, foreign
// or implausible.
func decodeCheckpoint(b []byte) (c checkpoint, ok bool) {
	be := binary.BigEndian
	if len(b) < ckSlot || be.Uint32(b[0:]) != ckMagic || be.Uint32(b[4:]) != ckVersion ||
		be.Uint32(b[ckDataSize:]) != crc32.Checksum(b[:ckDataSize], castagnoli) {
		return c, false
	}
	flags := be.Uint32(b[20:])
	c = checkpoint{
		seq:      be.Uint64(b[8:]),
		slots:    int32(be.Uint32(b[16:])),
		clean:    flags&ckClean != 0,
		hasFile:  flags&ckHasFile != 0,
		lastFile: int64(be.Uint64(b[24:])),
		h: header{
			count:     int32(be.Uint32(b[32:])),
			usedSlots: int32(be.Uint32(b[36:])),
			beginTs:   int64(be.Uint64(b[40:])),
			endTs:     int64(be.Uint64(b[48:])),
			beginPhy:  int64(be.Uint64(b[56:])),
			endPhy:    int64(be.Uint64(b[64:])),
		},
		indexedEnd: int64(be.Uint64(b[72:])),
	}
	if c.slots < 1 || flags&^(ckClean|ckHasFile) != 0 || c.indexedEnd < 0 ||
		(c.hasFile && c.h.count < 1) || (!c.hasFile && c.h != header{}) {
		return checkpoint{}, false
	}
	return c, true
}

// decodeCheckpointFile picks the newer valid slot of a checkpoint file's
// contents.
func decodeCheckpointFile(b []byte) (checkpoint, bool) {
	a, okA := decodeCheckpoint(b[:min(len(b), ckSlot)])
	var c checkpoint
	okB := false
	if len(b) > ckSlot {
		c, okB = decodeCheckpoint(b[ckSlot:min(len(b), 2*ckSlot)])
	}
	switch {
	case okA && okB:
		if c.seq > a.seq {
			return c, true
		}
		return a, true
	case okA:
		return a, true
	case okB:
		return c, true
	}
	return checkpoint{}, false
}

// readCheckpoint reads the checkpoint at path. exists is false when there
// is no file; an existing file with no valid slot is an error.
func readCheckpoint(fsys vfs.FS, path string) (c checkpoint, exists bool, err error) {
	f, err := fsys.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return c, false, nil
		}
		return c, false, fmt.Errorf("open index checkpoint: %w", err)
	}
	defer f.Close()
	buf := make([]byte, 2*ckSlot)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return c, true, fmt.Errorf("read index checkpoint %s: %w", path, err)
	}
	c, ok := decodeCheckpointFile(buf[:n])
	if !ok {
		return c, true, fmt.Errorf("index checkpoint %s: no valid slot", path)
	}
	return c, true, nil
}

// checkpointWriter writes checkpoints alternately into the two slots.
type checkpointWriter struct {
	f    vfs.File
	last checkpoint
}

// write durably records c, assigning its seq.
func (w *checkpointWriter) write(c checkpoint) error {
	c.seq = w.last.seq + 1
	off := int64(c.seq%2) * ckSlot
	if _, err := w.f.WriteAt(c.encode(), off); err != nil {
		return fmt.Errorf("write index checkpoint: %w", err)
	}
	if err := w.f.Datasync(); err != nil {
		return fmt.Errorf("sync index checkpoint: %w", err)
	}
	w.last = c
	return nil
}
