// Package record implements the Apache RocketMQ v1 CommitLog message record,
// byte for byte, together with the end-of-segment BLANK record, the message
// properties string, the offset message id and the client's batch body.
//
// # Record layout
//
// Every integer is big-endian. Offsets assume IPv4 born and store hosts; an
// IPv6 host (SysFlag bit 4 for the born host, bit 5 for the store host) is 20
// bytes instead of 8 and shifts every later field by 12.
//
//	off  size  field
//	  0     4  TOTALSIZE                 whole record, this field included
//	  4     4  MAGICCODE                 MagicV1, or MagicV2 (2-byte topic length)
//	  8     4  BODYCRC                   crc32.IEEE(body) & 0x7FFFFFFF
//	 12     4  QUEUEID
//	 16     4  FLAG                      user flag
//	 20     8  QUEUEOFFSET               stamped under the append lock (Stamp)
//	 28     8  PHYSICALOFFSET            stamped under the append lock (Stamp)
//	 36     4  SYSFLAG
//	 40     8  BORNTIMESTAMP
//	 48   8|20 BORNHOST                  IPv4 (4) or IPv6 (16) address, port as int32
//	 56     8  STORETIMESTAMP            stamped under the append lock (Stamp)
//	 64   8|20 STOREHOST
//	 72     4  RECONSUMETIMES
//	 76     8  PREPAREDTRANSACTIONOFFSET
//	 84   4+n  BODY                      int32 length, then the bytes
//	  .  1+n   TOPIC                     V1: 1-byte length (1..127); V2: int16 length
//	  .  2+n   PROPERTIES                int16 length, then "k\x01v\x02..." bytes
//
// A V1 record with IPv4 hosts therefore costs 91 bytes plus body, topic and
// properties.
//
// When the next record does not fit in a segment (with BlankSize bytes to
// spare), the rest of the segment is padded by a BLANK record: only its
// 8-byte header is written, TOTALSIZE = the padding length to the segment
// end, then BlankMagic (PutBlank); Check recognizes it.
//
// # Version choice
//
// Encode writes MagicV1 whenever the topic fits in 127 bytes; that is the
// only layout RocketMQ's Go client can read. Topics of 128..32767 bytes are
// encoded with MagicV2 (2-byte topic length), as RocketMQ does with
// autoMessageVersionOnTopicLen, but only when Limits.MaxTopicLength allows
// them; the default limit is 127, so by default long topics are rejected with
// ErrInvalid. Check and Decode accept both versions.
//
// # Concurrency
//
// Every function is safe for concurrent use; none keeps state. Functions that
// return slices aliasing their input say so; the caller must not modify the
// input while such slices are in use.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
)

// Magic codes and fixed sizes.
const (
	// MagicV1 marks a message record whose topic length is one byte.
	MagicV1 uint32 = 0xDAA320A7
	// MagicV2 marks a message record whose topic length is a 2-byte int16.
	MagicV2 uint32 = 0xDAA320AB
	// BlankMagic marks the BLANK record that pads a segment to its end.
	BlankMagic uint32 = 0xCBD43194
	// BlankSize is the size of a BLANK record's header (TOTALSIZE + magic),
	// and the minimum padding: a segment always keeps at least this many
	// bytes free for it.
	BlankSize = 8
	// DefaultMaxMessageSize is the default body size limit (4 MiB), as
	// RocketMQ's maxMessageSize.
	DefaultMaxMessageSize = 4 << 20
	// MaxPropertiesSize is the longest properties string a record can hold
	// (its length is an int16).
	MaxPropertiesSize = 32767
	// MaxTopicLengthV1 is the longest topic a V1 record can hold; it is also
	// the default Limits.MaxTopicLength.
	MaxTopicLengthV1 = 127
	// MaxTopicLengthV2 is the longest topic a V2 record can hold.
	MaxTopicLengthV2 = 32767
	// MaxRecordSize bounds TOTALSIZE. No record may be larger (a record must
	// fit in one segment, and the default segment is 1 GiB); Check reports a
	// larger TOTALSIZE as corrupt instead of waiting for the bytes.
	MaxRecordSize = 1 << 30
	// MinRecordSize is the smallest possible message record: V1, IPv4 hosts,
	// empty body, a 1-byte topic, no properties.
	MinRecordSize = fixedV4 + 4 + 1 + 1 + 2
)

// SysFlag bits (RocketMQ MessageSysFlag).
const (
	// SysFlagCompressed (bit 0) says the body is compressed by the client.
	SysFlagCompressed int32 = 0x1
	// SysFlagMultiTags (bit 1) says TAGS holds several tags.
	SysFlagMultiTags int32 = 0x2
	// SysFlagTransactionNot is the transaction type (bits 2-3) of a plain message.
	SysFlagTransactionNot int32 = 0x0
	// SysFlagTransactionPrepared is the type of a transaction half message.
	SysFlagTransactionPrepared int32 = 0x1 << 2
	// SysFlagTransactionCommit is the type of a transaction commit record.
	SysFlagTransactionCommit int32 = 0x2 << 2
	// SysFlagTransactionRollback is the type of a transaction rollback record.
	SysFlagTransactionRollback int32 = 0x3 << 2
	// SysFlagTransactionMask selects the transaction type bits (2-3).
	SysFlagTransactionMask int32 = 0x3 << 2
	// SysFlagBornHostV6 (bit 4) says BORNHOST is 20 bytes (IPv6). Encode
	// sets or clears it from Message.BornHost.
	SysFlagBornHostV6 int32 = 0x1 << 4
	// SysFlagStoreHostV6 (bit 5) says STOREHOST is 20 bytes (IPv6). Encode
	// sets or clears it from Message.StoreHost.
	SysFlagStoreHostV6 int32 = 0x1 << 5
	// SysFlagNeedUnwrap (bit 6) is RocketMQ's need-unwrap flag.
	SysFlagNeedUnwrap int32 = 0x1 << 6
	// SysFlagInnerBatch (bit 7) marks a record holding an inner batch.
	SysFlagInnerBatch int32 = 0x1 << 7
	// SysFlagCompressionTypeMask selects the compression type (bits 8-10).
	SysFlagCompressionTypeMask int32 = 0x7 << 8
)

// Property names the broker reads or writes (RocketMQ MessageConst).
const (
	PropertyKeys                  = "KEYS"
	PropertyTags                  = "TAGS"
	PropertyWaitStoreMsgOK        = "WAIT"
	PropertyDelayLevel            = "DELAY"
	PropertyRetryTopic            = "RETRY_TOPIC"
	PropertyRealTopic             = "REAL_TOPIC"
	PropertyRealQueueID           = "REAL_QID"
	PropertyTransactionPrepared   = "TRAN_MSG"
	PropertyProducerGroup         = "PGROUP"
	PropertyMinOffset             = "MIN_OFFSET"
	PropertyMaxOffset             = "MAX_OFFSET"
	PropertyOriginMsgID           = "ORIGIN_MESSAGE_ID"
	PropertyReconsumeTime         = "RECONSUME_TIME"
	PropertyMsgRegion             = "MSG_REGION"
	PropertyTraceSwitch           = "TRACE_ON"
	PropertyUniqKey               = "UNIQ_KEY"
	PropertyMaxReconsumeTimes     = "MAX_RECONSUME_TIMES"
	PropertyConsumeStartTime      = "CONSUME_START_TIME"
	PropertyTransactionPreparedQO = "TRAN_PREPARED_QUEUE_OFFSET"
	PropertyTransactionCheckTimes = "TRANSACTION_CHECK_TIMES"
	PropertyCheckImmunityTime     = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	PropertyTransactionID         = "__transactionId__"
	PropertyInnerNum              = "INNER_NUM"
	PropertyInnerBase             = "INNER_BASE"
	PropertyCluster               = "CLUSTER"
	PropertyMessageType           = "MSG_TYPE"
	PropertyTimerDelaySec         = "TIMER_DELAY_SEC"
	PropertyTimerDeliverMS        = "TIMER_DELIVER_MS"
	PropertyTimerDelayMS          = "TIMER_DELAY_MS"
	// PropertyTimerOutMS is the due time, epoch ms, the broker sets on a
	// timer message's record under the timer topic.
	PropertyTimerOutMS = "TIMER_OUT_MS"
	// PropertyShardingKey is Java's name; RocketMQ's Go client sends
	// "SHARDING_KEY" instead.
	PropertyShardingKey = "__SHARDINGKEY"
)

// TimerRequestProperties are the properties a client asks for a timer
// message with, in the order RocketMQ reads them: the first present wins.
var TimerRequestProperties = [...]string{PropertyTimerDelaySec, PropertyTimerDelayMS, PropertyTimerDeliverMS}

// Property string separators (RocketMQ MessageDecoder).
const (
	// NameValueSeparator separates a property's name from its value.
	NameValueSeparator byte = 0x01
	// PropertySeparator ends a name/value pair.
	PropertySeparator byte = 0x02
	// KeySeparator separates the keys inside the KEYS property.
	KeySeparator = " "
)

// Field positions that do not depend on the host families.
const (
	posTotalSize      = 0
	posMagic          = 4
	posBodyCRC        = 8
	posQueueID        = 12
	posFlag           = 16
	posQueueOffset    = 20
	posPhysOffset     = 28
	posSysFlag        = 36
	posBornTimestamp  = 40
	posBornHost       = 48
	fixedV4           = 84 // position of BODYLEN with IPv4 born and store hosts
	hostV4Len         = 8
	hostV6Len         = 20
	hostV6Extra       = hostV6Len - hostV4Len
	clientBatchHeader = 20 // TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN
)

// Errors. Every error returned by this package wraps exactly one of the
// top-level sentinels below (ErrInvalid, ErrTooLarge, ErrPropertiesTooLong,
// ErrIncomplete, ErrCorrupt, ErrBlank) and carries the specifics (sizes,
// values) in its text; check them with errors.Is.
var (
	// ErrInvalid means the input violates the format or a precondition:
	// an empty or too long topic, a malformed properties string, message
	// id or client batch.
	ErrInvalid = errors.New("record: invalid")
	// ErrTooLarge means the body exceeds Limits.MaxMessageSize, or the
	// record would exceed MaxRecordSize.
	ErrTooLarge = errors.New("record: message too large")
	// ErrPropertiesTooLong means the properties exceed MaxPropertiesSize.
	ErrPropertiesTooLong = errors.New("record: properties too long")
	// ErrIncomplete means the buffer ends before the record does: a tail
	// still being written or replicated, or a torn tail after a crash.
	// Nothing seen so far contradicts the record being valid.
	ErrIncomplete = errors.New("record: incomplete")
	// ErrCorrupt means the bytes cannot be a record (and never will be,
	// whatever follows). Its refinements below say what was wrong.
	ErrCorrupt = errors.New("record: corrupt")
	// ErrBlank is returned by Decode for a BLANK record, which has no
	// message to decode.
	ErrBlank = errors.New("record: blank padding record")
)

// Refinements of ErrCorrupt: errors.Is(err, ErrCorrupt) holds for each.
var (
	// ErrZeroed means TOTALSIZE is 0: the bytes were never written (the
	// preallocated zeros past the end of the log).
	ErrZeroed error = &kindError{"record: corrupt: zero TOTALSIZE (never written)", ErrCorrupt}
	// ErrBadMagic means the magic code is not MagicV1, MagicV2 or BlankMagic.
	ErrBadMagic error = &kindError{"record: corrupt: bad magic code", ErrCorrupt}
	// ErrBadSize means TOTALSIZE is out of range.
	ErrBadSize error = &kindError{"record: corrupt: bad TOTALSIZE", ErrCorrupt}
	// ErrLengthMismatch means the field lengths (body, topic, properties)
	// do not add up to TOTALSIZE.
	ErrLengthMismatch error = &kindError{"record: corrupt: length mismatch", ErrCorrupt}
	// ErrBadField means a field holds an impossible value (a negative
	// length, a topic length out of range, a port above 65535).
	ErrBadField error = &kindError{"record: corrupt: bad field", ErrCorrupt}
	// ErrBadCRC means BODYCRC does not match the body.
	ErrBadCRC error = &kindError{"record: corrupt: body CRC mismatch", ErrCorrupt}
)

// Refinements of ErrInvalid: errors.Is(err, ErrInvalid) holds for each.
var (
	// ErrMalformedProperties means a properties string does not follow the
	// grammar described at ParseProperties.
	ErrMalformedProperties error = &kindError{"record: invalid properties", ErrInvalid}
	// ErrBadMsgID means a string is not an offset message id.
	ErrBadMsgID error = &kindError{"record: invalid message id", ErrInvalid}
	// ErrBadBatch means a client batch body is malformed.
	ErrBadBatch error = &kindError{"record: invalid client batch", ErrInvalid}
)

type kindError struct {
	msg    string
	parent error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.parent }

// Message is what a producer sends, before the store assigns offsets.
// Encode reads it and never retains or modifies it.
type Message struct {
	// Topic is 1..127 bytes (1..32767 with a raised Limits.MaxTopicLength).
	Topic   string
	QueueID int32
	// Flag is the user flag, stored unchanged.
	Flag int32
	// Body is stored unchanged; compression is the client's business
	// (SysFlagCompressed).
	Body []byte
	// Properties is the encoded "k\x01v\x02k\x01v\x02" string exactly as
	// the client sent it; it is stored unchanged and not validated.
	Properties []byte
	// SysFlag is stored as given, except that Encode sets or clears
	// SysFlagBornHostV6 and SysFlagStoreHostV6 to match the address
	// families of BornHost and StoreHost.
	SysFlag       int32
	BornTimestamp int64
	// BornHost and StoreHost are stored as 4-byte IPv4 addresses when they
	// are IPv4 or IPv4-mapped IPv6 (::ffff:a.b.c.d) and as 16-byte IPv6
	// addresses otherwise. A zone is dropped. The zero AddrPort is stored as
	// 0.0.0.0:0.
	BornHost                  netip.AddrPort
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
}

// Limits bounds what Encode accepts. The zero value means the defaults.
type Limits struct {
	// MaxMessageSize is the largest body in bytes; <= 0 means
	// DefaultMaxMessageSize.
	MaxMessageSize int
	// MaxTopicLength is the longest topic in bytes; <= 0 means
	// MaxTopicLengthV1 (127). Values above 127 enable V2 records for long
	// topics (which RocketMQ's Go client cannot read); values above
	// MaxTopicLengthV2 are treated as MaxTopicLengthV2.
	MaxTopicLength int
}

func (l Limits) maxBody() int {
	if l.MaxMessageSize <= 0 {
		return DefaultMaxMessageSize
	}
	return l.MaxMessageSize
}

func (l Limits) maxTopic() int {
	switch {
	case l.MaxTopicLength <= 0:
		return MaxTopicLengthV1
	case l.MaxTopicLength > MaxTopicLengthV2:
		return MaxTopicLengthV2
	}
	return l.MaxTopicLength
}

// hostAddr returns the address Encode stores for ap and whether it takes the
// 16-byte IPv6 form.
func hostAddr(ap netip.AddrPort) (netip.Addr, bool) {
	a := ap.Addr().Unmap()
	if !a.IsValid() {
		return netip.IPv4Unspecified(), false
	}
	return a, a.Is6()
}

// hostSysFlag returns m.SysFlag with the host-family bits set from the
// addresses.
func hostSysFlag(m *Message) int32 {
	f := m.SysFlag &^ (SysFlagBornHostV6 | SysFlagStoreHostV6)
	if _, v6 := hostAddr(m.BornHost); v6 {
		f |= SysFlagBornHostV6
	}
	if _, v6 := hostAddr(m.StoreHost); v6 {
		f |= SysFlagStoreHostV6
	}
	return f
}

// bodyLenPos returns the position of BODYLEN for a record with sysFlag.
func bodyLenPos(sysFlag int32) int {
	p := fixedV4
	if sysFlag&SysFlagBornHostV6 != 0 {
		p += hostV6Extra
	}
	if sysFlag&SysFlagStoreHostV6 != 0 {
		p += hostV6Extra
	}
	return p
}

// storeTimestampPos returns the position of STORETIMESTAMP.
func storeTimestampPos(sysFlag int32) int {
	if sysFlag&SysFlagBornHostV6 != 0 {
		return posBornHost + hostV6Len
	}
	return posBornHost + hostV4Len
}

// size validates m against lim and returns the encoded size, the SysFlag to
// store and whether the record is V2.
func size(m *Message, lim Limits) (n int, sysFlag int32, v2 bool, err error) {
	tl := len(m.Topic)
	if tl == 0 {
		return 0, 0, false, fmt.Errorf("record: encode: empty topic: %w", ErrInvalid)
	}
	if limit := lim.maxTopic(); tl > limit {
		return 0, 0, false, fmt.Errorf("record: encode: topic of %d bytes exceeds limit %d: %w", tl, limit, ErrInvalid)
	}
	if limit := lim.maxBody(); len(m.Body) > limit {
		return 0, 0, false, fmt.Errorf("record: encode: body of %d bytes exceeds limit %d: %w", len(m.Body), limit, ErrTooLarge)
	}
	if len(m.Properties) > MaxPropertiesSize {
		return 0, 0, false, fmt.Errorf("record: encode: properties of %d bytes exceed %d: %w", len(m.Properties), MaxPropertiesSize, ErrPropertiesTooLong)
	}
	v2 = tl > MaxTopicLengthV1
	topicLenSize := 1
	if v2 {
		topicLenSize = 2
	}
	sysFlag = hostSysFlag(m)
	n = bodyLenPos(sysFlag) + 4 + len(m.Body) + topicLenSize + tl + 2 + len(m.Properties)
	if n > MaxRecordSize {
		return 0, 0, false, fmt.Errorf("record: encode: record of %d bytes exceeds %d: %w", n, MaxRecordSize, ErrTooLarge)
	}
	return n, sysFlag, v2, nil
}

// EncodedSize returns the size of the record Encode would produce for m
// under the default Limits, or the error Encode would return.
func EncodedSize(m *Message) (int, error) {
	n, _, _, err := size(m, Limits{})
	return n, err
}

// EncodedSizeLimits is EncodedSize under lim.
func EncodedSizeLimits(m *Message, lim Limits) (int, error) {
	n, _, _, err := size(m, lim)
	return n, err
}

// Encode appends the record for m to dst and returns the extended slice.
// QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP are written as zero, to be
// filled in by Stamp; BODYCRC is computed. The record starts at the old
// len(dst) and is exactly EncodedSize(m) bytes long.
//
// Encode allocates only when dst lacks the capacity (then once, as append
// does). On error dst is returned unchanged and the error wraps ErrInvalid
// (topic empty or longer than lim allows), ErrTooLarge (body above
// lim.MaxMessageSize, or the record above MaxRecordSize) or
// ErrPropertiesTooLong. Properties are not validated.
func Encode(dst []byte, m *Message, lim Limits) ([]byte, error) {
	n, sysFlag, v2, err := size(m, lim)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	if cap(dst)-start < n {
		// One allocation, with append's growth policy for repeated use.
		grown := make([]byte, start, max(start+n, 2*cap(dst)))
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:start+n]
	r := dst[start : start+n]
	be := binary.BigEndian

	be.PutUint32(r[posTotalSize:], uint32(n))
	if v2 {
		be.PutUint32(r[posMagic:], MagicV2)
	} else {
		be.PutUint32(r[posMagic:], MagicV1)
	}
	be.PutUint32(r[posBodyCRC:], BodyCRC(m.Body))
	be.PutUint32(r[posQueueID:], uint32(m.QueueID))
	be.PutUint32(r[posFlag:], uint32(m.Flag))
	be.PutUint64(r[posQueueOffset:], 0)
	be.PutUint64(r[posPhysOffset:], 0)
	be.PutUint32(r[posSysFlag:], uint32(sysFlag))
	be.PutUint64(r[posBornTimestamp:], uint64(m.BornTimestamp))
	p := putHost(r, posBornHost, m.BornHost)
	be.PutUint64(r[p:], 0) // STORETIMESTAMP
	p = putHost(r, p+8, m.StoreHost)
	be.PutUint32(r[p:], uint32(m.ReconsumeTimes))
	be.PutUint64(r[p+4:], uint64(m.PreparedTransactionOffset))
	p += 12
	be.PutUint32(r[p:], uint32(len(m.Body)))
	p += 4
	p += copy(r[p:], m.Body)
	if v2 {
		be.PutUint16(r[p:], uint16(len(m.Topic)))
		p += 2
	} else {
		r[p] = byte(len(m.Topic))
		p++
	}
	p += copy(r[p:], m.Topic)
	be.PutUint16(r[p:], uint16(len(m.Properties)))
	p += 2
	copy(r[p:], m.Properties)
	return dst, nil
}

// putHost writes ap at r[p:] in the stored form and returns the position
// after it.
func putHost(r []byte, p int, ap netip.AddrPort) int {
	a, v6 := hostAddr(ap)
	if v6 {
		b := a.As16()
		copy(r[p:p+16], b[:])
		p += 16
	} else {
		b := a.As4()
		copy(r[p:p+4], b[:])
		p += 4
	}
	binary.BigEndian.PutUint32(r[p:], uint32(ap.Port()))
	return p + 4
}

// BodyCRC returns the stored BODYCRC of body: IEEE CRC32 masked with
// 0x7FFFFFFF, as RocketMQ's UtilAll.crc32.
func BodyCRC(body []byte) uint32 {
	return crc32.ChecksumIEEE(body) & 0x7FFFFFFF
}

// Stamp writes queueOffset, physOffset and storeTimestamp into the encoded
// record rec (as produced by Encode, or a stored record) in place. The
// STORETIMESTAMP position depends on the born-host family recorded in rec's
// SYSFLAG. Stamp does not allocate and does not touch BODYCRC (which covers
// the body only). Precondition: rec holds at least the fixed header of a
// message record (76 bytes); otherwise Stamp panics.
func Stamp(rec []byte, queueOffset, physOffset, storeTimestamp int64) {
	_ = rec[posBornHost+hostV6Len+8-1] // one bounds check; a record is longer
	be := binary.BigEndian
	be.PutUint64(rec[posQueueOffset:], uint64(queueOffset))
	be.PutUint64(rec[posPhysOffset:], uint64(physOffset))
	sf := int32(be.Uint32(rec[posSysFlag:]))
	be.PutUint64(rec[storeTimestampPos(sf):], uint64(storeTimestamp))
}

// PutBlank writes the 8-byte BLANK record at dst[0:8]: TOTALSIZE = padding
// (the number of bytes from dst[0] to the end of the segment), then
// BlankMagic. The bytes after the header are left as they are, as RocketMQ
// does. Preconditions: len(dst) >= BlankSize and padding >= BlankSize;
// PutBlank panics otherwise.
func PutBlank(dst []byte, padding int32) {
	if padding < BlankSize {
		panic(fmt.Sprintf("record: PutBlank: padding %d below %d", padding, BlankSize))
	}
	_ = dst[BlankSize-1]
	binary.BigEndian.PutUint32(dst[posTotalSize:], uint32(padding))
	binary.BigEndian.PutUint32(dst[posMagic:], BlankMagic)
}
