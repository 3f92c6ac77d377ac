package record

import (
	"bytes"
	"errors"
	"maps"
	"net/netip"
	"reflect"
	"testing"
)

// seedRecords returns valid records and segments for the fuzz corpora.
func seedRecords() [][]byte {
	var out [][]byte
	for _, hosts := range [][2]netip.AddrPort{{v4a, v4b}, {v6a, v4b}, {v4a, v6b}, {v6a, v6b}} {
		m := goldenMessage()
		m.BornHost, m.StoreHost = hosts[0], hosts[1]
		m.Properties = []byte("UNIQ_KEY\x017F00\x02KEYS\x01a b\x02TAGS\x01TagA\x02")
		rec, _ := Encode(nil, m, Limits{})
		Stamp(rec, 1, 2, 3)
		out = append(out, rec)
	}
	m := goldenMessage()
	m.Topic = string(bytes.Repeat([]byte("v"), 130))
	rec, _ := Encode(nil, m, Limits{MaxTopicLength: 200})
	out = append(out, rec)
	blank := make([]byte, 16)
	PutBlank(blank, 16)
	out = append(out, blank, append(bytes.Clone(out[0]), blank...), make([]byte, 8))
	return out
}

// FuzzCheck: Check never panics, never claims a size beyond b except with
// ErrIncomplete, classifies every error, and agrees with Decode.
func FuzzCheck(f *testing.F) {
	for _, s := range seedRecords() {
		f.Add(s, true)
		f.Add(s, false)
	}
	var c Checker // shared across inputs, as dispatch shares one across records
	c.Keys = true
	f.Fuzz(func(t *testing.T, b []byte, crc bool) {
		size, info, err := Check(b, crc)
		// A Checker answers exactly what Check answers.
		cs, ci, cerr := c.Check(b, crc)
		if cs != size || !reflect.DeepEqual(ci, info) || (cerr == nil) != (err == nil) || (err != nil && cerr.Error() != err.Error()) {
			t.Fatalf("Checker.Check = %d %+v %v, Check = %d %+v %v", cs, ci, cerr, size, info, err)
		}
		if err != nil {
			inc, cor := errors.Is(err, ErrIncomplete), errors.Is(err, ErrCorrupt)
			if inc == cor {
				t.Fatalf("error neither or both incomplete and corrupt: %v", err)
			}
			if cor && size != 0 {
				t.Fatalf("corrupt with size %d", size)
			}
			if inc && size != 0 && size <= len(b) {
				t.Fatalf("incomplete but size %d <= len %d", size, len(b))
			}
			if inc && size == 0 && len(b) >= 8 {
				t.Fatalf("incomplete with unknown size at %d bytes", len(b))
			}
			return
		}
		if size > len(b) || size < BlankSize || int(info.Size) != size {
			t.Fatalf("size %d, info.Size %d, len %d", size, info.Size, len(b))
		}
		if info.Blank {
			return
		}
		// A record that checks decodes (when CRC was verified) with the
		// same fields, and survives a re-encode unchanged when its hosts are
		// in normalized form.
		r, derr := Decode(b)
		if crc && derr != nil {
			t.Fatalf("Check ok, Decode %v", derr)
		}
		if derr != nil {
			if !errors.Is(derr, ErrBadCRC) {
				t.Fatalf("Check(crc=false) ok, Decode %v", derr)
			}
			return
		}
		if r.TotalSize != info.Size || r.Topic != info.Topic || r.QueueOffset != info.QueueOffset ||
			r.PhysOffset != info.PhysOffset || r.StoreTimestamp != info.StoreTimestamp || !bytes.Equal(r.Properties, info.Properties) {
			t.Fatalf("Decode %+v disagrees with Check %+v", r.Header, info)
		}
		normal := func(ap netip.AddrPort) bool { return !ap.Addr().Is4In6() }
		if r.Magic == MagicV1 && normal(r.BornHost) && normal(r.StoreHost) {
			again, err := Encode(nil, r.Message(), Limits{MaxMessageSize: len(r.Body)})
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			Stamp(again, r.QueueOffset, r.PhysOffset, r.StoreTimestamp)
			if !bytes.Equal(again, b[:size]) {
				t.Fatalf("re-encode differs\n got %x\nwant %x", again, b[:size])
			}
		}
	})
}

// FuzzDecode: Decode never panics; on success its slices lie inside b and
// the record checks.
func FuzzDecode(f *testing.F) {
	for _, s := range seedRecords() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrIncomplete) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrBlank) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if int(r.TotalSize) > len(b) || len(r.Body)+len(r.Properties)+len(r.Topic) > int(r.TotalSize) {
			t.Fatalf("sizes out of range: %+v", r.Header)
		}
		if _, _, err := Check(b, true); err != nil {
			t.Fatalf("Decode ok, Check %v", err)
		}
		if BodyCRC(r.Body) != r.BodyCRC {
			t.Fatal("CRC not verified")
		}
	})
}

// FuzzParseProperties: parsing never panics; a parsed string re-encodes to
// an equivalent one, and GetProperty agrees with the map.
func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{"", "a\x011\x02", "a\x011", "a\x011\x02b\x012\x02", "a\x01\x02", "\x02", "a", "a\x011\x012",
		"UNIQ_KEY\x017F00\x02KEYS\x01k1 k2\x02TAGS\x01*\x02", "a\x011\x02a\x012\x02"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := ParseProperties(raw)
		if err != nil {
			if !errors.Is(err, ErrMalformedProperties) {
				t.Fatalf("unclassified %v", err)
			}
			// GetProperty must still be safe.
			_, _ = GetProperty(raw, "a")
			_, _, _ = dispatchProps(raw)
			return
		}
		for k, v := range m {
			if g, ok := GetProperty(raw, k); !ok || g != v {
				t.Fatalf("GetProperty(%q) = %q %v, map has %q", k, g, ok, v)
			}
		}
		again, err := ParseProperties(EncodeProperties(m))
		if err != nil || !maps.Equal(again, m) {
			t.Fatalf("re-encode: %v %v", again, err)
		}
	})
}

// FuzzDecodeClientBatch: never panics; on success the messages tile the
// body exactly and re-encode to it.
func FuzzDecodeClientBatch(f *testing.F) {
	f.Add(AppendClientBatch(nil, []ClientMessage{{Flag: 1, Body: []byte("hello"), Properties: []byte("TAGS\x01A\x02")}}))
	f.Add(AppendClientBatch(nil, []ClientMessage{{Body: nil}, {Flag: -1, Body: []byte{0, 1, 2}}, {Properties: []byte("k\x01v")}}))
	f.Add([]byte{})
	f.Add(make([]byte, 22))
	f.Fuzz(func(t *testing.T, body []byte) {
		msgs, err := DecodeClientBatch(body)
		if err != nil {
			if !errors.Is(err, ErrBadBatch) || msgs != nil {
				t.Fatalf("%v %v", msgs, err)
			}
			return
		}
		if len(msgs) == 0 {
			t.Fatal("success with no messages")
		}
		again := AppendClientBatch(nil, msgs)
		// Magic and CRC are ignored on input and written as 0; compare
		// everything else.
		if len(again) != len(body) {
			t.Fatalf("re-encoded %d bytes, input %d", len(again), len(body))
		}
		for p := 0; p < len(body); {
			n := int(be32int(body[p:]))
			if !bytes.Equal(again[p:p+4], body[p:p+4]) || !bytes.Equal(again[p+12:p+n], body[p+12:p+n]) {
				t.Fatalf("message at %d differs", p)
			}
			p += n
		}
	})
}

func be32int(b []byte) int32 {
	return int32(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
}
