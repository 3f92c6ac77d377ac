package meta

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/keelmq/keel/core/vfs"
)

// TempSuffix is appended to a file's path to name the temporary file that
// WriteFileAtomic writes before renaming it into place. A file with this
// suffix left behind by a crash holds no committed state and is ignored by
// every reader in keel.
const TempSuffix = ".tmp"

// WriteFileAtomic replaces the content of path with data so that a crash at
// any moment leaves either the complete old content or the complete new
// content at path, never a mixture, a truncated file or garbage.
//
// It writes data to path+TempSuffix (truncating any leftover from an earlier
// crash), syncs that file, renames it over path and syncs the parent
// directory. When it returns nil the new content is durable (see the vfs
// durability model). When it returns an error the content at path is the old
// one or the new one (the rename may or may not have happened); a following
// call that succeeds makes the state unambiguous. The parent directory must
// exist.
//
// Concurrent calls for the same path must be serialised by the caller; calls
// for different paths may run concurrently.
func WriteFileAtomic(fsys vfs.FS, path string, data []byte) error {
	tmp := path + TempSuffix
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("meta: create temp file %s: %w", tmp, err)
	}
	fail := func(what string, err error) error {
		_ = f.Close()
		_ = fsys.Remove(tmp) // best effort: a leftover temp file is harmless
		return fmt.Errorf("meta: %s %s: %w", what, tmp, err)
	}
	if len(data) > 0 {
		n, err := f.WriteAt(data, 0)
		if err == nil && n != len(data) {
			err = io.ErrShortWrite
		}
		if err != nil {
			return fail("write temp file", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail("sync temp file", err)
	}
	if err := f.Close(); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("meta: close temp file %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("meta: rename %s over %s: %w", tmp, path, err)
	}
	dir := filepath.Dir(path)
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("meta: sync directory %s after replacing %s: %w", dir, path, err)
	}
	return nil
}

// ReadFile returns the whole content of path. An error for a missing file
// satisfies errors.Is(err, fs.ErrNotExist) when the FS reports it so (both
// vfs implementations do).
func ReadFile(fsys vfs.FS, path string) ([]byte, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return nil, fmt.Errorf("meta: open %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("meta: size of %s: %w", path, err)
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !(errors.Is(err, io.EOF) && int64(n) == size) {
		return nil, fmt.Errorf("meta: read %s: %w", path, err)
	}
	return buf[:n], nil
}
