package record

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"unicode/utf8"
)

const upperHex = "0123456789ABCDEF"

// OffsetMsgID returns RocketMQ's offset message id for a record: the
// uppercase hex of the store host's address (4 bytes for IPv4 and
// IPv4-mapped addresses, 16 for IPv6), its port as an int32 and physOffset as
// an int64: 32 characters for IPv4, 56 for IPv6. The address is normalized
// as Encode stores it (the zero AddrPort gives 0.0.0.0:0).
func OffsetMsgID(storeHost netip.AddrPort, physOffset int64) string {
	var raw [28]byte
	a, v6 := hostAddr(storeHost)
	n := 0
	if v6 {
		b := a.As16()
		n = copy(raw[:], b[:])
	} else {
		b := a.As4()
		n = copy(raw[:], b[:])
	}
	binary.BigEndian.PutUint32(raw[n:], uint32(storeHost.Port()))
	binary.BigEndian.PutUint64(raw[n+4:], uint64(physOffset))
	n += 12
	var out [56]byte
	for i, c := range raw[:n] {
		out[2*i] = upperHex[c>>4]
		out[2*i+1] = upperHex[c&0xF]
	}
	return string(out[:2*n])
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// ParseOffsetMsgID parses an offset message id (either hex case) into the
// store host and the physical offset. It returns an error wrapping
// ErrBadMsgID (and so ErrInvalid) when id is not 32 or 56 hex characters or
// the port is above 65535.
func ParseOffsetMsgID(id string) (netip.AddrPort, int64, error) {
	if len(id) != 32 && len(id) != 56 {
		return netip.AddrPort{}, 0, fmt.Errorf("record: message id of %d characters, want 32 or 56: %w", len(id), ErrBadMsgID)
	}
	var raw [28]byte
	for i := 0; i < len(id); i += 2 {
		hi, ok1 := unhex(id[i])
		lo, ok2 := unhex(id[i+1])
		if !ok1 || !ok2 {
			return netip.AddrPort{}, 0, fmt.Errorf("record: message id %q: non-hex character at %d: %w", id, i, ErrBadMsgID)
		}
		raw[i/2] = hi<<4 | lo
	}
	var a netip.Addr
	n := 4
	if len(id) == 56 {
		a = netip.AddrFrom16([16]byte(raw[:16]))
		n = 16
	} else {
		a = netip.AddrFrom4([4]byte(raw[:4]))
	}
	port := binary.BigEndian.Uint32(raw[n:])
	if port > 0xFFFF {
		return netip.AddrPort{}, 0, fmt.Errorf("record: message id %q: port %d: %w", id, port, ErrBadMsgID)
	}
	off := int64(binary.BigEndian.Uint64(raw[n+4:]))
	return netip.AddrPortFrom(a, uint16(port)), off, nil
}

// JavaHashCode returns Java's String.hashCode() of s: the sum of
// s[i]*31^(n-1-i) over the UTF-16 code units of s, with int32 wrap-around.
// s is read as UTF-8; each invalid byte counts as one U+FFFD (Java's
// decoder may group some malformed sequences into a single U+FFFD, so the
// two can differ on invalid UTF-8 only).
func JavaHashCode(s string) int32 {
	var h int32
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
		} else {
			h = 31*h + int32(r)
		}
	}
	return h
}

// TagsHashCode returns the consume queue tagsCode for a TAGS value: Java's
// String.hashCode() (JavaHashCode) sign-extended to int64, as RocketMQ's
// MessageExtBrokerInner.tagsString2tagsCode. The empty tag gives 0.
func TagsHashCode(tag string) int64 { return int64(JavaHashCode(tag)) }

func tagsCodeBytes(tag []byte) int64 {
	var h int32
	for i := 0; i < len(tag); {
		c := tag[i]
		if c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(tag[i:])
		i += size
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
		} else {
			h = 31*h + int32(r)
		}
	}
	return int64(h)
}
