package vfs

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Op is a set of CrashFS operations, for fault injection. Single operations
// are the Op* constants; sets are their bitwise or.
type Op uint32

// The operations a fault can target.
const (
	OpCreate    Op = 1 << iota // FS.Create
	OpOpen                     // FS.Open, FS.OpenReadWrite
	OpRemove                   // FS.Remove, FS.RemoveAll
	OpRename                   // FS.Rename (path is the old name)
	OpMkdir                    // FS.MkdirAll
	OpReadDir                  // FS.ReadDir
	OpStat                     // FS.Stat
	OpSyncDir                  // FS.SyncDir, File.Sync on a directory
	OpRead                     // File.ReadAt
	OpWrite                    // File.WriteAt
	OpSync                     // File.Sync on a file
	OpDatasync                 // File.Datasync
	OpTruncate                 // File.Truncate
	OpAllocate                 // File.Allocate
	OpZeroRange                // File.ZeroRange
	OpMap                      // File.Map

	// OpAll is every operation.
	OpAll Op = OpMap<<1 - 1
)

var opNames = [...]string{
	"create", "open", "remove", "rename", "mkdir", "readdir", "stat",
	"syncdir", "read", "write", "sync", "datasync", "truncate", "allocate",
	"zerorange", "map",
}

// String returns the operation's name, or the names of a set joined by "|".
func (op Op) String() string {
	var names []string
	for i, name := range opNames {
		if op&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if rest := op &^ OpAll; rest != 0 {
		names = append(names, fmt.Sprintf("Op(%#x)", uint32(rest)))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// Fault is a rule for CrashFS.InjectFault: matching operations fail instead
// of taking effect.
type Fault struct {
	// Ops is the set of operations the fault applies to.
	Ops Op
	// PathPrefix limits the fault to paths that start with it, compared as
	// strings against the cleaned absolute path (for File operations, the
	// path the file was opened with). Empty matches every path.
	PathPrefix string
	// Count is how many matching calls fail before the fault is used up;
	// 0 means every matching call fails until ClearFaults.
	Count int
	// Err is the error the operation fails with, wrapped in *os.PathError
	// and in a message saying it was injected; nil means ErrIO.
	Err error
	// ShortWrite makes a matching WriteAt a short write: it writes the
	// first min(Written, len(p)-1) bytes, clamped to at least 0, and
	// returns that count with an error matching both io.ErrShortWrite and
	// Err. Other operations ignore it.
	ShortWrite bool
	// Written is the number of bytes a short write writes.
	Written int
}

// InjectFault adds f to the fault rules. For each operation the rules are
// tried in the order they were added and the first that matches fires;
// only when none matches is the fault hook consulted. A failed operation
// changes nothing, with two exceptions: a short write writes its prefix,
// and a failed Sync or Datasync leaves the file in the fsyncgate state
// described on CrashFS.
func (c *CrashFS) InjectFault(f Fault) {
	if f.Err == nil {
		f.Err = ErrIO
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = append(c.faults, &f)
}

// InjectNoSpace makes the next n WriteAt and Allocate calls fail with an
// error matching ErrNoSpace.
func (c *CrashFS) InjectNoSpace(n int) {
	c.InjectFault(Fault{Ops: OpWrite | OpAllocate, Count: n, Err: ErrNoSpace})
}

// InjectSyncError makes every Sync and Datasync of files whose path starts
// with prefix fail with an error matching ErrIO, until ClearFaults.
func (c *CrashFS) InjectSyncError(prefix string) {
	c.InjectFault(Fault{Ops: OpSync | OpDatasync, PathPrefix: prefix, Err: ErrIO})
}

// InjectShortWrite makes the next n WriteAt calls write at most written
// bytes (see Fault.ShortWrite) and fail with an error matching
// io.ErrShortWrite and err (ErrIO when nil).
func (c *CrashFS) InjectShortWrite(n, written int, err error) {
	c.InjectFault(Fault{Ops: OpWrite, Count: n, Err: err, ShortWrite: true, Written: written})
}

// SetFaultHook installs hook (nil removes it). It is called, with c's lock
// held, for every operation no Fault rule matched, with the single Op and
// the cleaned absolute path; a non-nil result makes the operation fail as an
// injected fault. hook must not call c.
func (c *CrashFS) SetFaultHook(hook func(op Op, path string) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hook = hook
}

// ClearFaults removes every Fault rule and the fault hook.
func (c *CrashFS) ClearFaults() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.faults = nil
	c.hook = nil
}

// injected is a fault decision: err is what the operation returns, short
// is the number of bytes a short write writes (-1: not a short write).
type injected struct {
	err   error
	short int
}

// decide finds the fault for op on canonical path p, consuming counts. It
// returns nil when the operation proceeds. c.mu is held.
func (c *CrashFS) decide(op Op, p string) *injected {
	for i, f := range c.faults {
		if f.Ops&op == 0 || !strings.HasPrefix(p, f.PathPrefix) {
			continue
		}
		if f.Count > 0 {
			f.Count--
			if f.Count == 0 {
				c.faults = append(c.faults[:i:i], c.faults[i+1:]...)
			}
		}
		c.stats.Faults++
		if f.ShortWrite && op == OpWrite {
			return &injected{
				err:   fmt.Errorf("injected short write: %w: %w", io.ErrShortWrite, f.Err),
				short: max(f.Written, 0),
			}
		}
		return &injected{err: fmt.Errorf("injected fault: %w", f.Err), short: -1}
	}
	if c.hook != nil {
		if err := c.hook(op, p); err != nil {
			c.stats.Faults++
			return &injected{err: fmt.Errorf("injected fault: %w", err), short: -1}
		}
	}
	return nil
}

// fault is decide for operations that cannot be short: it returns the
// error to fail with, as *os.PathError naming name, or nil.
func (c *CrashFS) fault(op Op, p, name string) error {
	if inj := c.decide(op, p); inj != nil {
		return &os.PathError{Op: op.String(), Path: name, Err: inj.err}
	}
	return nil
}
