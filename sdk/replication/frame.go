package replication

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/keelmq/keel/sdk"
)

// ProtocolVersion is the HA wire protocol version carried in the hellos.
// Peers with another version are refused.
const ProtocolVersion = 1

// FrameHeaderSize is the size of a frame header: type (1 byte) and payload
// length (4 bytes, big-endian).
const FrameHeaderSize = 5

// DefaultMaxFrame bounds a frame's payload unless Options.MaxFrameSize
// says otherwise: large enough for a batch plus the largest record (4 MiB
// bodies) and a metadata snapshot.
const DefaultMaxFrame = 32 << 20

// FrameType says what a frame's payload holds.
type FrameType uint8

// Frame types. The numbers are part of the protocol.
const (
	FrameClientHello FrameType = 1  // slave → master: Hello
	FrameServerHello FrameType = 2  // master → slave: Hello with the master's proof
	FrameAuth        FrameType = 3  // slave → master: Auth (the slave's proof)
	FrameState       FrameType = 4  // slave → master: State (its log and epochs)
	FramePlan        FrameType = 5  // master → slave: Plan (truncate, adopt history, stream from)
	FramePull        FrameType = 6  // master → slave: Pull (send me [From,To): reverse catch-up)
	FrameData        FrameType = 7  // either way: Data (log bytes at an offset)
	FrameHeartbeat   FrameType = 8  // master → slave: Heartbeat (master committed offset)
	FrameAck         FrameType = 9  // slave → master: Ack (received and flushed offsets)
	FrameMeta        FrameType = 10 // metadata snapshot (JSON, Host.MetaSnapshot): master → slave periodically; slave → master after a catch-up PULL
	FrameError       FrameType = 11 // either way, before closing: ErrorMsg
)

func (t FrameType) String() string {
	names := [...]string{"", "CLIENT_HELLO", "SERVER_HELLO", "AUTH", "STATE", "PLAN", "PULL", "DATA", "HEARTBEAT", "ACK", "META", "ERROR"}
	if int(t) > 0 && int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("FrameType(%d)", uint8(t))
}

// Errors of the framing layer; test with errors.Is.
var (
	// ErrFrameTooLarge: a frame's declared payload exceeds the bound. The
	// connection must be closed: the stream cannot be resynchronised.
	ErrFrameTooLarge = errors.New("HA frame too large")
	// ErrShortFrame: the bytes end inside a frame (DecodeFrame only).
	ErrShortFrame = errors.New("HA frame incomplete")
	// ErrBadFrame: an unknown frame type or a payload that does not
	// decode. The connection must be closed.
	ErrBadFrame = errors.New("malformed HA frame")
)

// Frame is one protocol unit: a type and its payload.
type Frame struct {
	Type    FrameType
	Payload []byte
}

// DecodeFrame decodes the frame at the start of b, accepting payloads of
// at most maxPayload bytes, and returns it with the number of bytes it
// used. The payload aliases b. It returns ErrShortFrame when b ends inside
// the frame, ErrFrameTooLarge when the header declares more than
// maxPayload (before waiting for it), and ErrBadFrame for an unknown type.
// It never panics and never allocates in proportion to a declared length.
func DecodeFrame(b []byte, maxPayload int) (Frame, int, error) {
	if len(b) < FrameHeaderSize {
		return Frame{}, 0, ErrShortFrame
	}
	t := FrameType(b[0])
	n := binary.BigEndian.Uint32(b[1:5])
	if t < FrameClientHello || t > FrameError {
		return Frame{}, 0, fmt.Errorf("%w: unknown type %d", ErrBadFrame, b[0])
	}
	if uint64(n) > uint64(maxPayload) {
		return Frame{}, 0, fmt.Errorf("%w: %s of %d bytes (max %d)", ErrFrameTooLarge, t, n, maxPayload)
	}
	end := FrameHeaderSize + int(n)
	if len(b) < end {
		return Frame{}, 0, ErrShortFrame
	}
	return Frame{Type: t, Payload: b[FrameHeaderSize:end:end]}, end, nil
}

// AppendFrame appends the encoding of a frame of type t whose payload is
// the concatenation of parts to dst.
func AppendFrame(dst []byte, t FrameType, parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	dst = append(dst, byte(t), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(dst[len(dst)-4:], uint32(n))
	for _, p := range parts {
		dst = append(dst, p...)
	}
	return dst
}

// Conn is a framed HA connection. Reads must come from one goroutine at a
// time; writes are serialised by an internal lock, so any goroutine may
// write. A read fails after between 7/8 of and the whole idle timeout
// given to NewConn (0: no limit) without data, and a write likewise after
// the write timeout: deadlines are re-armed only once an eighth of them
// has passed, not for every frame.
type Conn struct {
	nc       net.Conn
	r        *bufio.Reader
	maxFrame int
	idle     time.Duration
	rdl      time.Time // read deadline in force (zero: none set yet)
	hdr      [FrameHeaderSize]byte
	buf      []byte

	wmu      sync.Mutex
	wbuf     []byte // frames not yet sent (Flush, or a flushing or large write, sends them)
	wtimeout time.Duration
	wdl      time.Time // write deadline in force
}

// connBufSize is the size of a Conn's read buffer and of its write
// buffer; a frame part of at least largePart bytes is not copied into the
// write buffer but sent from where it is, together with what is buffered,
// in one gathering write.
const (
	connBufSize = 256 << 10
	largePart   = 64 << 10
)

// NewConn wraps nc. maxFrame bounds received payloads (frames announcing
// more are refused with ErrFrameTooLarge before anything is allocated);
// idle is the read deadline (the peer heartbeats well within it) and also
// bounds a write.
func NewConn(nc net.Conn, maxFrame int, idle time.Duration) *Conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return &Conn{nc: nc, r: bufio.NewReaderSize(nc, connBufSize), wbuf: make([]byte, 0, connBufSize),
		maxFrame: maxFrame, idle: idle, wtimeout: idle}
}

// NetConn is the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// SetIdle changes the read and write timeouts from the next read or write
// on. It must not race with a read.
func (c *Conn) SetIdle(d time.Duration) {
	c.idle, c.rdl = d, time.Time{}
	c.wmu.Lock()
	c.wtimeout, c.wdl = d, time.Time{}
	c.wmu.Unlock()
}

// Close closes the connection; a blocked read or write returns an error.
func (c *Conn) Close() error { return c.nc.Close() }

// Buffered is the number of received bytes not yet consumed: 0 means the
// next read would block, a good moment to send an acknowledgement.
func (c *Conn) Buffered() int { return c.r.Buffered() }

// rearm reports whether a deadline dl for timeout d, checked at now,
// should be pushed to now+d: when none is set, or an eighth of d passed.
func rearm(dl, now time.Time, d time.Duration) bool {
	return dl.IsZero() || dl.Sub(now) < d-d/8
}

// ReadFrame reads the next frame. The payload is valid until the next
// ReadFrame. Errors: io.EOF-like network errors, a deadline error after the
// idle timeout, ErrFrameTooLarge, ErrBadFrame.
func (c *Conn) ReadFrame() (Frame, error) {
	f, err := c.ReadFrameInto(c.buf)
	if cap(f.Payload) > cap(c.buf) {
		c.buf = f.Payload[:0]
	}
	return f, err
}

// ReadFrameInto is ReadFrame reading the payload into buf (grown when too
// small) instead of the Conn's own buffer: the payload stays valid until
// the caller reuses buf, so one goroutine can read the next frame while
// another applies this one. It must not be mixed with ReadFrame calls
// running at the same time.
func (c *Conn) ReadFrameInto(buf []byte) (Frame, error) {
	if c.idle > 0 {
		if now := time.Now(); rearm(c.rdl, now, c.idle) {
			c.rdl = now.Add(c.idle)
			_ = c.nc.SetReadDeadline(c.rdl)
		}
	}
	if _, err := io.ReadFull(c.r, c.hdr[:]); err != nil {
		return Frame{}, err
	}
	t := FrameType(c.hdr[0])
	n := binary.BigEndian.Uint32(c.hdr[1:])
	if t < FrameClientHello || t > FrameError {
		return Frame{}, fmt.Errorf("%w: unknown type %d", ErrBadFrame, c.hdr[0])
	}
	if uint64(n) > uint64(c.maxFrame) {
		return Frame{}, fmt.Errorf("%w: %s of %d bytes (max %d)", ErrFrameTooLarge, t, n, c.maxFrame)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return Frame{Payload: buf[:0]}, fmt.Errorf("read %s payload of %d bytes: %w", t, n, err)
	}
	return Frame{Type: t, Payload: buf}, nil
}

// WriteFrame writes one frame whose payload is the concatenation of parts
// and sends it (with every frame buffered before it) if flush is set;
// otherwise it may stay buffered until the next flushing write or Flush.
// A frame with a part of at least 64 KiB is sent at once, with what is
// buffered, by one gathering write that does not copy the part.
func (c *Conn) WriteFrame(flush bool, t FrameType, parts ...[]byte) error {
	n := 0
	large := false
	for _, p := range parts {
		n += len(p)
		large = large || len(p) >= largePart
	}
	if n > c.maxFrame {
		return fmt.Errorf("write %s: payload of %d bytes: %w (max %d)", t, n, ErrFrameTooLarge, c.maxFrame)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = append(c.wbuf, byte(t), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(c.wbuf[len(c.wbuf)-4:], uint32(n))
	if large {
		bufs := make(net.Buffers, 0, 1+len(parts))
		bufs = append(bufs, c.wbuf)
		bufs = append(bufs, parts...)
		c.armWriteLocked()
		_, err := bufs.WriteTo(c.nc)
		c.wbuf = c.wbuf[:0]
		if err != nil {
			return fmt.Errorf("write %s: %w", t, err)
		}
		return nil
	}
	for _, p := range parts {
		c.wbuf = append(c.wbuf, p...)
	}
	if flush || len(c.wbuf) >= connBufSize {
		if err := c.flushLocked(); err != nil {
			return fmt.Errorf("write %s: %w", t, err)
		}
	}
	return nil
}

func (c *Conn) armWriteLocked() {
	if c.wtimeout > 0 {
		if now := time.Now(); rearm(c.wdl, now, c.wtimeout) {
			c.wdl = now.Add(c.wtimeout)
			_ = c.nc.SetWriteDeadline(c.wdl)
		}
	}
}

// flushLocked sends the buffered frames; wmu held. After an error the
// connection is unusable (what part of the buffer was sent is unknown).
func (c *Conn) flushLocked() error {
	if len(c.wbuf) == 0 {
		return nil
	}
	c.armWriteLocked()
	_, err := c.nc.Write(c.wbuf)
	c.wbuf = c.wbuf[:0]
	return err
}

// Flush sends buffered frames.
func (c *Conn) Flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.flushLocked()
}

// SendError tells the peer why the connection is about to close (best
// effort, bounded by a short deadline).
func (c *Conn) SendError(code ErrorCode, reason string) {
	c.wmu.Lock()
	c.wtimeout, c.wdl = time.Second, time.Time{}
	c.wmu.Unlock()
	_ = c.WriteFrame(true, FrameError, ErrorMsg{Code: code, Reason: reason}.Marshal())
}

// ExpectFrame reads a frame and checks its type; an ERROR frame from the
// peer becomes a *PeerError.
func (c *Conn) ExpectFrame(want FrameType) (Frame, error) {
	f, err := c.ReadFrame()
	if err != nil {
		return f, err
	}
	if f.Type == FrameError {
		m, derr := DecodeErrorMsg(f.Payload)
		if derr != nil {
			return f, derr
		}
		return f, &PeerError{Code: m.Code, Reason: m.Reason}
	}
	if f.Type != want {
		return f, fmt.Errorf("%w: got %s, want %s", ErrBadFrame, f.Type, want)
	}
	return f, nil
}

// ErrorCode classifies an ERROR frame.
type ErrorCode uint8

// Error codes.
const (
	CodeProtocol ErrorCode = 1 // malformed or unexpected frame
	CodeAuth     ErrorCode = 2 // authentication failed
	CodeRefused  ErrorCode = 3 // the master will not serve this replica (reason says why; an operator must act)
	CodeFenced   ErrorCode = 4 // the master is fenced by this replica's data and cannot use it now
	CodeLying    ErrorCode = 5 // an acknowledgement beyond the master's log
	CodeShutdown ErrorCode = 6 // the peer is stopping or changing role
	CodeInternal ErrorCode = 7 // a local error (I/O) on the sender
)

// PeerError is an ERROR frame received from the peer.
type PeerError struct {
	Code   ErrorCode
	Reason string
}

func (e *PeerError) Error() string { return fmt.Sprintf("peer error %d: %s", e.Code, e.Reason) }

// Is makes a CodeAuth PeerError match ErrAuth and a CodeFenced or
// CodeRefused one match sdk.ErrUnavailable.
func (e *PeerError) Is(target error) bool {
	switch target {
	case ErrAuth:
		return e.Code == CodeAuth
	case sdk.ErrUnavailable:
		return e.Code == CodeFenced || e.Code == CodeRefused
	}
	return false
}
