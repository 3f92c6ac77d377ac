// Package storelock is the lock on a store directory: the exclusive flock
// a process holds on the store's "lock" file (RocketMQ's store lock) for
// as long as it uses the store, so that no second `keel serve` opens,
// recovers or closes a store another one serves, and `keel store repair`
// never cuts a log a running broker is writing.
//
// The lock is advisory (flock(2)): it binds keel's own processes. It is
// released when the holder calls Release or exits, kill -9 included, so a
// crashed holder never leaves a stale lock; the pid in the file is
// information for the error message only.
package storelock

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// File is the lock file's name in the store directory.
const File = "lock"

// InUseError says the store directory is locked by another process.
type InUseError struct {
	Dir string
	// PID is the holder's pid as its lock file says, "unknown" when it
	// says nothing.
	PID string
}

func (e *InUseError) Error() string {
	return fmt.Sprintf("store %s is in use by another keel process (pid %s)", e.Dir, e.PID)
}

// Lock is a held store lock.
type Lock struct{ f *os.File }

// Acquire takes dir's lock without waiting and writes this process's pid
// into the lock file. It fails with an *InUseError when another process
// holds it, and with a wrapped error when the file cannot be opened or
// locked. dir must exist.
func Acquire(dir string) (*Lock, error) {
	path := filepath.Join(dir, File)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := strings.TrimSpace(string(pid))
			if holder == "" {
				holder = "unknown"
			}
			return nil, &InUseError{Dir: dir, PID: holder}
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release gives the lock up. It is safe to call on a nil Lock.
func (l *Lock) Release() error {
	if l == nil {
		return nil
	}
	return l.f.Close() // closing the descriptor releases the flock
}
