package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net/netip"
)

// Header is the fixed part of a stored message record; the fields are the
// record's fields of the same names (see the package documentation).
type Header struct {
	TotalSize int32  // whole record, in bytes
	Magic     uint32 // MagicV1 or MagicV2
	BodyCRC   uint32 // as stored; Decode has verified it
	QueueID   int32
	Flag      int32
	// QueueOffset is the index of the record in its consume queue.
	QueueOffset int64
	// PhysOffset is the record's own commitlog offset.
	PhysOffset    int64
	SysFlag       int32
	BornTimestamp int64 // milliseconds, from the producer
	// BornHost and StoreHost are IPv4 or IPv6 as SysFlag says.
	BornHost                  netip.AddrPort
	StoreTimestamp            int64 // milliseconds, from the store
	StoreHost                 netip.AddrPort
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
}

// Record is a decoded message record. Body and Properties alias the buffer
// given to Decode; Topic is a copy.
type Record struct {
	Header
	Body       []byte
	Topic      string
	Properties []byte
}

// Message returns the Message that encodes to r (with r's offsets and store
// timestamp still to be stamped). Body and Properties alias r's.
func (r *Record) Message() *Message {
	return &Message{
		Topic:                     r.Topic,
		QueueID:                   r.QueueID,
		Flag:                      r.Flag,
		Body:                      r.Body,
		Properties:                r.Properties,
		SysFlag:                   r.SysFlag,
		BornTimestamp:             r.BornTimestamp,
		BornHost:                  r.BornHost,
		StoreHost:                 r.StoreHost,
		ReconsumeTimes:            r.ReconsumeTimes,
		PreparedTransactionOffset: r.PreparedTransactionOffset,
	}
}

// Info is what dispatch needs from one record. Topic, Keys and UniqKey are
// copies (they are small); Properties aliases the buffer given to Check.
// For a BLANK record only Blank and Size are set.
type Info struct {
	// Blank reports a BLANK (end-of-segment padding) record.
	Blank bool
	// Size is TOTALSIZE: the record's length, or for a BLANK record the
	// padding length to the end of the segment.
	Size        int32
	Topic       string
	QueueID     int32
	QueueOffset int64
	PhysOffset  int64
	SysFlag     int32
	// StoreTimestamp is the record's STORETIMESTAMP (milliseconds).
	StoreTimestamp int64
	// TagsCode is TagsHashCode of the TAGS property, 0 when it is absent or
	// empty. (For the delay/schedule topic RocketMQ stores the delivery time
	// instead; that is the caller's business.)
	TagsCode int64
	// Keys is the raw KEYS property ("" when absent); IndexKeys splits it.
	Keys string
	// UniqKey is the UNIQ_KEY property (the client's message id), "" when
	// absent.
	UniqKey                   string
	PreparedTransactionOffset int64
	// Properties aliases the checked buffer.
	Properties []byte
}

// TransactionType returns the transaction type bits of sysFlag: one of
// SysFlagTransactionNot, -Prepared, -Commit, -Rollback.
func TransactionType(sysFlag int32) int32 { return sysFlag & SysFlagTransactionMask }

// NeedsConsumeQueueEntry reports whether dispatch must write a consume
// queue entry for the record: not for BLANK records, nor for transaction
// prepared and rollback records (RocketMQ DefaultMessageStore).
func (i *Info) NeedsConsumeQueueEntry() bool {
	if i.Blank {
		return false
	}
	t := TransactionType(i.SysFlag)
	return t != SysFlagTransactionPrepared && t != SysFlagTransactionRollback
}

// NeedsIndex reports whether the key index should see the record: every
// message record except transaction rollback records (RocketMQ
// IndexService.buildIndex).
func (i *Info) NeedsIndex() bool {
	return !i.Blank && TransactionType(i.SysFlag) != SysFlagTransactionRollback
}

// layout is the result of scanning one record.
type layout struct {
	total    int
	magic    uint32
	sysFlag  int32
	bodyPos  int
	bodyLen  int
	topicPos int
	topicLen int
	propPos  int
	propLen  int
}

// scan validates the record at b[0:]. It returns blank=true for a BLANK
// record. On ErrIncomplete, claimed is the TOTALSIZE the record declares if
// that is known (0 otherwise).
func scan(b []byte, checkCRC bool) (l layout, blank bool, claimed int, err error) {
	be := binary.BigEndian
	n := len(b)
	if n < 4 {
		return l, false, 0, fmt.Errorf("record: %d bytes, need 4 for TOTALSIZE: %w", n, ErrIncomplete)
	}
	total32 := int32(be.Uint32(b))
	if total32 == 0 {
		return l, false, 0, ErrZeroed
	}
	if total32 < 0 {
		return l, false, 0, fmt.Errorf("record: TOTALSIZE %d: %w", total32, ErrBadSize)
	}
	total := int(total32)
	if total < BlankSize {
		// Neither a BLANK nor a message record can be this short.
		return l, false, 0, fmt.Errorf("record: TOTALSIZE %d below %d: %w", total, BlankSize, ErrBadSize)
	}
	if n < 8 {
		return l, false, total, fmt.Errorf("record: %d bytes, need 8 for the magic code: %w", n, ErrIncomplete)
	}
	l.total = total
	l.magic = be.Uint32(b[posMagic:])
	switch l.magic {
	case BlankMagic:
		if n < total {
			return l, true, total, fmt.Errorf("record: BLANK pads %d bytes, have %d: %w", total, n, ErrIncomplete)
		}
		return l, true, total, nil
	case MagicV1, MagicV2:
	default:
		return l, false, 0, fmt.Errorf("record: magic 0x%08X: %w", l.magic, ErrBadMagic)
	}
	claimed, err = scanMessage(b, &l, checkCRC)
	return l, false, claimed, err
}

// scanMessage validates the message record at b[0:] whose TOTALSIZE and
// magic code scan has read into l, and completes l (through a pointer: the
// dispatcher and recovery scan every record, and copying the layout in and
// out showed in their profiles). claimed is as for scan.
func scanMessage(b []byte, l *layout, checkCRC bool) (claimed int, err error) {
	be := binary.BigEndian
	n, total := len(b), l.total
	if total < MinRecordSize || total > MaxRecordSize {
		return 0, fmt.Errorf("record: TOTALSIZE %d outside [%d, %d]: %w", total, MinRecordSize, MaxRecordSize, ErrBadSize)
	}
	if n < posSysFlag+4 {
		return total, fmt.Errorf("record: %d of %d bytes: %w", n, total, ErrIncomplete)
	}
	l.sysFlag = int32(be.Uint32(b[posSysFlag:]))
	blp := bodyLenPos(l.sysFlag)
	topicLenSize := 1
	if l.magic == MagicV2 {
		topicLenSize = 2
	}
	// Smallest possible record with this layout: empty body and
	// properties, 1-byte topic.
	if least := blp + 4 + topicLenSize + 1 + 2; total < least {
		return 0, fmt.Errorf("record: TOTALSIZE %d below %d for SYSFLAG 0x%X: %w", total, least, l.sysFlag, ErrBadSize)
	}
	if n < blp+4 {
		return total, fmt.Errorf("record: %d of %d bytes: %w", n, total, ErrIncomplete)
	}
	if err := checkPorts(b, l.sysFlag); err != nil {
		return 0, err
	}
	bodyLen := int32(be.Uint32(b[blp:]))
	if bodyLen < 0 {
		return 0, fmt.Errorf("record: BODYLEN %d: %w", bodyLen, ErrBadField)
	}
	l.bodyPos = blp + 4
	l.bodyLen = int(bodyLen)
	tlp := l.bodyPos + l.bodyLen
	if tlp+topicLenSize+1+2 > total {
		return 0, fmt.Errorf("record: BODYLEN %d does not fit TOTALSIZE %d: %w", bodyLen, total, ErrLengthMismatch)
	}
	if n < tlp+topicLenSize {
		return total, fmt.Errorf("record: %d of %d bytes: %w", n, total, ErrIncomplete)
	}
	if topicLenSize == 1 {
		l.topicLen = int(b[tlp])
		if l.topicLen == 0 || l.topicLen > MaxTopicLengthV1 {
			return 0, fmt.Errorf("record: V1 topic length %d: %w", l.topicLen, ErrBadField)
		}
	} else {
		tl := int16(be.Uint16(b[tlp:]))
		if tl <= 0 {
			return 0, fmt.Errorf("record: V2 topic length %d: %w", tl, ErrBadField)
		}
		l.topicLen = int(tl)
	}
	l.topicPos = tlp + topicLenSize
	plp := l.topicPos + l.topicLen
	if plp+2 > total {
		return 0, fmt.Errorf("record: topic length %d does not fit TOTALSIZE %d: %w", l.topicLen, total, ErrLengthMismatch)
	}
	if n < plp+2 {
		return total, fmt.Errorf("record: %d of %d bytes: %w", n, total, ErrIncomplete)
	}
	pl := int16(be.Uint16(b[plp:]))
	if pl < 0 {
		return 0, fmt.Errorf("record: properties length %d: %w", pl, ErrBadField)
	}
	l.propPos = plp + 2
	l.propLen = int(pl)
	if end := l.propPos + l.propLen; end != total {
		return 0, fmt.Errorf("record: fields end at %d, TOTALSIZE is %d: %w", end, total, ErrLengthMismatch)
	}
	if n < total {
		return total, fmt.Errorf("record: %d of %d bytes: %w", n, total, ErrIncomplete)
	}
	if checkCRC {
		want := be.Uint32(b[posBodyCRC:])
		if got := crc32.ChecksumIEEE(b[l.bodyPos:l.bodyPos+l.bodyLen]) & 0x7FFFFFFF; got != want {
			return 0, fmt.Errorf("record: BODYCRC 0x%08X, body has 0x%08X: %w", want, got, ErrBadCRC)
		}
	}
	return total, nil
}

// checkPorts checks the two port fields of the record at b[0:] (long enough
// for its fixed fields), int32s that must hold a uint16.
func checkPorts(b []byte, sysFlag int32) error {
	bornPort := posBornHost + 4
	if sysFlag&SysFlagBornHostV6 != 0 {
		bornPort = posBornHost + 16
	}
	storePort := storeTimestampPos(sysFlag) + 8 + 4
	if sysFlag&SysFlagStoreHostV6 != 0 {
		storePort = storeTimestampPos(sysFlag) + 8 + 16
	}
	for _, pp := range [2]int{bornPort, storePort} {
		if port := binary.BigEndian.Uint32(b[pp:]); port > 0xFFFF {
			return fmt.Errorf("record: port %d at %d: %w", int32(port), pp, ErrBadField)
		}
	}
	return nil
}

// Check validates the record at the start of b, as recovery and dispatch
// need it. It never panics, whatever b holds, and reads nothing past b.
//
//   - A message record: size is its TOTALSIZE (<= len(b)), info is filled
//     in, err is nil.
//   - A BLANK record: size is its TOTALSIZE (the padding to the segment
//     end, >= BlankSize) and info is Info{Blank: true, Size: size}; err is
//     nil when b holds the whole padding, and wraps ErrIncomplete (with size
//     and info still set) when b ends earlier.
//   - err wraps ErrIncomplete when b ends before the record does (or before
//     its TOTALSIZE and magic code): a tail still being written or
//     replicated, or a torn tail. size is then the TOTALSIZE the record
//     claims (possibly > len(b)), or 0 when not even that is known. Every
//     field seen so far was consistent.
//   - err wraps ErrCorrupt otherwise, refined by ErrZeroed (TOTALSIZE 0:
//     never written), ErrBadMagic, ErrBadSize, ErrBadField,
//     ErrLengthMismatch (body, topic and properties lengths do not add up to
//     TOTALSIZE) or ErrBadCRC; size is 0.
//
// checkCRC=false skips the body CRC (dispatch); true verifies it (recovery).
// Check allocates only the copies of Topic, Keys and UniqKey.
func Check(b []byte, checkCRC bool) (size int, info Info, err error) {
	return check(b, checkCRC, true, nil)
}

// A Checker is Check for a stream of records, as recovery and dispatch
// read them: it interns Topic (a run of records of the topics it has seen
// allocates nothing) and fills Info.Keys and Info.UniqKey only when Keys is
// set. Results are otherwise exactly Check's. The zero value is ready to
// use; a Checker is not safe for concurrent use.
type Checker struct {
	// Keys makes Check fill Info.Keys and Info.UniqKey (an indexer needs
	// them; a consume queue does not).
	Keys bool

	last   string
	topics map[string]string
}

// checkerTopics bounds a Checker's interned topic names; past it the set
// starts again.
const checkerTopics = 4096

// Check is record.Check with the Checker's interning and Keys choice.
func (c *Checker) Check(b []byte, checkCRC bool) (size int, info Info, err error) {
	return check(b, checkCRC, c.Keys, c)
}

// intern returns the topic name in tb as a string, allocating only for a
// name not seen before.
func (c *Checker) intern(tb []byte) string {
	if string(tb) == c.last {
		return c.last
	}
	if s, ok := c.topics[string(tb)]; ok {
		c.last = s
		return s
	}
	if c.topics == nil || len(c.topics) >= checkerTopics {
		c.topics = make(map[string]string)
	}
	s := string(tb)
	c.topics[s] = s
	c.last = s
	return s
}

func check(b []byte, checkCRC, keys bool, c *Checker) (size int, info Info, err error) {
	l, blank, claimed, err := scan(b, checkCRC)
	if blank && claimed > 0 {
		return claimed, Info{Blank: true, Size: int32(claimed)}, err
	}
	if err != nil {
		return claimed, Info{}, err
	}
	be := binary.BigEndian
	tb := b[l.topicPos : l.topicPos+l.topicLen]
	var topic string
	if c != nil {
		topic = c.intern(tb)
	} else {
		topic = string(tb)
	}
	info = Info{
		Size:                      int32(l.total),
		Topic:                     topic,
		QueueID:                   int32(be.Uint32(b[posQueueID:])),
		QueueOffset:               int64(be.Uint64(b[posQueueOffset:])),
		PhysOffset:                int64(be.Uint64(b[posPhysOffset:])),
		SysFlag:                   l.sysFlag,
		StoreTimestamp:            int64(be.Uint64(b[storeTimestampPos(l.sysFlag):])),
		PreparedTransactionOffset: int64(be.Uint64(b[l.bodyPos-12:])),
		Properties:                b[l.propPos : l.propPos+l.propLen : l.propPos+l.propLen],
	}
	tags, k, uniq := dispatchProps(info.Properties)
	info.TagsCode = tagsCodeBytes(tags)
	if keys {
		if len(k) > 0 {
			info.Keys = string(k)
		}
		if len(uniq) > 0 {
			info.UniqKey = string(uniq)
		}
	}
	return l.total, info, nil
}

// Decode decodes the whole message record at b[0:] (b may extend past it;
// the record's length is Record.TotalSize) and verifies its body CRC. Body
// and Properties alias b. Errors are those of Check with checkCRC=true,
// and ErrBlank for a BLANK record.
func Decode(b []byte) (*Record, error) {
	l, blank, _, err := scan(b, true)
	if blank && err == nil {
		return nil, fmt.Errorf("record: decode: %w", ErrBlank)
	}
	if err != nil {
		return nil, err
	}
	be := binary.BigEndian
	r := &Record{
		Header: Header{
			TotalSize:      int32(l.total),
			Magic:          l.magic,
			BodyCRC:        be.Uint32(b[posBodyCRC:]),
			QueueID:        int32(be.Uint32(b[posQueueID:])),
			Flag:           int32(be.Uint32(b[posFlag:])),
			QueueOffset:    int64(be.Uint64(b[posQueueOffset:])),
			PhysOffset:     int64(be.Uint64(b[posPhysOffset:])),
			SysFlag:        l.sysFlag,
			BornTimestamp:  int64(be.Uint64(b[posBornTimestamp:])),
			ReconsumeTimes: int32(be.Uint32(b[l.bodyPos-16:])),
		},
		Body:       b[l.bodyPos : l.bodyPos+l.bodyLen : l.bodyPos+l.bodyLen],
		Topic:      string(b[l.topicPos : l.topicPos+l.topicLen]),
		Properties: b[l.propPos : l.propPos+l.propLen : l.propPos+l.propLen],
	}
	p := posBornHost
	r.BornHost, p = readHost(b, p, l.sysFlag&SysFlagBornHostV6 != 0)
	r.StoreTimestamp = int64(be.Uint64(b[p:]))
	r.StoreHost, p = readHost(b, p+8, l.sysFlag&SysFlagStoreHostV6 != 0)
	r.PreparedTransactionOffset = int64(be.Uint64(b[p+4:]))
	return r, nil
}

// readHost reads a stored host at b[p:] and returns it and the position
// after it. scan has checked the bounds and the port.
func readHost(b []byte, p int, v6 bool) (netip.AddrPort, int) {
	var a netip.Addr
	if v6 {
		a = netip.AddrFrom16([16]byte(b[p : p+16]))
		p += 16
	} else {
		a = netip.AddrFrom4([4]byte(b[p : p+4]))
		p += 4
	}
	port := binary.BigEndian.Uint32(b[p:])
	return netip.AddrPortFrom(a, uint16(port)), p + 4
}
