package cq

import (
	"encoding/binary"
	"math"
)

// EntrySize is the size in bytes of one consume queue entry.
const EntrySize = 20

// Entry is one consume queue entry.
type Entry struct {
	// Offset is the commitlog (physical) offset of the message record.
	Offset int64
	// Size is the size in bytes of the record in the commitlog.
	Size int32
	// TagsCode is the tag hash (or, for scheduled topics, the delivery
	// time) that lets consumers filter without reading the record.
	TagsCode int64
}

// blankSize is the size field of a blank unit (RocketMQ's fillPreBlank).
const blankSize = math.MaxInt32

// blankEntry is the unit written before a queue's first real entry.
var blankEntry = Entry{Offset: 0, Size: blankSize, TagsCode: 0}

// IsBlank reports whether e is a pre-fill blank unit rather than a message.
func (e Entry) IsBlank() bool { return e.Size == blankSize }

// End is the commitlog offset just past the entry's record.
func (e Entry) End() int64 { return e.Offset + int64(e.Size) }

// valid reports whether e is plausible as a stored unit (blank or real):
// RocketMQ's recovery rule (Offset >= 0, Size > 0) plus an End that does
// not overflow.
func (e Entry) valid() bool {
	return e.Offset >= 0 && e.Size > 0 && e.Offset <= math.MaxInt64-int64(e.Size)
}

func encodeEntry(b []byte, e Entry) {
	_ = b[EntrySize-1]
	binary.BigEndian.PutUint64(b[0:8], uint64(e.Offset))
	binary.BigEndian.PutUint32(b[8:12], uint32(e.Size))
	binary.BigEndian.PutUint64(b[12:20], uint64(e.TagsCode))
}

func decodeEntry(b []byte) Entry {
	_ = b[EntrySize-1]
	return Entry{
		Offset:   int64(binary.BigEndian.Uint64(b[0:8])),
		Size:     int32(binary.BigEndian.Uint32(b[8:12])),
		TagsCode: int64(binary.BigEndian.Uint64(b[12:20])),
	}
}
