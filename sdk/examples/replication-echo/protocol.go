package echo

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// The echo wire protocol, version 2, over one TCP connection per slave.
// All integers are big-endian.
//
//	slave → master   hello:  "ECHO" | version u8 (2) | secret length u16 | secret | id length u8 | id | from i64
//	master → slave   reply:  status u8 | start i64
//	master → slave   frames: 'D' | offset i64 | length u32 | log bytes   (whole records, as Host.ReadLog returned them)
//	                         'H' | master committed i64                   (heartbeat while idle)
//	slave → master   acks:   offset i64                                    (the slave's committed offset after appending)
//
// id is the slave's identity, stable across its restarts and reconnects
// (see loadOrCreateID): the master keeps one replica per id, so a slave
// that reconnects before its old connection has closed replaces that
// connection instead of counting twice. from is the slave's committed
// offset, or -1 when its log is empty (the master then starts at its own
// minimum offset). start is where the master's frames begin; with
// statusBadVersion it is the protocol version the master speaks.
//
// Version 1's hello had no id; a version 1 slave is refused with
// statusBadVersion (its layout is not read past the version byte).
const (
	helloMagic   = "ECHO"
	protoVersion = 2
	maxSecret    = 4096
	maxID        = 64

	statusOK          = 0
	statusBadSecret   = 1
	statusSlaveAhead  = 2 // the slave holds bytes the master does not
	statusSlaveBehind = 3 // the slave's log ends below the master's minimum
	statusBadVersion  = 4 // the slave speaks another protocol version

	frameData      = 'D'
	frameHeartbeat = 'H'
)

// errProtocol marks malformed input from the peer.
var errProtocol = errors.New("echo protocol error")

// versionError is a hello of a protocol version other than protoVersion.
// It wraps errProtocol.
type versionError struct{ got byte }

func (e *versionError) Error() string {
	return fmt.Sprintf("the slave speaks echo protocol version %d; this master speaks version %d only (upgrade the slave's plugin)", e.got, protoVersion)
}

func (e *versionError) Unwrap() error { return errProtocol }

type hello struct {
	secret string
	id     string // the slave's identity (validID)
	from   int64
}

// validID reports whether id can name a slave: 1 to maxID bytes of ASCII
// letters, digits and ". _ : -" (so that it logs and prints as it is).
func validID(id string) error {
	if id == "" || len(id) > maxID {
		return fmt.Errorf("slave id of %d bytes (want 1 to %d)", len(id), maxID)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("slave id %q: byte %#x at %d is not a letter, digit or one of . _ : -", id, c, i)
		}
	}
	return nil
}

func writeHello(w io.Writer, h hello) error {
	if len(h.secret) > maxSecret {
		return fmt.Errorf("write hello: secret longer than %d bytes", maxSecret)
	}
	if err := validID(h.id); err != nil {
		return fmt.Errorf("write hello: %w", err)
	}
	b := make([]byte, 0, 4+1+2+len(h.secret)+1+len(h.id)+8)
	b = append(b, helloMagic...)
	b = append(b, protoVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.secret)))
	b = append(b, h.secret...)
	b = append(b, byte(len(h.id)))
	b = append(b, h.id...)
	b = binary.BigEndian.AppendUint64(b, uint64(h.from))
	_, err := w.Write(b)
	return err
}

// readHello decodes a slave's hello. Malformed input returns an error
// wrapping errProtocol; a hello of another version, a *versionError
// (nothing after its version byte is read).
func readHello(r io.Reader) (hello, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return hello{}, fmt.Errorf("read hello: %w", err)
	}
	if string(head[:4]) != helloMagic {
		return hello{}, fmt.Errorf("read hello: bad magic %q: %w", head[:4], errProtocol)
	}
	if head[4] != protoVersion {
		return hello{}, fmt.Errorf("read hello: %w", &versionError{got: head[4]})
	}
	var lb [2]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return hello{}, fmt.Errorf("read hello: %w", err)
	}
	n := int(binary.BigEndian.Uint16(lb[:]))
	if n > maxSecret {
		return hello{}, fmt.Errorf("read hello: secret of %d bytes (max %d): %w", n, maxSecret, errProtocol)
	}
	secret := make([]byte, n+1) // the secret and the id's length
	if _, err := io.ReadFull(r, secret); err != nil {
		return hello{}, fmt.Errorf("read hello: %w", err)
	}
	idLen := int(secret[n])
	if idLen == 0 || idLen > maxID {
		return hello{}, fmt.Errorf("read hello: slave id of %d bytes (want 1 to %d): %w", idLen, maxID, errProtocol)
	}
	rest := make([]byte, idLen+8)
	if _, err := io.ReadFull(r, rest); err != nil {
		return hello{}, fmt.Errorf("read hello: %w", err)
	}
	h := hello{secret: string(secret[:n]), id: string(rest[:idLen]), from: int64(binary.BigEndian.Uint64(rest[idLen:]))}
	if err := validID(h.id); err != nil {
		return hello{}, fmt.Errorf("read hello: %w: %w", err, errProtocol)
	}
	if h.from < -1 {
		return hello{}, fmt.Errorf("read hello: from %d: %w", h.from, errProtocol)
	}
	return h, nil
}

func writeReply(w io.Writer, status byte, start int64) error {
	b := binary.BigEndian.AppendUint64([]byte{status}, uint64(start))
	_, err := w.Write(b)
	return err
}

func readReply(r io.Reader) (status byte, start int64, err error) {
	var b [9]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, 0, fmt.Errorf("read reply: %w", err)
	}
	return b[0], int64(binary.BigEndian.Uint64(b[1:])), nil
}

// frame is a master → slave message.
type frame struct {
	kind   byte
	offset int64 // data: where data goes; heartbeat: the master's committed offset
	data   []byte
}

// writeFrame writes f; a data frame's bytes go out as they are, after
// its header (one writev on a connection), not copied.
func writeFrame(w io.Writer, f frame) error {
	head := make([]byte, 0, 13)
	head = append(head, f.kind)
	head = binary.BigEndian.AppendUint64(head, uint64(f.offset))
	if f.kind != frameData {
		_, err := w.Write(head)
		return err
	}
	head = binary.BigEndian.AppendUint32(head, uint32(len(f.data)))
	bufs := net.Buffers{head, f.data}
	_, err := bufs.WriteTo(w)
	return err
}

// readFrame decodes one frame; data frames carry at most maxLen bytes.
func readFrame(r io.Reader, maxLen int) (frame, error) {
	var head [9]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return frame{}, fmt.Errorf("read frame: %w", err)
	}
	f := frame{kind: head[0], offset: int64(binary.BigEndian.Uint64(head[1:]))}
	if f.offset < 0 {
		return frame{}, fmt.Errorf("read frame: offset %d: %w", f.offset, errProtocol)
	}
	switch f.kind {
	case frameHeartbeat:
		return f, nil
	case frameData:
	default:
		return frame{}, fmt.Errorf("read frame: kind %#x: %w", f.kind, errProtocol)
	}
	var lb [4]byte
	if _, err := io.ReadFull(r, lb[:]); err != nil {
		return frame{}, fmt.Errorf("read frame: %w", err)
	}
	n := binary.BigEndian.Uint32(lb[:])
	if n == 0 || int64(n) > int64(maxLen) {
		return frame{}, fmt.Errorf("read frame: %d data bytes (max %d): %w", n, maxLen, errProtocol)
	}
	f.data = make([]byte, n)
	if _, err := io.ReadFull(r, f.data); err != nil {
		return frame{}, fmt.Errorf("read frame: %w", err)
	}
	return f, nil
}

// bufferedData reports the length of the data bytes of the next frame in
// br, if that frame is a data frame at offset at that has arrived in full
// (nothing is consumed and nothing is waited for): the slave merges such
// frames into one append.
func bufferedData(br *bufio.Reader, at int64) (int, bool) {
	if br.Buffered() < 13 {
		return 0, false
	}
	head, err := br.Peek(13)
	if err != nil || head[0] != frameData || int64(binary.BigEndian.Uint64(head[1:])) != at {
		return 0, false
	}
	n := int(binary.BigEndian.Uint32(head[9:]))
	return n, br.Buffered() >= 13+n
}

func writeAck(w io.Writer, off int64) error {
	_, err := w.Write(binary.BigEndian.AppendUint64(nil, uint64(off)))
	return err
}

func readAck(r io.Reader) (int64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, fmt.Errorf("read ack: %w", err)
	}
	off := int64(binary.BigEndian.Uint64(b[:]))
	if off < 0 {
		return 0, fmt.Errorf("read ack: offset %d: %w", off, errProtocol)
	}
	return off, nil
}
