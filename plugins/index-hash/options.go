package indexhash

import (
	"log/slog"
	"time"

	"github.com/keelmq/keel/core/vfs"
)

// Option configures an Index at construction.
type Option func(*options)

type options struct {
	fs  vfs.FS
	log *slog.Logger
	now func() time.Time
}

// WithFS sets the filesystem the index files live on; default vfs.OS.
// Tests pass a vfs.NewCrashFS.
func WithFS(fsys vfs.FS) Option { return func(o *options) { o.fs = fsys } }

// WithLogger sets the logger; default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock sets the clock that names new index files; default time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }
