package record

import (
	"encoding/binary"
	"fmt"
)

// ClientMessage is one message of a client batch body. Body and Properties
// alias the batch body.
type ClientMessage struct {
	Flag       int32
	Body       []byte
	Properties []byte
}

// DecodeClientBatch splits the body of a SEND_BATCH_MESSAGE (320) request:
// the concatenation of the producer's per-message encodings
//
//	TOTALSIZE int32 | MAGICCODE int32 | BODYCRC int32 | FLAG int32 |
//	BODYLEN int32 | BODY | PROPLEN int16 | PROPERTIES
//
// (RocketMQ MessageDecoder.encodeMessage; rocketmq-client-go
// Message.Marshal). Both clients write 0 for MAGICCODE and BODYCRC, so they
// are ignored. TOTALSIZE must equal 22 + BODYLEN + PROPLEN.
//
// It returns one ClientMessage per message, in order, aliasing body, with a
// single allocation. The error wraps ErrBadBatch (and so ErrInvalid) for an
// empty body, a truncated message, a negative length or a TOTALSIZE that
// disagrees with the lengths. Size limits (body, properties) are the
// caller's to apply.
func DecodeClientBatch(body []byte) ([]ClientMessage, error) {
	if len(body) == 0 {
		return nil, fmt.Errorf("record: client batch: empty: %w", ErrBadBatch)
	}
	count := 0
	for p := 0; p < len(body); count++ {
		_, _, _, next, err := clientMessageAt(body, p)
		if err != nil {
			return nil, fmt.Errorf("record: client batch message %d: %w", count, err)
		}
		p = next
	}
	out := make([]ClientMessage, 0, count)
	for p := 0; p < len(body); {
		flag, b, props, next, _ := clientMessageAt(body, p)
		out = append(out, ClientMessage{Flag: flag, Body: b, Properties: props})
		p = next
	}
	return out, nil
}

// clientMessageAt decodes the batch message at body[p:].
func clientMessageAt(body []byte, p int) (flag int32, b, props []byte, next int, err error) {
	be := binary.BigEndian
	rest := len(body) - p
	if rest < clientBatchHeader+2 {
		return 0, nil, nil, 0, fmt.Errorf("at %d: %d bytes left, need %d: %w", p, rest, clientBatchHeader+2, ErrBadBatch)
	}
	total := int32(be.Uint32(body[p:]))
	flag = int32(be.Uint32(body[p+12:]))
	bodyLen := int32(be.Uint32(body[p+16:]))
	if bodyLen < 0 || int(bodyLen) > rest-clientBatchHeader-2 {
		return 0, nil, nil, 0, fmt.Errorf("at %d: BODYLEN %d with %d bytes left: %w", p, bodyLen, rest, ErrBadBatch)
	}
	bp := p + clientBatchHeader
	pp := bp + int(bodyLen)
	propLen := int16(be.Uint16(body[pp:]))
	if propLen < 0 || int(propLen) > len(body)-pp-2 {
		return 0, nil, nil, 0, fmt.Errorf("at %d: PROPLEN %d with %d bytes left: %w", p, propLen, len(body)-pp-2, ErrBadBatch)
	}
	if want := clientBatchHeader + int(bodyLen) + 2 + int(propLen); int(total) != want {
		return 0, nil, nil, 0, fmt.Errorf("at %d: TOTALSIZE %d, lengths add up to %d: %w", p, total, want, ErrBadBatch)
	}
	end := pp + 2 + int(propLen)
	return flag, body[bp:pp:pp], body[pp+2 : end : end], end, nil
}

// AppendClientBatch appends the client batch encoding of msgs to dst, as
// the producers do (MAGICCODE and BODYCRC 0). It is the inverse of
// DecodeClientBatch, for tests and tools. Precondition: every Properties is
// at most MaxPropertiesSize bytes; AppendClientBatch panics otherwise.
func AppendClientBatch(dst []byte, msgs []ClientMessage) []byte {
	be := binary.BigEndian
	for _, m := range msgs {
		if len(m.Properties) > MaxPropertiesSize {
			panic(fmt.Sprintf("record: AppendClientBatch: properties of %d bytes", len(m.Properties)))
		}
		total := clientBatchHeader + len(m.Body) + 2 + len(m.Properties)
		dst = be.AppendUint32(dst, uint32(total))
		dst = be.AppendUint32(dst, 0)
		dst = be.AppendUint32(dst, 0)
		dst = be.AppendUint32(dst, uint32(m.Flag))
		dst = be.AppendUint32(dst, uint32(len(m.Body)))
		dst = append(dst, m.Body...)
		dst = be.AppendUint16(dst, uint16(len(m.Properties)))
		dst = append(dst, m.Properties...)
	}
	return dst
}
