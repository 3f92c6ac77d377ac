package remoting

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// FrameBuffered reports whether r's buffer already holds a whole frame, so
// that the next ReadCommand returns without reading from the connection.
// Both ends use it to coalesce writes: a batch of frames that arrived
// together is answered with one write.
func FrameBuffered(r *bufio.Reader) bool {
	n := r.Buffered()
	if n < 4 {
		return false
	}
	p, err := r.Peek(4)
	if err != nil {
		return false
	}
	total := frameLength(p)
	return total >= 0 && int64(n)-4 >= total
}

// ReadCommand reads one frame from r and decodes it.
//
// maxFrame bounds the frame's total length (the first int32, which counts
// everything after itself); maxFrame <= 0 means DefaultMaxFrame. A frame
// longer than that yields an error wrapping ErrFrameTooLarge before any of
// its content is read or allocated. A frame whose lengths are inconsistent or
// whose header does not decode yields an error wrapping ErrMalformed. A clean
// end of stream before the first byte of a frame yields io.EOF unwrapped; an
// end of stream inside a frame yields io.ErrUnexpectedEOF (wrapped). After
// any error the reader's position is unspecified and the stream must be
// abandoned.
//
// The returned Command owns its memory (nothing aliases r's buffer).
func ReadCommand(r *bufio.Reader, maxFrame int) (*Command, error) {
	return readCommand(r, maxFrame, nil)
}

// frameReserver is readCommand's hook into a request memory budget.
type frameReserver interface {
	// begin is called with the frame's length (the first int32) once it
	// has passed the maxFrame check, before anything more of the frame is
	// read; an error from it is returned as is.
	begin(total int64) error
	// reserve is called before the frame's buffer grows by n bytes. The
	// buffer grows only to hold bytes that have arrived (r holds them),
	// rounded up by at most a quarter of what the buffer already holds
	// so that a large frame is not copied too often, and never beyond the
	// frame's length. partial is false when the bytes already arrived
	// complete the frame, so that it is read to its end without waiting
	// for the peer; true when the peer still has to send more. An error
	// from it is returned as is, with the buffer not grown.
	reserve(n int64, partial bool) error
}

// readCommand is ReadCommand with a budget hook; with res nil it is
// ReadCommand. With res, the frame's buffer is allocated piece by piece as
// its bytes arrive, each piece reserved through res before it is
// allocated: what the frame holds follows what the peer has sent, not
// what it announced. The caller owns what res reserved, whatever
// readCommand returns.
func readCommand(r *bufio.Reader, maxFrame int, res frameReserver) (*Command, error) {
	var pre [8]byte // the length word and the header-info word
	total, err := readFrameLength(r, pre[:4], maxFrame)
	if err != nil {
		return nil, err
	}
	if res != nil {
		if err := res.begin(total); err != nil {
			return nil, err
		}
	}
	st, hlen, err := readHeaderInfo(r, pre[4:8], total)
	if err != nil {
		return nil, err
	}
	buf, err := readFrameBody(r, total-4, res)
	if err != nil {
		return nil, fmt.Errorf("reading %d-byte frame: %w", total, noEOF(err))
	}
	cmd, err := DecodeHeader(st, buf[:hlen])
	if err != nil {
		return nil, err
	}
	if int64(len(buf)) > hlen {
		cmd.Body = buf[hlen:]
	}
	return cmd, nil
}

// frameLength decodes a frame's length word (the first four bytes of p):
// the number of bytes after it, negative when the word's top bit is set.
func frameLength(p []byte) int64 {
	return int64(int32(binary.BigEndian.Uint32(p)))
}

// readFrameLength reads a frame's length word into pre (four bytes) and
// checks it against maxFrame (<= 0 means DefaultMaxFrame) and against the
// header-info word that must follow. A clean end of stream yields io.EOF
// unwrapped.
func readFrameLength(r *bufio.Reader, pre []byte, maxFrame int) (int64, error) {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	if _, err := io.ReadFull(r, pre); err != nil {
		if err == io.EOF {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("reading frame length: %w", err)
	}
	total := frameLength(pre)
	if total > int64(maxFrame) {
		return 0, fmt.Errorf("frame of %d bytes exceeds limit %d: %w", total, maxFrame, ErrFrameTooLarge)
	}
	if total < 4 {
		return 0, fmt.Errorf("frame length %d shorter than header-info word: %w", total, ErrMalformed)
	}
	return total, nil
}

// readHeaderInfo reads the header-info word into pre (four bytes) and
// splits it into the serialize type and the header length, which must fit
// in the frame of length total.
func readHeaderInfo(r *bufio.Reader, pre []byte, total int64) (st byte, hlen int64, err error) {
	if _, err := io.ReadFull(r, pre); err != nil {
		return 0, 0, fmt.Errorf("reading frame header info: %w", noEOF(err))
	}
	info := binary.BigEndian.Uint32(pre)
	st = byte(info >> 24)
	hlen = int64(info & 0xFFFFFF)
	if hlen > total-4 {
		return 0, 0, fmt.Errorf("header length %d exceeds frame length %d: %w", hlen, total, ErrMalformed)
	}
	return st, hlen, nil
}

// readFrameBody reads the n bytes of a frame after its header-info word:
// at once without res, growing as they arrive with it (see readGrowing).
func readFrameBody(r *bufio.Reader, n int64, res frameReserver) ([]byte, error) {
	if res != nil {
		return readGrowing(r, int(n), res)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// readGrowing reads need bytes from r into a buffer that grows only when
// it is full and more bytes have arrived, each growth reserved through
// res first (see frameReserver.reserve).
func readGrowing(r *bufio.Reader, need int, res frameReserver) ([]byte, error) {
	var buf []byte
	for len(buf) < need {
		if len(buf) == cap(buf) {
			if r.Buffered() == 0 {
				// Wait for the peer holding nothing more.
				if _, err := r.Peek(1); err != nil {
					return nil, err
				}
			}
			have := len(buf) + r.Buffered()
			size := min(need, max(have, cap(buf)+cap(buf)/4))
			if err := res.reserve(int64(size-cap(buf)), have < need); err != nil {
				return nil, err
			}
			nb := make([]byte, len(buf), size)
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil && len(buf) < need {
			return nil, err
		}
	}
	return buf, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
