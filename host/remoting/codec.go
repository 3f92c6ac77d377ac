// Package remoting speaks the Apache RocketMQ 4.x remoting protocol, so that
// unmodified RocketMQ clients (the Java client and
// github.com/apache/rocketmq-client-go/v2) can produce to and consume from a
// keel store. It contains the frame codec, a TCP server, the name server role
// (topic routes) and the broker role (send, pull, offsets, consumer groups),
// the latter written against the small Backend interface the host implements
// on top of the core store.
package remoting

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Serialize types carried in the top byte of a frame's header-info word.
const (
	// SerializeJSON marks a JSON header. It is what every Go client sends and
	// what Java sends by default.
	SerializeJSON byte = 0
	// SerializeRocketMQ marks RocketMQ's compact binary header, used by Java
	// peers started with rocketmq.serialize.type=ROCKETMQ.
	SerializeRocketMQ byte = 1
)

// Flag bits of Command.Flag.
const (
	// FlagResponse (bit 0) marks a response; it is clear on requests.
	FlagResponse int32 = 1
	// FlagOneway (bit 1) marks a request that expects no response.
	FlagOneway int32 = 2
)

// DefaultMaxFrame is the default limit on a frame's total length (16 MiB).
const DefaultMaxFrame = 16 << 20

// ServerVersion is the protocol version keel puts in the commands it creates.
// 317 is the value rocketmq-client-go sends; clients only record it.
const ServerVersion int32 = 317

// ServerLanguage is the language keel reports in the commands it creates.
// "JAVA" is accepted by every client, including old Java ones that reject
// unknown language names.
const ServerLanguage = "JAVA"

// Errors returned by ReadCommand and DecodeHeader. They are always wrapped
// with context; test with errors.Is.
var (
	// ErrFrameTooLarge means a frame's declared length exceeds the
	// configured maximum. The stream cannot be resynchronised: the
	// connection must be closed.
	ErrFrameTooLarge = errors.New("remoting: frame too large")
	// ErrMalformed means a frame or header is not valid RocketMQ remoting
	// data. The stream cannot be trusted any more: the connection must be
	// closed.
	ErrMalformed = errors.New("remoting: malformed frame")
)

// Command is one remoting command: a request, a response, or a oneway
// request. The zero value is a request with code 0 and no header fields.
type Command struct {
	// Code is the request code on requests and the response code on
	// responses.
	Code int16
	// Language names the sender's client language ("GO", "JAVA", ...).
	// Decoding accepts any JSON value and never fails on it.
	Language string
	// Version is the sender's protocol version.
	Version int32
	// Opaque is the request id; a response carries its request's opaque.
	Opaque int32
	// Flag holds FlagResponse and FlagOneway.
	Flag int32
	// Remark is free text, usually the error message of a failed response.
	Remark string
	// ExtFields holds the custom header fields. On output they are written
	// sorted by key, each key once (its last value), the values always as
	// JSON strings, which is what rocketmq-client-go requires.
	ExtFields Fields
	// Body is the payload after the header; nil and empty are equivalent.
	Body []byte
	// SerializeType is the header encoding: SerializeJSON or
	// SerializeRocketMQ. It is set by ReadCommand and honoured on output.
	SerializeType byte
}

// IsResponse reports whether the response bit is set.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the oneway bit is set.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Ext returns the extension field k, or "" if absent.
func (c *Command) Ext(k string) string {
	v, _ := c.ExtFields.Get(k)
	return v
}

// SetExt sets extension field k to v.
func (c *Command) SetExt(k, v string) { c.ExtFields.Set(k, v) }

// NewResponse returns a response to req with the given code and remark,
// carrying req's opaque and serialize type.
func NewResponse(req *Command, code int16, remark string) *Command {
	return &Command{
		Code:          code,
		Language:      ServerLanguage,
		Version:       ServerVersion,
		Opaque:        req.Opaque,
		Flag:          FlagResponse,
		Remark:        remark,
		SerializeType: req.SerializeType,
	}
}

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
	total := int64(int32(binary.BigEndian.Uint32(p)))
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
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:4]); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("reading frame length: %w", err)
	}
	total := int64(int32(binary.BigEndian.Uint32(pre[:4])))
	if total > int64(maxFrame) {
		return nil, fmt.Errorf("frame of %d bytes exceeds limit %d: %w", total, maxFrame, ErrFrameTooLarge)
	}
	if total < 4 {
		return nil, fmt.Errorf("frame length %d shorter than header-info word: %w", total, ErrMalformed)
	}
	if res != nil {
		if err := res.begin(total); err != nil {
			return nil, err
		}
	}
	if _, err := io.ReadFull(r, pre[4:8]); err != nil {
		return nil, fmt.Errorf("reading frame header info: %w", noEOF(err))
	}
	info := binary.BigEndian.Uint32(pre[4:8])
	st := byte(info >> 24)
	hlen := int64(info & 0xFFFFFF)
	if hlen > total-4 {
		return nil, fmt.Errorf("header length %d exceeds frame length %d: %w", hlen, total, ErrMalformed)
	}
	var buf []byte
	var err error
	if res == nil {
		buf = make([]byte, total-4)
		_, err = io.ReadFull(r, buf)
	} else {
		buf, err = readGrowing(r, int(total-4), res)
	}
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

// DecodeHeader decodes a command header of serialize type st (SerializeJSON
// or SerializeRocketMQ). The result has no Body. Any other type, or a header
// that does not parse, yields an error wrapping ErrMalformed. It never
// panics, whatever the input.
func DecodeHeader(st byte, h []byte) (*Command, error) {
	switch st {
	case SerializeJSON:
		return decodeJSONHeader(h)
	case SerializeRocketMQ:
		return decodeBinaryHeader(h)
	default:
		return nil, fmt.Errorf("unknown serialize type %d: %w", st, ErrMalformed)
	}
}

type jsonHeader struct {
	Code      int16                      `json:"code"`
	Language  json.RawMessage            `json:"language"`
	Version   int32                      `json:"version"`
	Opaque    int32                      `json:"opaque"`
	Flag      int32                      `json:"flag"`
	Remark    *string                    `json:"remark"`
	ExtFields map[string]json.RawMessage `json:"extFields"`
}

// decodeJSONHeader decodes a JSON header, with the hand-written fast path
// when it applies (see jsonfast.go) and encoding/json otherwise. Both give
// the same result on every input the fast path accepts.
func decodeJSONHeader(h []byte) (*Command, error) {
	if c, ok := fastDecodeJSONHeader(h); ok {
		return c, nil
	}
	return decodeJSONHeaderStd(h)
}

// decodeJSONHeaderStd is the reference decoder, built on encoding/json. It
// defines the accepted language and the leniency rules.
func decodeJSONHeaderStd(h []byte) (*Command, error) {
	var jh jsonHeader
	if err := json.Unmarshal(h, &jh); err != nil {
		return nil, fmt.Errorf("decoding JSON header: %v: %w", err, ErrMalformed)
	}
	c := &Command{
		Code:          jh.Code,
		Language:      jsonLenientString(jh.Language),
		Version:       jh.Version,
		Opaque:        jh.Opaque,
		Flag:          jh.Flag,
		SerializeType: SerializeJSON,
	}
	if jh.Remark != nil {
		c.Remark = *jh.Remark
	}
	if len(jh.ExtFields) > 0 {
		c.ExtFields = make(Fields, 0, len(jh.ExtFields))
		for k, v := range jh.ExtFields {
			if isJSONNull(v) {
				continue
			}
			c.ExtFields = append(c.ExtFields, Field{k, jsonLenientString(v)})
		}
		slices.SortFunc(c.ExtFields, byKey) // map keys: already unique
	}
	return c, nil
}

// jsonLenientString turns a JSON value into a string: a JSON string is
// unquoted, anything else (a number, a bool, an object) is kept as its raw
// text, null becomes "".
func jsonLenientString(raw json.RawMessage) string {
	if len(raw) == 0 || isJSONNull(raw) {
		return ""
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			return s
		}
	}
	return string(raw)
}

func isJSONNull(raw json.RawMessage) bool {
	return len(raw) == 4 && string(raw) == "null"
}

// languageCodes are Java's LanguageCode ordinals, used by the binary header.
var languageCodes = []string{"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS", "RUST", "NODE_JS"}

func languageName(b byte) string {
	if int(b) < len(languageCodes) {
		return languageCodes[b]
	}
	return "OTHER"
}

func languageCode(s string) byte {
	for i, n := range languageCodes {
		if n == s {
			return byte(i)
		}
	}
	return 7 // OTHER
}

func decodeBinaryHeader(h []byte) (*Command, error) {
	d := binReader{b: h}
	c := &Command{SerializeType: SerializeRocketMQ}
	c.Code = int16(d.u16())
	c.Language = languageName(d.u8())
	c.Version = int32(int16(d.u16()))
	c.Opaque = int32(d.u32())
	c.Flag = int32(d.u32())
	c.Remark = string(d.bytes(int(int32(d.u32()))))
	extLen := int(int32(d.u32()))
	if d.err == nil && extLen > 0 {
		if extLen > len(d.b) {
			return nil, fmt.Errorf("binary header: extFields length %d exceeds remaining %d: %w", extLen, len(d.b), ErrMalformed)
		}
		e := binReader{b: d.bytes(extLen)}
		c.ExtFields = Fields{}
		for len(e.b) > 0 && e.err == nil {
			k := string(e.bytes(int(e.u16())))
			v := string(e.bytes(int(int32(e.u32()))))
			if e.err == nil {
				c.ExtFields = append(c.ExtFields, Field{k, v})
			}
		}
		if e.err != nil {
			return nil, fmt.Errorf("binary header extFields: %w", e.err)
		}
	}
	if d.err != nil {
		return nil, fmt.Errorf("binary header: %w", d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("binary header: %d trailing bytes: %w", len(d.b), ErrMalformed)
	}
	return c, nil
}

// binReader reads big-endian fields, remembering the first error.
type binReader struct {
	b   []byte
	err error
}

func (d *binReader) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("field of %d bytes, %d left: %w", n, len(d.b), ErrMalformed)
		d.b = nil
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *binReader) u8() byte {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *binReader) u16() uint16 {
	if p := d.take(2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (d *binReader) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *binReader) bytes(n int) []byte {
	if n == 0 {
		return nil
	}
	return d.take(n)
}

// AppendFrame appends c's complete wire frame to dst and returns the
// extended slice. Extension fields are written in sorted key order, so the
// output is deterministic. A JSON header is compact and every extension
// value is a JSON string. An empty Language is written as ServerLanguage.
func (c *Command) AppendFrame(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	hstart := len(dst)
	st := c.SerializeType
	if st == SerializeRocketMQ {
		dst = c.appendBinaryHeader(dst)
	} else {
		st = SerializeJSON
		dst = c.appendJSONHeader(dst)
	}
	hlen := len(dst) - hstart
	dst = append(dst, c.Body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(st)<<24|uint32(hlen)&0xFFFFFF)
	return dst
}

// WriteTo writes c's frame to w. It implements io.WriterTo.
func (c *Command) WriteTo(w io.Writer) (int64, error) {
	buf := c.AppendFrame(make([]byte, 0, 256+len(c.Body)))
	n, err := w.Write(buf)
	if err != nil {
		return int64(n), fmt.Errorf("writing command frame: %w", err)
	}
	return int64(n), nil
}

func (c *Command) language() string {
	if c.Language == "" {
		return ServerLanguage
	}
	return c.Language
}

func (c *Command) appendJSONHeader(dst []byte) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":`...)
	dst = appendJSONString(dst, c.language())
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	dst = append(dst, `,"remark":`...)
	dst = appendJSONString(dst, c.Remark)
	dst = append(dst, `,"extFields":{`...)
	var small [16]Field
	for i, f := range c.ExtFields.unique(small[:0]) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, f.Key)
		dst = append(dst, ':')
		dst = appendJSONString(dst, f.Value)
	}
	dst = append(dst, `},"serializeTypeCurrentRPC":"JSON"}`...)
	return dst
}

func (c *Command) appendBinaryHeader(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Code))
	dst = append(dst, languageCode(c.language()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Opaque))
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Flag))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark)))
	dst = append(dst, c.Remark...)
	lenAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var small [16]Field
	for _, f := range c.ExtFields.unique(small[:0]) {
		k, v := f.Key, f.Value
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k)))
		dst = append(dst, k...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
		dst = append(dst, v...)
	}
	binary.BigEndian.PutUint32(dst[lenAt:], uint32(len(dst)-lenAt-4))
	return dst
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Control characters
// (including the \x01 and \x02 property separators) are escaped as \u00XX;
// invalid UTF-8 is replaced by U+FFFD, as encoding/json does.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		// Copy the longest run of bytes that need no escaping at once.
		j := i
		for j < len(s) && strPlain[s[j]] {
			j++
		}
		if j > i {
			dst = append(dst, s[i:j]...)
			if i = j; i == len(s) {
				break
			}
		}
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\':
				dst = append(dst, '\\', b)
			case b >= 0x20:
				dst = append(dst, b)
			case b == '\n':
				dst = append(dst, '\\', 'n')
			case b == '\r':
				dst = append(dst, '\\', 'r')
			case b == '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}
