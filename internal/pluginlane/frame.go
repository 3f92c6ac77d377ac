package pluginlane

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/internal/pluginwire"
)

// Frame types (see the package documentation).
const (
	frameHello  byte = 1
	frameCall   byte = 2
	frameReply  byte = 3
	framePush   byte = 4
	frameEnd    byte = 5
	frameCancel byte = 6
)

// MaxFrame bounds what follows a frame's length: the largest message the
// boundary carries (pluginwire.MaxMsg/2, the host's cap on one ReadLog)
// and room for the call's header and a message's own framing.
const MaxFrame = pluginwire.MaxMsg/2 + 64<<10

// frameOverhead is the type byte and the call id after the length.
const frameOverhead = 1 + 4

// frame is one frame read off the connection.
type frame struct {
	typ  byte
	id   uint32
	body []byte
}

// readFrame reads one frame. Its body is freshly allocated: the caller
// keeps it.
func readFrame(r *bufio.Reader) (frame, error) {
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return frame{}, err
	}
	n := binary.LittleEndian.Uint32(lb[:])
	if n < frameOverhead || n > MaxFrame {
		return frame{}, fmt.Errorf("plugin lane: frame length %d outside [%d, %d]", n, frameOverhead, MaxFrame)
	}
	b, err := readBody(r, int(n))
	if err != nil {
		return frame{}, fmt.Errorf("plugin lane: read a %d-byte frame: %w", n, err)
	}
	f := frame{typ: b[0], id: binary.LittleEndian.Uint32(b[1:5]), body: b[5:]}
	if f.typ < frameHello || f.typ > frameCancel {
		return frame{}, fmt.Errorf("plugin lane: unknown frame type %d", f.typ)
	}
	return f, nil
}

// firstChunk is what readBody allocates before any byte arrived: a
// length claiming a gigabyte costs memory only as the bytes come.
const firstChunk = 1 << 20

// readBody reads n bytes, growing its buffer as they arrive.
func readBody(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, 0, min(n, firstChunk))
	for len(b) < n {
		if len(b) == cap(b) {
			b = append(b, make([]byte, min(n-len(b), cap(b)))...)[:len(b)]
		}
		k, err := io.ReadFull(r, b[len(b):min(n, cap(b))])
		b = b[:len(b)+k]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return b, nil
}

// callHeader is a call frame's body before the request message.
type callHeader struct {
	method  string
	timeout time.Duration // 0: none
}

// appendCallHeader encodes h (the request message follows it).
func appendCallHeader(b []byte, h callHeader) ([]byte, error) {
	if len(h.method) == 0 || len(h.method) > 255 {
		return nil, fmt.Errorf("plugin lane: method name %q: length %d outside [1, 255]", h.method, len(h.method))
	}
	b = append(b, byte(len(h.method)))
	b = append(b, h.method...)
	return binary.LittleEndian.AppendUint64(b, uint64(h.timeout)), nil
}

// parseCall splits a call frame's body into its header and request.
func parseCall(body []byte) (callHeader, []byte, error) {
	if len(body) < 1 {
		return callHeader{}, nil, errors.New("plugin lane: call frame without a method")
	}
	n := int(body[0])
	if n == 0 || len(body) < 1+n+8 {
		return callHeader{}, nil, fmt.Errorf("plugin lane: call frame of %d bytes too short for a %d-byte method and a timeout", len(body), n)
	}
	h := callHeader{method: string(body[1 : 1+n])}
	t := int64(binary.LittleEndian.Uint64(body[1+n:]))
	if t < 0 {
		return callHeader{}, nil, fmt.Errorf("plugin lane: call %s with negative timeout %d", h.method, t)
	}
	h.timeout = time.Duration(t)
	return h, body[1+n+8:], nil
}

// parseStatus splits a reply or end frame's body into its code and the
// rest (the response, or the encoded status).
func parseStatus(body []byte) (uint32, []byte, error) {
	if len(body) < 4 {
		return 0, nil, fmt.Errorf("plugin lane: status body of %d bytes (want at least 4)", len(body))
	}
	return binary.LittleEndian.Uint32(body), body[4:], nil
}

// writer sends frames from many goroutines over one connection. A burst
// of concurrent frames is flushed once, by the last writer of the burst.
type writer struct {
	mu      sync.Mutex
	bw      *bufio.Writer
	waiting atomic.Int32
	err     error // the first write error; every later send returns it
}

func newWriter(w io.Writer) *writer { return &writer{bw: bufio.NewWriterSize(w, 64<<10)} }

// send writes one frame of type typ for call id with body parts, in order.
func (w *writer) send(typ byte, id uint32, parts ...[]byte) error {
	size := frameOverhead
	for _, p := range parts {
		size += len(p)
	}
	if size > MaxFrame {
		return fmt.Errorf("plugin lane: a %d-byte frame is over the %d-byte limit", size, MaxFrame)
	}
	var h [4 + frameOverhead]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(size))
	h[4] = typ
	binary.LittleEndian.PutUint32(h[5:], id)
	w.waiting.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	last := w.waiting.Add(-1) == 0
	if w.err != nil {
		return w.err
	}
	if _, err := w.bw.Write(h[:]); err != nil {
		w.err = err
		return err
	}
	for _, p := range parts {
		if _, err := w.bw.Write(p); err != nil {
			w.err = err
			return err
		}
	}
	if last {
		if err := w.bw.Flush(); err != nil {
			w.err = err
			return err
		}
	}
	return nil
}
