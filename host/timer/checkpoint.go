package timer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/vfs"
)

// checkpoint is the index's progress, <dir>/checkpoint.json, written
// atomically (meta.WriteFileAtomic) after the timer log and the wheel are
// synced, so that everything it names is durable.
type checkpoint struct {
	// PrecisionMs and Slots are the wheel's layout; an index is reopened
	// only with the same.
	PrecisionMs int64 `json:"precisionMs"`
	Slots       int64 `json:"slots"`
	// LogEnd is the timer log's durable end: units past it are dropped at
	// open, and wheel slots pointing past it reverted.
	LogEnd int64 `json:"logEnd"`
	// QueueOffset is the timer topic's queue offset below which every
	// record is in the log (or skipped).
	QueueOffset int64 `json:"queueOffset"`
	// ReadTick is the first tick not yet delivered durably.
	ReadTick int64 `json:"readTick"`
	// SkipBelowTick and SkipUntilOffset: records below queue offset
	// SkipUntilOffset due before tick SkipBelowTick were delivered by an
	// earlier master and are not indexed again (a rebuild).
	SkipBelowTick   int64 `json:"skipBelowTick"`
	SkipUntilOffset int64 `json:"skipUntilOffset"`
	// Segments maps each timer log segment's base to the highest tick of
	// its units; a segment below ReadTick holds nothing pending.
	Segments map[int64]int64 `json:"segments"`
}

const checkpointName = "checkpoint.json"

// loadCheckpoint reads path; ok false when it does not exist.
func loadCheckpoint(path string) (c checkpoint, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, fmt.Errorf("read timer checkpoint: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return checkpoint{}, false, fmt.Errorf("decode timer checkpoint %s: %w", path, err)
	}
	if c.Segments == nil {
		c.Segments = map[int64]int64{}
	}
	return c, true, nil
}

func (c checkpoint) save(path string) error {
	b, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("encode timer checkpoint: %w", err)
	}
	if err := meta.WriteFileAtomic(vfs.OS, path, b); err != nil {
		return fmt.Errorf("write timer checkpoint: %w", err)
	}
	return nil
}
