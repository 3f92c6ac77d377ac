package replication

import (
	"encoding/binary"
	"fmt"

	"github.com/keelmq/keel/sdk"
)

// Payload layouts (all integers big-endian). Lists are a u32 count then the
// items; strings a u16 length then UTF-8 bytes. Decoders check every
// length against the bytes actually present, so a hostile count cannot make
// them allocate more than the payload's size.
//
//	Hello      version u16, nonce [32], proof [32] (zero in CLIENT_HELLO), id string
//	Auth       proof [32]
//	State      min i64, end i64, maxEpoch i32, epochs [(epoch i32, start i64)], takeovers [i32]
//	Plan       from i64, flags u8, maxEpoch i32, epochs [(epoch i32, start i64)], takeovers [i32]
//	Pull       from i64, to i64
//	Data       offset i64, epoch i32, epochStart i64, committed i64, then the log bytes
//	Heartbeat  committed i64
//	Ack        received i64, flushed i64
//	Error      code u8, reason string

// NonceSize is the size of an authentication nonce and of a proof.
const NonceSize = 32

// MaxIDLen bounds a peer id.
const MaxIDLen = 256

// Hello opens a connection (CLIENT_HELLO from the slave, SERVER_HELLO from
// the master, which also carries the master's proof).
type Hello struct {
	Version uint16
	Nonce   [NonceSize]byte
	Proof   [NonceSize]byte
	ID      string
}

// Marshal encodes h.
func (h Hello) Marshal() []byte {
	b := make([]byte, 0, 2+2*NonceSize+2+len(h.ID))
	b = binary.BigEndian.AppendUint16(b, h.Version)
	b = append(b, h.Nonce[:]...)
	b = append(b, h.Proof[:]...)
	return appendString(b, h.ID)
}

// DecodeHello decodes a Hello payload; errors wrap ErrBadFrame.
func DecodeHello(p []byte) (Hello, error) {
	d := decoder{b: p, what: "hello"}
	var h Hello
	h.Version = d.u16()
	copy(h.Nonce[:], d.bytes(NonceSize))
	copy(h.Proof[:], d.bytes(NonceSize))
	h.ID = d.str(MaxIDLen)
	return h, d.done()
}

// Auth carries the slave's proof.
type Auth struct{ Proof [NonceSize]byte }

// Marshal encodes a.
func (a Auth) Marshal() []byte { return append([]byte(nil), a.Proof[:]...) }

// DecodeAuth decodes an Auth payload; errors wrap ErrBadFrame.
func DecodeAuth(p []byte) (Auth, error) {
	d := decoder{b: p, what: "auth"}
	var a Auth
	copy(a.Proof[:], d.bytes(NonceSize))
	return a, d.done()
}

// State is the slave's view of its log, sent once after authentication.
type State struct {
	Min, End  int64
	MaxEpoch  int32 // the highest epoch this node has ever seen
	Epochs    []sdk.Epoch
	Takeovers []int32 // epochs known to have been started by a takeover
}

// Marshal encodes s.
func (s State) Marshal() []byte {
	b := make([]byte, 0, 24+12*len(s.Epochs)+4*len(s.Takeovers)+8)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Min))
	b = binary.BigEndian.AppendUint64(b, uint64(s.End))
	b = binary.BigEndian.AppendUint32(b, uint32(s.MaxEpoch))
	b = appendEpochs(b, s.Epochs)
	return appendInt32s(b, s.Takeovers)
}

// DecodeState decodes a State payload; errors wrap ErrBadFrame. Offsets
// must be non-negative with Min <= End.
func DecodeState(p []byte) (State, error) {
	d := decoder{b: p, what: "state"}
	var s State
	s.Min, s.End = d.i64(), d.i64()
	s.MaxEpoch = d.i32()
	s.Epochs = d.epochs()
	s.Takeovers = d.int32s()
	if err := d.done(); err != nil {
		return s, err
	}
	if s.Min < 0 || s.End < s.Min {
		return s, fmt.Errorf("%w: state: log [%d,%d)", ErrBadFrame, s.Min, s.End)
	}
	return s, nil
}

// Plan is the master's answer to a State: the slave truncates its log to
// From (a no-op if it ends there), adopts Epochs as its history, then
// acknowledges and receives the log from From on.
type Plan struct {
	From       int64
	AckFlushed bool // acknowledge flushed offsets (ack_on = "flushed")
	MaxEpoch   int32
	Epochs     []sdk.Epoch
	Takeovers  []int32
}

// Marshal encodes p.
func (p Plan) Marshal() []byte {
	b := make([]byte, 0, 24+12*len(p.Epochs)+4*len(p.Takeovers))
	b = binary.BigEndian.AppendUint64(b, uint64(p.From))
	var flags byte
	if p.AckFlushed {
		flags |= 1
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint32(b, uint32(p.MaxEpoch))
	b = appendEpochs(b, p.Epochs)
	return appendInt32s(b, p.Takeovers)
}

// DecodePlan decodes a Plan payload; errors wrap ErrBadFrame.
func DecodePlan(b []byte) (Plan, error) {
	d := decoder{b: b, what: "plan"}
	var p Plan
	p.From = d.i64()
	flags := d.u8()
	p.AckFlushed = flags&1 != 0
	p.MaxEpoch = d.i32()
	p.Epochs = d.epochs()
	p.Takeovers = d.int32s()
	if err := d.done(); err != nil {
		return p, err
	}
	if p.From < 0 || flags&^1 != 0 {
		return p, fmt.Errorf("%w: plan: from %d flags %#x", ErrBadFrame, p.From, flags)
	}
	return p, nil
}

// Pull asks the slave for its log bytes [From, To) (the master catching up
// from a replica that holds more than it).
type Pull struct{ From, To int64 }

// Marshal encodes p.
func (p Pull) Marshal() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(p.From))
	return binary.BigEndian.AppendUint64(b, uint64(p.To))
}

// DecodePull decodes a Pull payload; errors wrap ErrBadFrame.
func DecodePull(b []byte) (Pull, error) {
	d := decoder{b: b, what: "pull"}
	p := Pull{From: d.i64(), To: d.i64()}
	if err := d.done(); err != nil {
		return p, err
	}
	if p.From < 0 || p.To < p.From {
		return p, fmt.Errorf("%w: pull [%d,%d)", ErrBadFrame, p.From, p.To)
	}
	return p, nil
}

// DataHeaderSize is the size of a DATA payload's header.
const DataHeaderSize = 28

// DataHeader precedes the log bytes of a DATA frame: the bytes start at
// Offset, were written in Epoch (which began at EpochStart), and the
// sender's committed offset was Committed.
type DataHeader struct {
	Offset     int64
	Epoch      int32
	EpochStart int64
	Committed  int64
}

// Marshal encodes h (DataHeaderSize bytes).
func (h DataHeader) Marshal() []byte { return h.appendTo(make([]byte, 0, DataHeaderSize)) }

// appendTo appends h's encoding to b.
func (h DataHeader) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(h.Offset))
	b = binary.BigEndian.AppendUint32(b, uint32(h.Epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(h.EpochStart))
	return binary.BigEndian.AppendUint64(b, uint64(h.Committed))
}

// DecodeData splits a DATA payload into its header and the log bytes
// (aliasing p); errors wrap ErrBadFrame.
func DecodeData(p []byte) (DataHeader, []byte, error) {
	if len(p) < DataHeaderSize {
		return DataHeader{}, nil, fmt.Errorf("%w: data: %d bytes", ErrBadFrame, len(p))
	}
	d := decoder{b: p[:DataHeaderSize], what: "data"}
	h := DataHeader{Offset: d.i64(), Epoch: d.i32(), EpochStart: d.i64(), Committed: d.i64()}
	if h.Offset < 0 || h.EpochStart < 0 || h.Committed < 0 || h.Epoch < 0 || h.EpochStart > h.Offset {
		return h, nil, fmt.Errorf("%w: data header %+v", ErrBadFrame, h)
	}
	return h, p[DataHeaderSize:], nil
}

// Heartbeat carries the master's committed offset while there is nothing
// to send.
type Heartbeat struct{ Committed int64 }

// Marshal encodes h.
func (h Heartbeat) Marshal() []byte { return binary.BigEndian.AppendUint64(nil, uint64(h.Committed)) }

// DecodeHeartbeat decodes a Heartbeat payload; errors wrap ErrBadFrame.
func DecodeHeartbeat(p []byte) (Heartbeat, error) {
	d := decoder{b: p, what: "heartbeat"}
	h := Heartbeat{Committed: d.i64()}
	if err := d.done(); err != nil {
		return h, err
	}
	if h.Committed < 0 {
		return h, fmt.Errorf("%w: heartbeat %d", ErrBadFrame, h.Committed)
	}
	return h, nil
}

// Ack is the slave's progress: its log ends at Received, of which
// everything below Flushed is durable.
type Ack struct{ Received, Flushed int64 }

// Marshal encodes a.
func (a Ack) Marshal() []byte { return a.appendTo(make([]byte, 0, ackSize)) }

// ackSize is the size of an Ack payload.
const ackSize = 16

// appendTo appends a's encoding to b.
func (a Ack) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(a.Received))
	return binary.BigEndian.AppendUint64(b, uint64(a.Flushed))
}

// DecodeAck decodes an Ack payload; errors wrap ErrBadFrame.
func DecodeAck(p []byte) (Ack, error) {
	d := decoder{b: p, what: "ack"}
	a := Ack{Received: d.i64(), Flushed: d.i64()}
	if err := d.done(); err != nil {
		return a, err
	}
	if a.Received < 0 || a.Flushed < 0 {
		return a, fmt.Errorf("%w: ack %+v", ErrBadFrame, a)
	}
	return a, nil
}

// ErrorMsg is an ERROR frame's payload.
type ErrorMsg struct {
	Code   ErrorCode
	Reason string
}

// MaxReasonLen bounds an error reason.
const MaxReasonLen = 4096

// Marshal encodes m, cutting the reason to MaxReasonLen bytes.
func (m ErrorMsg) Marshal() []byte {
	r := m.Reason
	if len(r) > MaxReasonLen {
		r = r[:MaxReasonLen]
	}
	return appendString([]byte{byte(m.Code)}, r)
}

// DecodeErrorMsg decodes an ERROR payload; errors wrap ErrBadFrame.
func DecodeErrorMsg(p []byte) (ErrorMsg, error) {
	d := decoder{b: p, what: "error"}
	m := ErrorMsg{Code: ErrorCode(d.u8()), Reason: d.str(MaxReasonLen)}
	return m, d.done()
}

// ---------------------------------------------------------------- helpers

func appendString(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func appendEpochs(b []byte, es []sdk.Epoch) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(es)))
	for _, e := range es {
		b = binary.BigEndian.AppendUint32(b, uint32(e.Epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(e.StartOffset))
	}
	return b
}

func appendInt32s(b []byte, xs []int32) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(xs)))
	for _, x := range xs {
		b = binary.BigEndian.AppendUint32(b, uint32(x))
	}
	return b
}

// decoder reads a payload, remembering the first error.
type decoder struct {
	b    []byte
	what string
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s: %s", ErrBadFrame, d.what, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.fail("truncated (%d bytes left, need %d)", len(d.b), n)
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) u8() byte {
	if b := d.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if b := d.bytes(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.bytes(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) i32() int32 { return int32(d.u32()) }

func (d *decoder) i64() int64 {
	if b := d.bytes(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (d *decoder) str(max int) string {
	n := int(d.u16())
	if n > max {
		d.fail("string of %d bytes (max %d)", n, max)
		return ""
	}
	return string(d.bytes(n))
}

func (d *decoder) epochs() []sdk.Epoch {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	if uint64(n)*12 > uint64(len(d.b)) {
		d.fail("%d epochs in %d bytes", n, len(d.b))
		return nil
	}
	es := make([]sdk.Epoch, n)
	for i := range es {
		es[i] = sdk.Epoch{Epoch: d.i32(), StartOffset: d.i64()}
	}
	return es
}

func (d *decoder) int32s() []int32 {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	if uint64(n)*4 > uint64(len(d.b)) {
		d.fail("%d epochs in %d bytes", n, len(d.b))
		return nil
	}
	xs := make([]int32, n)
	for i := range xs {
		xs[i] = d.i32()
	}
	return xs
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}
