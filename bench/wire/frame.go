package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"

	"github.com/keelmq/keel/host/remoting"
)

// The generator keeps its own CPU cost per message small, so that what a
// run measures is the broker (bench/peers' NATS client is cheap the same
// way): each producer encodes its request frame once, with fixed-width
// placeholders, and per message only patches the opaque, the born
// timestamp and the message id in place; responses are scanned for their
// code and opaque in a reused buffer, and decoded in full only when they
// are not a success.

const (
	opaqueDigits = 10 // opaques stay in [opaqueBase, MaxInt32]: 10 digits
	bornDigits   = 13 // Unix ms until the year 2286
	idDigits     = 16 // appendHex of a uint64
)

// Sentinels written into the template where the per-message values go;
// each must occur nowhere else in the frame.
const (
	sentinelOpaque = 1999999999
	sentinelBorn   = 9999999999999
	sentinelID     = 0xFEDCBA9876543210
)

// frameTemplate is one producer's request frame with the offsets of the
// bytes patched per message.
type frameTemplate struct {
	buf      []byte
	opaqueAt int
	bornAt   int
	idAt     [2]int // KEYS, and the second half of UNIQ_KEY
}

// newTemplate encodes cmd (a message() template) with sentinels and finds
// them. runID fills the first half of UNIQ_KEY, fixed for the run.
func newTemplate(cmd *remoting.Command, code int16, runID uint64) (*frameTemplate, error) {
	if sentinelOpaque < opaqueBase {
		panic("wire: opaque sentinel below opaqueBase")
	}
	bornKey, propKey := fieldNames(code)
	c := *cmd
	c.ExtFields = append(make(remoting.Fields, 0, len(cmd.ExtFields)+2), cmd.ExtFields...)
	c.Opaque = sentinelOpaque
	c.SetExt(bornKey, strconv.FormatInt(sentinelBorn, 10))
	c.SetExt(propKey, string(properties(nil, runID, sentinelID)))
	t := &frameTemplate{buf: c.AppendFrame(nil)}
	hdr := t.buf[8 : 8+int(binary.BigEndian.Uint32(t.buf[4:8])&0xFFFFFF)]
	find := func(what string, from int) (int, error) {
		i := bytes.Index(hdr[from:], []byte(what))
		if i < 0 {
			return 0, fmt.Errorf("wire: request template: %q not found in the header", what)
		}
		return 8 + from + i, nil
	}
	var err error
	if t.opaqueAt, err = find(`"opaque":`+strconv.Itoa(sentinelOpaque), 0); err != nil {
		return nil, err
	}
	t.opaqueAt += len(`"opaque":`)
	if t.bornAt, err = find(strconv.FormatInt(sentinelBorn, 10), 0); err != nil {
		return nil, err
	}
	id := string(appendHex(nil, sentinelID))
	if t.idAt[0], err = find(id, 0); err != nil {
		return nil, err
	}
	if t.idAt[1], err = find(id, t.idAt[0]-8+idDigits); err != nil {
		return nil, err
	}
	if bytes.Count(hdr, []byte(id)) != 2 || bytes.Count(hdr, []byte(strconv.FormatInt(sentinelBorn, 10))) != 1 {
		return nil, fmt.Errorf("wire: request template: a sentinel occurs more than expected")
	}
	return t, nil
}

// patch writes the per-message values into the template.
func (t *frameTemplate) patch(opaque int32, bornMs int64, id uint64) {
	putDigits(t.buf[t.opaqueAt:t.opaqueAt+opaqueDigits], uint64(opaque))
	putDigits(t.buf[t.bornAt:t.bornAt+bornDigits], uint64(bornMs))
	for _, at := range t.idAt {
		putHex(t.buf[at:at+idDigits], id)
	}
}

// putDigits writes v in decimal, zero-padded to len(dst).
func putDigits(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
}

func putHex(dst []byte, v uint64) {
	const digits = "0123456789ABCDEF"
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = digits[v&0xF]
		v >>= 4
	}
}

// response is what the generator needs of one response frame.
type response struct {
	code   int16
	opaque int32
	isResp bool
	remark string // set only for codes other than success
}

// frameReader reads response frames into a reused buffer.
type frameReader struct {
	br  *bufio.Reader
	buf []byte
}

// next reads one frame and extracts its code, opaque and response flag:
// from a JSON header by scanning for the top-level "code", "opaque" and
// "flag" members when the header is the plain shape brokers send, and by
// a full decode otherwise (a binary ROCKETMQ header, an unexpected shape,
// or a non-success code, whose remark is wanted).
func (r *frameReader) next() (response, error) {
	var pre [4]byte
	if _, err := io.ReadFull(r.br, pre[:]); err != nil {
		return response{}, err
	}
	total := int(int32(binary.BigEndian.Uint32(pre[:])))
	if total < 4 || total > remoting.DefaultMaxFrame {
		return response{}, fmt.Errorf("response frame length %d: %w", total, remoting.ErrMalformed)
	}
	if cap(r.buf) < 4+total {
		r.buf = make([]byte, 4+total)
	}
	b := r.buf[:4+total]
	copy(b, pre[:])
	if _, err := io.ReadFull(r.br, b[4:]); err != nil {
		return response{}, fmt.Errorf("reading %d-byte response frame: %w", total, err)
	}
	info := binary.BigEndian.Uint32(b[4:8])
	hlen := int(info & 0xFFFFFF)
	if byte(info>>24) == remoting.SerializeJSON && 8+hlen <= len(b) {
		if rs, ok := scanJSONResponse(b[8 : 8+hlen]); ok && rs.code == remoting.Success {
			return rs, nil
		}
	}
	cmd, err := remoting.ReadCommand(bufio.NewReader(bytes.NewReader(b)), len(b))
	if err != nil {
		return response{}, fmt.Errorf("decoding response frame: %w", err)
	}
	return response{code: cmd.Code, opaque: cmd.Opaque, isResp: cmd.IsResponse(), remark: cmd.Remark}, nil
}

// scanJSONResponse finds the top-level members "code", "opaque" and "flag"
// of a JSON header: it walks the object tracking strings and nesting, and
// reads each of the three when it starts a member name at depth 1. It
// gives up (ok false) unless each occurs exactly once there, written as
// a plain integer; the caller then decodes the header in full.
func scanJSONResponse(h []byte) (response, bool) {
	names := [3]string{`"code":`, `"opaque":`, `"flag":`}
	var vals [3]int64
	seen := 0
	depth := 0
	for i := 0; i < len(h); i++ {
		switch h[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			if depth == 1 {
				matched := false
				for k, name := range names {
					if !bytes.HasPrefix(h[i:], []byte(name)) {
						continue
					}
					if seen&(1<<k) != 0 {
						return response{}, false
					}
					v, end, ok := scanInt(h, i+len(name))
					if !ok {
						return response{}, false
					}
					vals[k], seen, i, matched = v, seen|1<<k, end-1, true
					break
				}
				if matched {
					continue
				}
			}
			j := i + 1
			for j < len(h) && h[j] != '"' {
				if h[j] == '\\' {
					j++
				}
				j++
			}
			i = j
		}
	}
	if seen != 7 || depth != 0 {
		return response{}, false
	}
	return response{code: int16(vals[0]), opaque: int32(vals[1]), isResp: int32(vals[2])&remoting.FlagResponse != 0}, true
}

// scanInt reads a JSON integer at h[j:] that must be followed by ',' or
// '}' and fit 11 digits; it returns the value and the index after it.
func scanInt(h []byte, j int) (int64, int, bool) {
	neg := j < len(h) && h[j] == '-'
	if neg {
		j++
	}
	start := j
	var v int64
	for j < len(h) && h[j] >= '0' && h[j] <= '9' && j-start < 11 {
		v = v*10 + int64(h[j]-'0')
		j++
	}
	if j == start || j >= len(h) || (h[j] != ',' && h[j] != '}') {
		return 0, j, false
	}
	if neg {
		v = -v
	}
	return v, j, true
}
