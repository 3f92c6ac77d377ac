package indexhash

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"time"

	"github.com/keelmq/keel/core/vfs"
)

// Index file layout (RocketMQ IndexFile, big-endian):
//
//	header, 40 bytes:
//	  0  beginTimestamp int64  store timestamp (ms) of the first entry
//	  8  endTimestamp   int64  store timestamp (ms) of the last entry
//	  16 beginPhyOffset int64  commitlog offset of the first entry
//	  24 endPhyOffset   int64  commitlog offset of the last entry
//	  32 hashSlotCount  int32  number of slots in use
//	  36 indexCount     int32  next entry number; starts at 1
//	slot table: hashSlots int32, each the number of the newest entry of
//	  its bucket, 0 = empty
//	entries: entriesPerFile 20-byte entries, entry 0 unused:
//	  0  keyHash   int32  abs(Java String.hashCode(topic#key))
//	  4  phyOffset int64
//	  12 timeDiff  int32  seconds since beginTimestamp
//	  16 prevIndex int32  the slot's previous value (the chain)
const (
	headerSize = 40
	slotSize   = 4
	entrySize  = 20
)

// fileNameLayout is the file name: creation time yyyyMMddHHmmssSSS (UTC).
const fileNameLayout = "20060102150405.000"

func fileName(ms int64) string {
	s := time.UnixMilli(ms).UTC().Format(fileNameLayout)
	return s[:14] + s[15:]
}

// parseFileName returns the creation time of an index file name, or false
// when name is not one.
func parseFileName(name string) (int64, bool) {
	if len(name) != 17 {
		return 0, false
	}
	for i := 0; i < len(name); i++ {
		if name[i] < '0' || name[i] > '9' {
			return 0, false
		}
	}
	t, err := time.Parse(fileNameLayout, name[:14]+"."+name[14:])
	if err != nil {
		return 0, false
	}
	return t.UnixMilli(), true
}

// header is an index file's header.
type header struct {
	beginTs, endTs   int64
	beginPhy, endPhy int64
	usedSlots        int32
	count            int32 // next entry number, >= 1
}

func (h *header) put(b []byte) {
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(h.beginTs))
	be.PutUint64(b[8:], uint64(h.endTs))
	be.PutUint64(b[16:], uint64(h.beginPhy))
	be.PutUint64(b[24:], uint64(h.endPhy))
	be.PutUint32(b[32:], uint32(h.usedSlots))
	be.PutUint32(b[36:], uint32(h.count))
}

func decodeHeader(b []byte) header {
	be := binary.BigEndian
	return header{
		beginTs:   int64(be.Uint64(b[0:])),
		endTs:     int64(be.Uint64(b[8:])),
		beginPhy:  int64(be.Uint64(b[16:])),
		endPhy:    int64(be.Uint64(b[24:])),
		usedSlots: int32(be.Uint32(b[32:])),
		count:     int32(be.Uint32(b[36:])),
	}
}

// entry is one index entry.
type entry struct {
	hash int32
	phy  int64
	td   int32
	prev int32
}

// indexFile is one open, mapped index file. It is not safe for concurrent
// use; the Index serializes access.
type indexFile struct {
	name    string
	created int64 // ms, from the name
	path    string
	f       vfs.File
	m       vfs.Mapping
	b       []byte
	slots   int32
	entries int32 // room, entry 0 included
	h       header
	dirty   bool // changed since the last Sync captured it
	// tab is the slot table slot and setSlot use: the mapping's, or, while
	// owned, a private copy in memory (see own).
	tab   []byte
	owned bool
}

// geometry returns the number of entries a file of size bytes with slots
// slots holds, or an error if size does not fit the layout.
func geometry(size int64, slots int32) (int32, error) {
	rest := size - headerSize - slotSize*int64(slots)
	if rest < 2*entrySize || rest%entrySize != 0 || rest/entrySize > math.MaxInt32 {
		return 0, fmt.Errorf("size %d does not fit 40 + 4*%d + 20*entries (entries >= 2)", size, slots)
	}
	return int32(rest / entrySize), nil
}

// createFile creates, preallocates and maps a new empty index file.
func createFile(fsys vfs.FS, dir string, created int64, slots, entries int32) (*indexFile, error) {
	name := fileName(created)
	path := filepath.Join(dir, name)
	size := headerSize + slotSize*int64(slots) + entrySize*int64(entries)
	f, err := fsys.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create index file: %w", err)
	}
	fail := func(err error) (*indexFile, error) {
		f.Close()
		fsys.Remove(path)
		return nil, err
	}
	if err := f.Allocate(0, size); err != nil {
		return fail(fmt.Errorf("allocate index file %s (%d bytes): %w", path, size, err))
	}
	m, err := f.Map(int(size))
	if err != nil {
		return fail(fmt.Errorf("map index file %s: %w", path, err))
	}
	x := &indexFile{name: name, created: created, path: path, f: f, m: m, b: m.Bytes(), slots: slots, entries: entries,
		h: header{count: 1}, dirty: true}
	x.tab = x.mappedTab()
	x.h.put(x.b)
	return x, nil
}

// openFile opens and maps an existing index file and checks its header.
func openFile(fsys vfs.FS, dir, name string, slots int32) (*indexFile, error) {
	created, ok := parseFileName(name)
	if !ok {
		return nil, fmt.Errorf("open index file %s: not an index file name", name)
	}
	path := filepath.Join(dir, name)
	f, err := fsys.OpenReadWrite(path)
	if err != nil {
		return nil, fmt.Errorf("open index file: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("size of index file %s: %w", path, err)
	}
	entries, err := geometry(size, slots)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("index file %s: %w", path, err)
	}
	m, err := f.Map(int(size))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("map index file %s: %w", path, err)
	}
	x := &indexFile{name: name, created: created, path: path, f: f, m: m, b: m.Bytes(), slots: slots, entries: entries}
	x.tab = x.mappedTab()
	x.h = decodeHeader(x.b)
	return x, nil
}

// validHeader reports whether the header is plausible for a complete file
// (not the last one, whose header recovery rewrites).
func (x *indexFile) validHeader() error {
	h := x.h
	if h.count < 1 || h.count > x.entries {
		return fmt.Errorf("index file %s: indexCount %d outside [1,%d]", x.path, h.count, x.entries)
	}
	if h.usedSlots < 0 || h.usedSlots > x.slots || h.usedSlots > h.count {
		return fmt.Errorf("index file %s: hashSlotCount %d invalid", x.path, h.usedSlots)
	}
	if h.count > 1 && (h.endPhy < h.beginPhy || h.endTs < h.beginTs && h.endTs != 0) {
		return fmt.Errorf("index file %s: header range [%d,%d] ts [%d,%d] invalid", x.path, h.beginPhy, h.endPhy, h.beginTs, h.endTs)
	}
	return nil
}

func (x *indexFile) close() error {
	var errs []error
	if x.m != nil {
		if err := x.m.Close(); err != nil {
			errs = append(errs, fmt.Errorf("unmap %s: %w", x.path, err))
		}
		x.m, x.b, x.tab, x.owned = nil, nil, nil, false
	}
	if x.f != nil {
		if err := x.f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", x.path, err))
		}
		x.f = nil
	}
	return errors.Join(errs...)
}

func (x *indexFile) full() bool  { return x.h.count >= x.entries }
func (x *indexFile) empty() bool { return x.h.count <= 1 }

// slotPos is the position of hash's slot; hash is taken unsigned so a
// damaged negative value cannot index outside the table.
func (x *indexFile) slotPos(hash int32) int {
	return headerSize + slotSize*int(uint32(hash)%uint32(x.slots))
}

func (x *indexFile) entryPos(i int32) int {
	return headerSize + slotSize*int(x.slots) + entrySize*int(i)
}

func (x *indexFile) slot(hash int32) int32 {
	return int32(binary.BigEndian.Uint32(x.tab[x.slotPos(hash)-headerSize:]))
}

func (x *indexFile) setSlot(hash int32, v int32) {
	binary.BigEndian.PutUint32(x.tab[x.slotPos(hash)-headerSize:], uint32(v))
}

// mappedTab is the slot table in the mapping.
func (x *indexFile) mappedTab() []byte { return x.b[headerSize:x.entryPos(0)] }

// own moves the slot table into memory: from now on slot and setSlot use
// a private copy and the mapping's table is left as it was (stale) until
// spill. The file being written owns its table. Its keys fall on random
// slots, so through the mapping nearly every put would write a page that
// the last Sync's writeback made clean and write-protected, and each such
// write is a page fault (and each writeback a TLB shootdown of the page);
// with 5 000 000 slots that is a fault for almost every key at tens of
// thousands of keys a second. Nothing needs the table on disk before the
// file is full or the index stops: recovery after a crash rebuilds the
// last file's table from its durable entries (rebuildSlots), and trusts
// the table only of a file older than the last one or of a clean stop,
// and both spill first. fresh says the mapping's table is all zeros (a
// new file), so there is nothing to copy.
func (x *indexFile) own(fresh bool) {
	if x.owned {
		return
	}
	t := make([]byte, len(x.tab))
	if !fresh {
		copy(t, x.tab)
	}
	x.tab, x.owned = t, true
}

// spill writes an owned slot table back to the mapping, which the file
// uses from then on, and marks the file dirty so the next Sync makes the
// table durable. It does nothing unless the table is owned.
func (x *indexFile) spill() {
	if !x.owned {
		return
	}
	m := x.mappedTab()
	copy(m, x.tab)
	x.tab, x.owned = m, false
	x.dirty = true
}

func (x *indexFile) entry(i int32) entry {
	p := x.b[x.entryPos(i):]
	be := binary.BigEndian
	return entry{
		hash: int32(be.Uint32(p[0:])),
		phy:  int64(be.Uint64(p[4:])),
		td:   int32(be.Uint32(p[12:])),
		prev: int32(be.Uint32(p[16:])),
	}
}

func (x *indexFile) putEntry(i int32, e entry) {
	p := x.b[x.entryPos(i):]
	be := binary.BigEndian
	be.PutUint32(p[0:], uint32(e.hash))
	be.PutUint64(p[4:], uint64(e.phy))
	be.PutUint32(p[12:], uint32(e.td))
	be.PutUint32(p[16:], uint32(e.prev))
}

// timeDiff is RocketMQ's (ts - beginTs) / 1000 clamped to [0, MaxInt32].
func timeDiff(ts, beginTs int64) int32 {
	d := (ts - beginTs) / 1000
	switch {
	case d < 0:
		return 0
	case d > math.MaxInt32:
		return math.MaxInt32
	}
	return int32(d)
}

// put appends an entry (RocketMQ IndexFile.putKey). hash is non-negative.
// The file must not be full.
func (x *indexFile) put(hash int32, phy, ts int64) {
	h := &x.h
	old := x.slot(hash)
	if old <= 0 || old >= h.count {
		old = 0
	}
	if h.count <= 1 {
		h.beginTs, h.beginPhy = ts, phy
	}
	x.putEntry(h.count, entry{hash: hash, phy: phy, td: timeDiff(ts, h.beginTs), prev: old})
	x.setSlot(hash, h.count)
	if old == 0 {
		h.usedSlots++
	}
	h.count++
	h.endPhy, h.endTs = phy, ts
	h.put(x.b)
	x.dirty = true
}

// entryTime is the store time an entry stands for: beginTimestamp plus its
// whole seconds.
func (x *indexFile) entryTime(e entry) int64 { return x.h.beginTs + int64(e.td)*1000 }

// firstAtOrAbove returns the number of the first entry whose phyOffset is
// >= phy (entries are in phyOffset order), or count if none is.
func (x *indexFile) firstAtOrAbove(phy int64) int32 {
	n := int(x.h.count) - 1
	i := sort.Search(n, func(i int) bool { return x.entry(int32(i+1)).phy >= phy })
	return int32(i + 1)
}

// headerAt returns the header the file had when its count was k (k >= 2),
// for entries that stay: the begin fields are unchanged, the end fields
// come from entry k-1. The exact end timestamp is lost (entries keep
// seconds): it is set to the last millisecond of entry k-1's second, an
// upper bound. Queries never read endTimestamp, so they cannot tell.
// usedSlots is not known without the slot table and is left as it is.
func (x *indexFile) headerAt(k int32) header {
	h := x.h
	h.count = k
	if k <= 1 {
		return header{count: 1}
	}
	last := x.entry(k - 1)
	h.endPhy = last.phy
	h.endTs = x.entryTime(last) + 999
	return h
}

// truncate removes entries k and above, newest first, restoring each
// slot to the entry's prevIndex: the file ends up exactly as if those
// entries had never been put, apart from endTimestamp (see headerAt).
func (x *indexFile) truncate(k int32) {
	if k < 1 {
		k = 1
	}
	if k >= x.h.count {
		return
	}
	nh := x.headerAt(k)
	used := x.h.usedSlots
	for i := x.h.count - 1; i >= k; i-- {
		e := x.entry(i)
		if x.slot(e.hash) == i {
			prev := e.prev
			if prev >= i {
				prev = 0
			}
			x.setSlot(e.hash, prev)
			if prev == 0 {
				used--
			}
		}
		x.putEntry(i, entry{})
	}
	nh.usedSlots = used
	x.h = nh
	x.h.put(x.b)
	x.dirty = true
}

// rebuildSlots recomputes the slot table and hashSlotCount from entries
// [1, count), which are trusted; entries at and above count are left as
// they are (nothing reaches them, and put overwrites them).
// Recovery uses it on the last file after a crash, when the slot table on
// disk may be stale (the file owned it, see own) or hold values written
// after the durable checkpoint.
func (x *indexFile) rebuildSlots(count int32) {
	clear(x.tab)
	if count > x.entries {
		count = x.entries
	}
	used := int32(0)
	for i := int32(1); i < count; i++ {
		e := x.entry(i)
		if x.slot(e.hash) == 0 {
			used++
		}
		x.setSlot(e.hash, i)
	}
	x.h.count = count
	x.h.usedSlots = used
	x.h.put(x.b)
	x.dirty = true
}

// lookup walks the chain of hash newest first (RocketMQ
// IndexFile.selectPhyOffset), appending to dst the phyOffset of every entry
// with that hash whose second may hold a time in [begin, end], until dst
// holds max. An entry's store time is only known to the second: it lies in
// [t, t+999] with t = entryTime. Unlike RocketMQ, which compares t alone
// and so misses records stored in the same second as begin but after t,
// an entry matches when that interval meets [begin, end]; the caller
// filters by the exact time. The walk stops at the first entry entirely
// older than begin: entries of one chain are in time order.
func (x *indexFile) lookup(dst []int64, hash int32, begin, end int64, max int) []int64 {
	i := x.slot(hash)
	for i > 0 && i < x.h.count && len(dst) < max {
		e := x.entry(i)
		t := x.entryTime(e)
		if t+999 < begin {
			break
		}
		if e.hash == hash && t <= end {
			dst = append(dst, e.phy)
		}
		if e.prev >= i {
			break // a loop would never end; entries only point back
		}
		i = e.prev
	}
	return dst
}
