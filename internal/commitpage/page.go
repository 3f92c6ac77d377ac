// Package commitpage shares one number, a store's committed offset, between
// a host and the external plugins it starts, through a small memory-mapped
// file: the host stores the offset on every commit (core.Store's
// MirrorCommitted), and a plugin loads it without a call across the
// process boundary. A plugin still asks the host (a call) when the page
// shows nothing new: the page answers "what is committed now", never
// "wake me when it grows".
//
// # Contract
//
//   - The page is PageSize bytes: an 8-byte magic ("keelcp01") and the
//     offset, a little-endian int64 at byte 8, stored and loaded
//     atomically. Nothing else is in it.
//   - One process writes (Writer), any number read (Reader, a read-only
//     mapping). A Reader's Load sees every Store that happened before it,
//     in order; it may miss the newest.
//   - The file lives in a directory the host owns; Writer.Close unmaps and
//     removes it. A Reader's mapping stays valid after that, with the last
//     value stored, until the Reader is closed.
//
// Linux only, as the store's own mapped files are (golang.org/x/sys/unix).
package commitpage

import (
	"bytes"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// PageSize is the file's size.
const PageSize = 4096

var magic = []byte("keelcp01")

// offsetAt is the offset's byte position in the page.
const offsetAt = 8

// Writer is the host's end: it stores the offset.
type Writer struct {
	path string
	b    []byte
	v    *atomic.Int64
}

// Create makes a fresh page file in dir holding offset 0.
func Create(dir string) (*Writer, error) {
	f, err := os.CreateTemp(dir, "committed-*.page")
	if err != nil {
		return nil, fmt.Errorf("create committed-offset page in %s: %w", dir, err)
	}
	path := f.Name()
	fail := func(what string, err error) (*Writer, error) {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("committed-offset page %s: %s: %w", path, what, err)
	}
	if err := f.Truncate(PageSize); err != nil {
		return fail("size it", err)
	}
	if _, err := f.WriteAt(magic, 0); err != nil {
		return fail("write its magic", err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, PageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("map it", err)
	}
	if err := f.Close(); err != nil {
		unix.Munmap(b)
		os.Remove(path)
		return nil, fmt.Errorf("committed-offset page %s: close: %w", path, err)
	}
	return &Writer{path: path, b: b, v: word(b)}, nil
}

// Path is the file a Reader opens.
func (w *Writer) Path() string { return w.path }

// Store publishes v.
func (w *Writer) Store(v int64) { w.v.Store(v) }

// Close unmaps and removes the file. The Writer is not used afterwards.
func (w *Writer) Close() error {
	err := unix.Munmap(w.b)
	if rerr := os.Remove(w.path); err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("close committed-offset page %s: %w", w.path, err)
	}
	return nil
}

// Reader is a plugin's end: it loads the offset.
type Reader struct {
	b []byte
	v *atomic.Int64
}

// Open maps the page at path read-only. It fails on a file that is not a
// page (wrong size or magic).
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open committed-offset page: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("committed-offset page %s: %w", path, err)
	}
	if st.Size() != PageSize {
		return nil, fmt.Errorf("committed-offset page %s: %d bytes, want %d", path, st.Size(), PageSize)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, PageSize, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("committed-offset page %s: map it: %w", path, err)
	}
	if got := bytes.Clone(b[:len(magic)]); !bytes.Equal(got, magic) {
		unix.Munmap(b)
		return nil, fmt.Errorf("committed-offset page %s: magic %q, want %q", path, got, magic)
	}
	return &Reader{b: b, v: word(b)}, nil
}

// Load returns the offset last stored (or a newer one than the last Load).
func (r *Reader) Load() int64 { return r.v.Load() }

// Close unmaps the page. The Reader is not used afterwards.
func (r *Reader) Close() error {
	if err := unix.Munmap(r.b); err != nil {
		return fmt.Errorf("close committed-offset page: %w", err)
	}
	return nil
}

// word is the offset in a mapped page (page-aligned, so byte 8 is
// 8-aligned).
func word(b []byte) *atomic.Int64 {
	return (*atomic.Int64)(unsafe.Pointer(&b[offsetAt]))
}
