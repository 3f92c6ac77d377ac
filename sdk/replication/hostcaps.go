package replication

import (
	"context"

	"github.com/keelmq/keel/sdk"
)

// LogIntoReader is an optional capability of an sdk.Host, discovered by
// type assertion: ReadLog into a buffer the caller owns, so a stream
// reading batch after batch does not allocate a fresh copy of each (a
// master streaming or a replica serving a pull reads up to BatchSize bytes
// per frame). The in-process host (sdk/storehost) implements it; a host
// reached over the plugin protocol does not, and ReadLog is used instead.
type LogIntoReader interface {
	// ReadLogInto returns the bytes ReadLog(ctx, from, maxBytes) would
	// return, with the same contract (whole records from the record
	// boundary from, at least one, about maxBytes, never crossing a
	// segment; empty when from is the committed offset; sdk.ErrOffset
	// outside the log), copied into buf[:0]. buf grows only when its
	// capacity is too small. The result aliases buf (or its replacement)
	// and stays valid until the caller reuses it; on error it is empty.
	ReadLogInto(ctx context.Context, from int64, maxBytes int, buf []byte) ([]byte, error)
}

// logReader reads a host's log, through LogIntoReader into one reused
// buffer when the host has it, else through ReadLog. A logReader belongs
// to one goroutine.
type logReader struct {
	host sdk.Host
	into LogIntoReader // nil: the host lacks the capability
	buf  []byte
}

func newLogReader(h sdk.Host) *logReader {
	r := &logReader{host: h}
	r.into, _ = h.(LogIntoReader)
	return r
}

// read returns the log bytes at from (see sdk.Host.ReadLog). With
// LogIntoReader the result is only valid until the next read: the caller
// must be done with it (a Conn.WriteFrame has returned) before reading
// again.
func (r *logReader) read(ctx context.Context, from int64, maxBytes int) ([]byte, error) {
	if r.into == nil {
		return r.host.ReadLog(ctx, from, maxBytes)
	}
	b, err := r.into.ReadLogInto(ctx, from, maxBytes, r.buf)
	if cap(b) > cap(r.buf) {
		r.buf = b[:0]
	}
	return b, err
}
