package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// stampedRecords returns a few valid records covering the layouts.
func stampedRecords(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, mod := range map[string]func(*Message){
		"v4":      func(m *Message) {},
		"v6born":  func(m *Message) { m.BornHost = v6a },
		"v6store": func(m *Message) { m.StoreHost = v6b },
		"v6both":  func(m *Message) { m.BornHost, m.StoreHost = v6a, v6b },
	} {
		m := goldenMessage()
		m.Body = []byte("a body of some length")
		mod(m)
		rec, err := Encode(nil, m, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		Stamp(rec, 12, 3456, 789)
		out[name] = rec
	}
	m := goldenMessage()
	m.Topic = string(bytes.Repeat([]byte("L"), 140))
	rec, err := Encode(nil, m, Limits{MaxTopicLength: 200})
	if err != nil {
		t.Fatal(err)
	}
	out["v2"] = rec
	return out
}

func TestCheckTruncatedEveryLength(t *testing.T) {
	for name, rec := range stampedRecords(t) {
		for n := 0; n < len(rec); n++ {
			size, _, err := Check(rec[:n], true)
			if !errors.Is(err, ErrIncomplete) {
				t.Fatalf("%s truncated to %d: %v", name, n, err)
			}
			if n >= 4 && size != len(rec) {
				t.Fatalf("%s truncated to %d: claimed size %d, want %d", name, n, size, len(rec))
			}
			if n < 4 && size != 0 {
				t.Fatalf("%s truncated to %d: size %d", name, n, size)
			}
			if _, err := Decode(rec[:n]); !errors.Is(err, ErrIncomplete) {
				t.Fatalf("Decode %s truncated to %d: %v", name, n, err)
			}
		}
	}
}

// fieldSpan describes which bytes of a record are guarded by Check.
type fieldSpan struct {
	name    string
	from    int
	to      int   // exclusive
	guarded bool  // a flipped bit there must be reported
	want    error // the specific error, when guarded (nil: any ErrCorrupt)
}

func spansOf(rec []byte) []fieldSpan {
	sf := int32(binary.BigEndian.Uint32(rec[36:]))
	bornLen, storeLen := 8, 8
	if sf&SysFlagBornHostV6 != 0 {
		bornLen = 20
	}
	if sf&SysFlagStoreHostV6 != 0 {
		storeLen = 20
	}
	p := 48
	s := []fieldSpan{
		{"TOTALSIZE", 0, 4, true, nil},
		{"MAGICCODE", 4, 8, true, ErrBadMagic},
		{"BODYCRC", 8, 12, true, ErrBadCRC},
		{"QUEUEID", 12, 16, false, nil},
		{"FLAG", 16, 20, false, nil},
		{"QUEUEOFFSET", 20, 28, false, nil},
		{"PHYSICALOFFSET", 28, 36, false, nil},
		{"SYSFLAG", 36, 39, false, nil},
		{"SYSFLAG low byte", 39, 40, false, nil}, // bits 4-5 handled below
		{"BORNTIMESTAMP", 40, 48, false, nil},
		{"BORNHOST addr", p, p + bornLen - 4, false, nil},
		{"BORNHOST port high", p + bornLen - 4, p + bornLen - 2, true, ErrBadField},
		{"BORNHOST port low", p + bornLen - 2, p + bornLen, false, nil},
	}
	p += bornLen
	s = append(s, fieldSpan{"STORETIMESTAMP", p, p + 8, false, nil})
	p += 8
	s = append(s,
		fieldSpan{"STOREHOST addr", p, p + storeLen - 4, false, nil},
		fieldSpan{"STOREHOST port high", p + storeLen - 4, p + storeLen - 2, true, ErrBadField},
		fieldSpan{"STOREHOST port low", p + storeLen - 2, p + storeLen, false, nil},
	)
	p += storeLen
	s = append(s, fieldSpan{"RECONSUMETIMES", p, p + 4, false, nil}, fieldSpan{"PREPAREDTX", p + 4, p + 12, false, nil})
	p += 12
	bodyLen := int(binary.BigEndian.Uint32(rec[p:]))
	s = append(s, fieldSpan{"BODYLEN", p, p + 4, true, nil}, fieldSpan{"BODY", p + 4, p + 4 + bodyLen, true, ErrBadCRC})
	p += 4 + bodyLen
	tls := 1
	if binary.BigEndian.Uint32(rec[4:]) == MagicV2 {
		tls = 2
	}
	topicLen := int(rec[p])
	if tls == 2 {
		topicLen = int(binary.BigEndian.Uint16(rec[p:]))
	}
	s = append(s, fieldSpan{"TOPICLEN", p, p + tls, true, nil}, fieldSpan{"TOPIC", p + tls, p + tls + topicLen, false, nil})
	p += tls + topicLen
	s = append(s, fieldSpan{"PROPLEN", p, p + 2, true, nil}, fieldSpan{"PROPERTIES", p + 2, len(rec), false, nil})
	return s
}

// TestCheckFlipEveryBit flips every bit of every record and checks that
// Check reports exactly the guarded fields, with the right error, and
// accepts (with the new value) flips of unguarded fields.
func TestCheckFlipEveryBit(t *testing.T) {
	for name, rec := range stampedRecords(t) {
		spans := spansOf(rec)
		if last := spans[len(spans)-1]; last.to != len(rec) {
			t.Fatalf("%s: spans end at %d, record at %d", name, last.to, len(rec))
		}
		// Append a following record so a grown TOTALSIZE has bytes to read.
		buf := append(bytes.Clone(rec), rec...)
		for _, sp := range spans {
			for i := sp.from; i < sp.to; i++ {
				for bit := 0; bit < 8; bit++ {
					buf[i] ^= 1 << bit
					size, _, err := Check(buf, true)
					_, derr := Decode(buf)
					hostBit := i == 39 && (bit == 4 || bit == 5)
					switch {
					case sp.guarded || hostBit:
						if !errors.Is(err, ErrCorrupt) {
							t.Fatalf("%s: flip %s byte %d bit %d: err %v, want corrupt", name, sp.name, i, bit, err)
						}
						if sp.want != nil && !errors.Is(err, sp.want) {
							t.Fatalf("%s: flip %s byte %d bit %d: err %v, want %v", name, sp.name, i, bit, err, sp.want)
						}
						if size != 0 {
							t.Fatalf("%s: corrupt with size %d", name, size)
						}
						if !errors.Is(derr, ErrCorrupt) {
							t.Fatalf("%s: Decode flip %s: %v", name, sp.name, derr)
						}
					default:
						if err != nil || size != len(rec) || derr != nil {
							t.Fatalf("%s: flip %s byte %d bit %d: %d %v / %v", name, sp.name, i, bit, size, err, derr)
						}
					}
					// Without CRC checking, body and CRC flips pass.
					if sp.want == ErrBadCRC {
						if _, _, err := Check(buf, false); err != nil {
							t.Fatalf("%s: flip %s with checkCRC=false: %v", name, sp.name, err)
						}
					}
					buf[i] ^= 1 << bit
				}
			}
		}
	}
}

func TestCheckSpecificCorruptions(t *testing.T) {
	rec := stampedRecords(t)["v4"]
	be := binary.BigEndian
	type mut func(b []byte)
	bodyLenPos := fixedV4
	bodyLen := int(be.Uint32(rec[bodyLenPos:]))
	topicLenPos := bodyLenPos + 4 + bodyLen
	propLenPos := topicLenPos + 1 + int(rec[topicLenPos])
	cases := []struct {
		name string
		m    mut
		want error
	}{
		{"zeroed", func(b []byte) { clear(b) }, ErrZeroed},
		{"zero total, rest intact", func(b []byte) { be.PutUint32(b, 0) }, ErrZeroed},
		{"negative total", func(b []byte) { be.PutUint32(b, 0x80000000) }, ErrBadSize},
		{"total below minimum", func(b []byte) { be.PutUint32(b, MinRecordSize-1) }, ErrBadSize},
		{"total above maximum", func(b []byte) { be.PutUint32(b, MaxRecordSize+1) }, ErrBadSize},
		{"total one more", func(b []byte) { be.PutUint32(b, uint32(len(rec)+1)) }, ErrLengthMismatch},
		{"total one less", func(b []byte) { be.PutUint32(b, uint32(len(rec)-1)) }, ErrLengthMismatch},
		{"magic zero", func(b []byte) { be.PutUint32(b[4:], 0) }, ErrBadMagic},
		{"magic client batch", func(b []byte) { be.PutUint32(b[4:], 0xDAA320A0) }, ErrBadMagic},
		{"magic V2 on V1 body", func(b []byte) { be.PutUint32(b[4:], MagicV2) }, ErrCorrupt},
		{"bad crc", func(b []byte) { b[8] ^= 0x40 }, ErrBadCRC},
		{"body byte", func(b []byte) { b[bodyLenPos+4] ^= 1 }, ErrBadCRC},
		{"negative body length", func(b []byte) { be.PutUint32(b[bodyLenPos:], 0xFFFFFFFF) }, ErrBadField},
		{"body length past total", func(b []byte) { be.PutUint32(b[bodyLenPos:], uint32(len(rec))) }, ErrLengthMismatch},
		{"topic length 0", func(b []byte) { b[topicLenPos] = 0 }, ErrBadField},
		{"topic length 200 in V1", func(b []byte) { b[topicLenPos] = 200 }, ErrBadField},
		{"topic length +1", func(b []byte) { b[topicLenPos]++ }, ErrLengthMismatch},
		{"negative properties length", func(b []byte) { be.PutUint16(b[propLenPos:], 0x8001) }, ErrBadField},
		{"properties length +1", func(b []byte) { be.PutUint16(b[propLenPos:], be.Uint16(b[propLenPos:])+1) }, ErrLengthMismatch},
		{"born port 65536", func(b []byte) { be.PutUint32(b[52:], 65536) }, ErrBadField},
		{"store port -1", func(b []byte) { be.PutUint32(b[68:], 0xFFFFFFFF) }, ErrBadField},
		{"born host flagged IPv6", func(b []byte) { b[39] |= 0x10 }, ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := append(bytes.Clone(rec), make([]byte, 64)...)
			tc.m(b)
			size, info, err := Check(b, true)
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if size != 0 || info.Size != 0 || info.Topic != "" || info.Blank {
				t.Fatalf("corrupt returned size %d info %+v", size, info)
			}
			if _, err := Decode(b); !errors.Is(err, tc.want) {
				t.Fatalf("Decode err %v", err)
			}
		})
	}
	// A corrupt field visible before the end of a short buffer is reported
	// as corrupt, not incomplete: recovery must not wait for more bytes.
	b := bytes.Clone(rec[:bodyLenPos+4])
	be.PutUint32(b[bodyLenPos:], 0xFFFFFFFF)
	if _, _, err := Check(b, false); !errors.Is(err, ErrBadField) {
		t.Fatalf("short buffer with bad body length: %v", err)
	}
	b = bytes.Clone(rec[:8])
	be.PutUint32(b[4:], 0x12345678)
	if _, _, err := Check(b, false); !errors.Is(err, ErrBadMagic) {
		t.Fatalf("8 bytes with bad magic: %v", err)
	}
}

func TestErrorsDistinct(t *testing.T) {
	corrupt := []error{ErrZeroed, ErrBadMagic, ErrBadSize, ErrLengthMismatch, ErrBadField, ErrBadCRC}
	for i, a := range corrupt {
		if !errors.Is(a, ErrCorrupt) || errors.Is(a, ErrIncomplete) || errors.Is(a, ErrInvalid) {
			t.Fatalf("%v misclassified", a)
		}
		for j, b := range corrupt {
			if i != j && errors.Is(a, b) {
				t.Fatalf("%v is %v", a, b)
			}
		}
	}
	for _, e := range []error{ErrMalformedProperties, ErrBadMsgID, ErrBadBatch} {
		if !errors.Is(e, ErrInvalid) || errors.Is(e, ErrCorrupt) {
			t.Fatalf("%v misclassified", e)
		}
	}
}
