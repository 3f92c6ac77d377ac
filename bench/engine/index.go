package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"path/filepath"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

// Indexer is the index side of a cell: a dispatch listener the store feeds
// (see core.DispatchListener), started once the store is open (Start, with
// the cell's host) and closed after the store closed (Close).
type Indexer interface {
	core.DispatchListener
	Start(ctx context.Context, host sdk.Host) error
	Close() error
}

// PluginIndexer adapts an sdk.Indexer that has been configured (a
// builtin, or a go-plugin client of an external one) to Indexer: dispatch
// goes through storehost.Listener, Start and Close are the plugin's Start
// and Stop.
func PluginIndexer(ix sdk.Indexer) Indexer {
	return &pluginIndexer{Listener: storehost.Listener{Indexer: ix}, ix: ix}
}

type pluginIndexer struct {
	storehost.Listener
	ix sdk.Indexer
}

func (p *pluginIndexer) Start(ctx context.Context, host sdk.Host) error { return p.ix.Start(ctx, host) }

func (p *pluginIndexer) Close() error { return p.ix.Stop(context.Background()) }

// IndexFactory makes a fresh Indexer keeping its files in dir (which
// exists) for one run.
type IndexFactory func(dir string) (Indexer, error)

// IndexImpl is a registered index implementation.
type IndexImpl struct {
	New  IndexFactory
	Impl string // "emulated" or "plugin"
}

var indexReg = map[[2]string]IndexImpl{}

// RegisterIndex makes name (an index axis value other than "none") in
// mode run with f; a later registration replaces an earlier one.
func RegisterIndex(name, mode, impl string, f IndexFactory) {
	regMu.Lock()
	defer regMu.Unlock()
	indexReg[[2]string{name, mode}] = IndexImpl{New: f, Impl: impl}
}

// LookupIndex returns the registered implementation.
func LookupIndex(name, mode string) (IndexImpl, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	r, ok := indexReg[[2]string{name, mode}]
	return r, ok
}

func init() {
	RegisterIndex("hash", "builtin", "emulated", func(dir string) (Indexer, error) { return NewHashIndex(vfs.OS, dir, 1<<20) })
}

// HashIndex emulates RocketMQ's IndexFile: a hash slot table pointing at
// the newest entry of each slot, and 20-byte entries (key hash, physical
// offset, time delta, previous entry) appended per key of every record
// (each KEYS word and the UNIQ_KEY). Entries are written to a file with
// pwrite as batches arrive; Sync is fdatasync. The slot table stays in
// memory.
type HashIndex struct {
	f     vfs.File
	slots []int32
	n     int32 // entries so far
	off   int64
	base  int64 // timestamp of the first record
	buf   []byte
}

// NewHashIndex creates the index file in dir.
func NewHashIndex(fsys vfs.FS, dir string, slots int) (*HashIndex, error) {
	f, err := fsys.Create(filepath.Join(dir, "index"))
	if err != nil {
		return nil, fmt.Errorf("create index file: %w", err)
	}
	return &HashIndex{f: f, slots: make([]int32, slots)}, nil
}

const indexEntry = 20

// Dispatch implements core.DispatchListener.
func (h *HashIndex) Dispatch(batch []core.DispatchRecord) error {
	h.buf = h.buf[:0]
	for _, r := range batch {
		if h.base == 0 {
			h.base = r.StoreTimestamp
		}
		for k := range record.IndexKeys(r.Keys) {
			h.add(r.Topic, k, r)
		}
		if r.UniqKey != "" {
			h.add(r.Topic, r.UniqKey, r)
		}
	}
	if len(h.buf) == 0 {
		return nil
	}
	if _, err := h.f.WriteAt(h.buf, h.off); err != nil {
		return fmt.Errorf("write index entries: %w", err)
	}
	h.off += int64(len(h.buf))
	return nil
}

func (h *HashIndex) add(topic, key string, r core.DispatchRecord) {
	f := fnv.New32a()
	f.Write([]byte(topic))
	f.Write([]byte{'#'})
	f.Write([]byte(key))
	hash := f.Sum32()
	slot := hash % uint32(len(h.slots))
	h.n++
	var e [indexEntry]byte
	binary.BigEndian.PutUint32(e[0:], hash)
	binary.BigEndian.PutUint64(e[4:], uint64(r.PhysOffset))
	binary.BigEndian.PutUint32(e[12:], uint32((r.StoreTimestamp-h.base)/1000))
	binary.BigEndian.PutUint32(e[16:], uint32(h.slots[slot]))
	h.slots[slot] = h.n
	h.buf = append(h.buf, e[:]...)
}

// Start implements Indexer; the emulation needs nothing from the host.
func (h *HashIndex) Start(ctx context.Context, host sdk.Host) error { return nil }

// Sync implements core.DispatchListener.
func (h *HashIndex) Sync() error {
	if err := h.f.Datasync(); err != nil {
		return fmt.Errorf("sync index file: %w", err)
	}
	return nil
}

// Close closes the index file.
func (h *HashIndex) Close() error { return h.f.Close() }

// Entries is the number of index entries written.
func (h *HashIndex) Entries() int { return int(h.n) }
