package record

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
func be64(v uint64) []byte { return append(be32(uint32(v>>32)), be32(uint32(v))...) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var (
	v4a = netip.MustParseAddrPort("10.0.0.1:4000")
	v4b = netip.MustParseAddrPort("192.168.1.2:10911")
	v6a = netip.MustParseAddrPort("[2001:db8::1]:5000")
	v6b = netip.MustParseAddrPort("[fe80::1:2:3:4]:10911")
)

func goldenMessage() *Message {
	return &Message{
		Topic:                     "T1",
		QueueID:                   3,
		Flag:                      0x11,
		Body:                      []byte("hi"),
		Properties:                []byte("TAGS\x01A\x02"),
		SysFlag:                   SysFlagMultiTags,
		BornTimestamp:             0x0102030405060708,
		BornHost:                  v4a,
		StoreHost:                 v4b,
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 0x77,
	}
}

// goldenV4 is the record for goldenMessage after Stamp(5, 0x1000,
// 0x1122334455667788), written field by field from the reference table.
func goldenV4() []byte {
	return cat(
		be32(102),                       // TOTALSIZE: 91 + body 2 + topic 2 + properties 7
		be32(0xDAA320A7),                // MAGICCODE V1
		be32(0x58932AAC),                // BODYCRC: zlib.crc32(b"hi") & 0x7FFFFFFF
		be32(3),                         // QUEUEID
		be32(0x11),                      // FLAG
		be64(5),                         // QUEUEOFFSET
		be64(0x1000),                    // PHYSICALOFFSET
		be32(0x2),                       // SYSFLAG: multi-tags, both hosts IPv4
		be64(0x0102030405060708),        // BORNTIMESTAMP
		[]byte{10, 0, 0, 1}, be32(4000), // BORNHOST
		be64(0x1122334455667788),            // STORETIMESTAMP
		[]byte{192, 168, 1, 2}, be32(10911), // STOREHOST
		be32(2),               // RECONSUMETIMES
		be64(0x77),            // PREPAREDTRANSACTIONOFFSET
		be32(2), []byte("hi"), // BODY
		[]byte{2}, []byte("T1"), // TOPIC
		[]byte{0, 7}, []byte("TAGS\x01A\x02"), // PROPERTIES
	)
}

func TestGoldenV4(t *testing.T) {
	want := goldenV4()
	if len(want) != 102 {
		t.Fatalf("hand-built golden is %d bytes", len(want))
	}
	got, err := Encode(nil, goldenMessage(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	Stamp(got, 5, 0x1000, 0x1122334455667788)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded record differs\n got %x\nwant %x", got, want)
	}
	if n, err := EncodedSize(goldenMessage()); err != nil || n != 102 {
		t.Fatalf("EncodedSize = %d, %v", n, err)
	}
	// The store timestamp lands at the documented absolute position.
	if !bytes.Equal(got[56:64], be64(0x1122334455667788)) {
		t.Fatalf("STORETIMESTAMP not at 56")
	}
}

func TestGoldenV6Hosts(t *testing.T) {
	m := goldenMessage()
	m.BornHost = v6a
	m.StoreHost = v6b
	m.SysFlag = 0
	want := cat(
		be32(126), be32(0xDAA320A7), be32(0x58932AAC), be32(3), be32(0x11),
		be64(9), be64(0x2000),
		be32(0x30), // SYSFLAG: born IPv6 (0x10) | store IPv6 (0x20)
		be64(0x0102030405060708),
		[]byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, be32(5000),
		be64(42), // STORETIMESTAMP at 68
		[]byte{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 3, 0, 4}, be32(10911),
		be32(2), be64(0x77),
		be32(2), []byte("hi"), []byte{2}, []byte("T1"), []byte{0, 7}, []byte("TAGS\x01A\x02"),
	)
	got, err := Encode(nil, m, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	Stamp(got, 9, 0x2000, 42)
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded record differs\n got %x\nwant %x", got, want)
	}
}

func TestStampPositions(t *testing.T) {
	for _, tc := range []struct {
		born, store netip.AddrPort
		tsPos       int
	}{
		{v4a, v4b, 56},
		{v4a, v6b, 56},
		{v6a, v4b, 68},
		{v6a, v6b, 68},
	} {
		m := goldenMessage()
		m.BornHost, m.StoreHost = tc.born, tc.store
		rec, err := Encode(nil, m, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		before := bytes.Clone(rec)
		Stamp(rec, -2, 0x0A0B0C0D0E0F1011, 0x7EADBEEF01020304)
		// Exactly the three fields changed.
		for i := range rec {
			inQ := i >= 20 && i < 28
			inP := i >= 28 && i < 36
			inT := i >= tc.tsPos && i < tc.tsPos+8
			if !inQ && !inP && !inT && rec[i] != before[i] {
				t.Fatalf("%v/%v: byte %d changed", tc.born, tc.store, i)
			}
		}
		if !bytes.Equal(rec[20:28], be64(0xFFFFFFFFFFFFFFFE)) || !bytes.Equal(rec[28:36], be64(0x0A0B0C0D0E0F1011)) ||
			!bytes.Equal(rec[tc.tsPos:tc.tsPos+8], be64(0x7EADBEEF01020304)) {
			t.Fatalf("%v/%v: stamp wrong: %x", tc.born, tc.store, rec[:tc.tsPos+8])
		}
		r, err := Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		if r.QueueOffset != -2 || r.PhysOffset != 0x0A0B0C0D0E0F1011 || r.StoreTimestamp != 0x7EADBEEF01020304 {
			t.Fatalf("decoded %+v", r.Header)
		}
	}
	rec := goldenV4()
	if n := testing.AllocsPerRun(100, func() { Stamp(rec, 1, 2, 3) }); n != 0 {
		t.Fatalf("Stamp allocates %v", n)
	}
}

func TestRoundTrip(t *testing.T) {
	long := strings.Repeat("t", 200)
	cases := []struct {
		name     string
		mod      func(*Message)
		lim      Limits
		wantFlag int32 // host bits expected in SysFlag
		magic    uint32
	}{
		{"v4/v4", func(m *Message) {}, Limits{}, 0, MagicV1},
		{"v6/v4", func(m *Message) { m.BornHost = v6a }, Limits{}, SysFlagBornHostV6, MagicV1},
		{"v4/v6", func(m *Message) { m.StoreHost = v6b }, Limits{}, SysFlagStoreHostV6, MagicV1},
		{"v6/v6", func(m *Message) { m.BornHost, m.StoreHost = v6a, v6b }, Limits{}, SysFlagBornHostV6 | SysFlagStoreHostV6, MagicV1},
		{"stale v6 bits cleared", func(m *Message) { m.SysFlag |= SysFlagBornHostV6 | SysFlagStoreHostV6 }, Limits{}, 0, MagicV1},
		{"empty body no props", func(m *Message) { m.Body, m.Properties = nil, nil }, Limits{}, 0, MagicV1},
		{"127-byte topic", func(m *Message) { m.Topic = long[:127] }, Limits{}, 0, MagicV1},
		{"V2 topic", func(m *Message) { m.Topic = long }, Limits{MaxTopicLength: 300}, 0, MagicV2},
		{"transaction prepared", func(m *Message) { m.SysFlag = SysFlagTransactionPrepared | SysFlagCompressed }, Limits{}, 0, MagicV1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := goldenMessage()
			tc.mod(m)
			prefix := []byte("prefix")
			buf, err := Encode(prefix, m, tc.lim)
			if err != nil {
				t.Fatal(err)
			}
			if string(buf[:6]) != "prefix" {
				t.Fatal("Encode clobbered dst")
			}
			rec := buf[6:]
			n, _ := EncodedSizeLimits(m, tc.lim)
			if n != len(rec) {
				t.Fatalf("EncodedSize %d, encoded %d", n, len(rec))
			}
			Stamp(rec, 77, 1<<40, 1700000000123)
			// Trailing bytes (the next record) do not disturb.
			withNext := append(bytes.Clone(rec), 0xAA, 0xBB)
			for _, crc := range []bool{false, true} {
				size, info, err := Check(withNext, crc)
				if err != nil || size != len(rec) {
					t.Fatalf("Check(crc=%v) = %d, %v", crc, size, err)
				}
				wantSF := m.SysFlag&^(SysFlagBornHostV6|SysFlagStoreHostV6) | tc.wantFlag
				if info.Blank || info.Size != int32(len(rec)) || info.Topic != m.Topic || info.QueueID != m.QueueID ||
					info.QueueOffset != 77 || info.PhysOffset != 1<<40 || info.SysFlag != wantSF ||
					info.StoreTimestamp != 1700000000123 || info.PreparedTransactionOffset != m.PreparedTransactionOffset ||
					!bytes.Equal(info.Properties, m.Properties) {
					t.Fatalf("info %+v", info)
				}
				wantTags := int64(0)
				if tags, ok := GetProperty(m.Properties, PropertyTags); ok {
					wantTags = TagsHashCode(tags)
				}
				if info.TagsCode != wantTags {
					t.Fatalf("TagsCode %d want %d", info.TagsCode, wantTags)
				}
			}
			r, err := Decode(withNext)
			if err != nil {
				t.Fatal(err)
			}
			want := *m
			want.SysFlag = m.SysFlag&^(SysFlagBornHostV6|SysFlagStoreHostV6) | tc.wantFlag
			got := r.Message()
			if got.Topic != want.Topic || got.QueueID != want.QueueID || got.Flag != want.Flag ||
				!bytes.Equal(got.Body, want.Body) || !bytes.Equal(got.Properties, want.Properties) ||
				got.SysFlag != want.SysFlag || got.BornTimestamp != want.BornTimestamp ||
				got.BornHost != want.BornHost || got.StoreHost != want.StoreHost ||
				got.ReconsumeTimes != want.ReconsumeTimes || got.PreparedTransactionOffset != want.PreparedTransactionOffset {
				t.Fatalf("decoded %+v\nwant %+v", got, want)
			}
			if r.Magic != tc.magic || r.TotalSize != int32(len(rec)) || r.BodyCRC != BodyCRC(m.Body) ||
				r.QueueOffset != 77 || r.PhysOffset != 1<<40 || r.StoreTimestamp != 1700000000123 {
				t.Fatalf("header %+v", r.Header)
			}
			// Re-encoding the decoded message gives the same bytes.
			again, err := Encode(nil, got, tc.lim)
			if err != nil {
				t.Fatal(err)
			}
			Stamp(again, 77, 1<<40, 1700000000123)
			if !bytes.Equal(again, rec) {
				t.Fatal("re-encode differs")
			}
			// Body aliases the input: no copy.
			if len(r.Body) > 0 && &r.Body[0] != &withNext[len(rec)-len(m.Properties)-2-len(m.Topic)-1-len(m.Body)-boolInt(tc.magic == MagicV2)] {
				t.Fatal("Decode copied the body")
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestHostNormalization(t *testing.T) {
	m := goldenMessage()
	m.BornHost = netip.MustParseAddrPort("[::ffff:10.1.2.3]:99")
	m.StoreHost = netip.AddrPort{}
	rec, err := Encode(nil, m, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 102 {
		t.Fatalf("4-in-6 or zero host not stored as IPv4: %d bytes", len(rec))
	}
	r, err := Decode(rec)
	if err != nil {
		t.Fatal(err)
	}
	if r.BornHost != netip.MustParseAddrPort("10.1.2.3:99") || r.StoreHost != netip.MustParseAddrPort("0.0.0.0:0") {
		t.Fatalf("hosts %v %v", r.BornHost, r.StoreHost)
	}
	// A zone is dropped.
	m.BornHost = netip.AddrPortFrom(netip.MustParseAddr("fe80::1%eth0"), 1)
	rec, _ = Encode(nil, m, Limits{})
	r, err = Decode(rec)
	if err != nil || r.BornHost != netip.MustParseAddrPort("[fe80::1]:1") {
		t.Fatalf("zone: %v %v", r, err)
	}
}

func TestLimits(t *testing.T) {
	big := make([]byte, DefaultMaxMessageSize+1)
	cases := []struct {
		name string
		mod  func(*Message)
		lim  Limits
		want error
	}{
		{"empty topic", func(m *Message) { m.Topic = "" }, Limits{}, ErrInvalid},
		{"128-byte topic default", func(m *Message) { m.Topic = strings.Repeat("x", 128) }, Limits{}, ErrInvalid},
		{"topic above raised limit", func(m *Message) { m.Topic = strings.Repeat("x", 301) }, Limits{MaxTopicLength: 300}, ErrInvalid},
		{"topic above V2 max", func(m *Message) { m.Topic = strings.Repeat("x", 32768) }, Limits{MaxTopicLength: 1 << 20}, ErrInvalid},
		{"body above default", func(m *Message) { m.Body = big }, Limits{}, ErrTooLarge},
		{"body above custom", func(m *Message) { m.Body = big[:1001] }, Limits{MaxMessageSize: 1000}, ErrTooLarge},
		{"properties too long", func(m *Message) { m.Properties = make([]byte, MaxPropertiesSize+1) }, Limits{}, ErrPropertiesTooLong},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := goldenMessage()
			tc.mod(m)
			dst := []byte("keep")
			out, err := Encode(dst, m, tc.lim)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if string(out) != "keep" {
				t.Fatal("dst changed on error")
			}
			if _, err := EncodedSizeLimits(m, tc.lim); !errors.Is(err, tc.want) {
				t.Fatalf("EncodedSize err %v", err)
			}
		})
	}
	// At the limits exactly: accepted.
	m := goldenMessage()
	m.Body = big[:DefaultMaxMessageSize]
	m.Properties = bytes.Repeat([]byte("k"), MaxPropertiesSize)
	rec, err := Encode(nil, m, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Check(rec, true); err != nil {
		t.Fatal(err)
	}
	m = goldenMessage()
	m.Body = big[:1000]
	if _, err := Encode(nil, m, Limits{MaxMessageSize: 1000}); err != nil {
		t.Fatal(err)
	}
	// Error text carries the sizes.
	m.Body = big[:1001]
	_, err = Encode(nil, m, Limits{MaxMessageSize: 1000})
	if err == nil || !strings.Contains(err.Error(), "1001") || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("error lacks sizes: %v", err)
	}
}

func TestEncodeAllocs(t *testing.T) {
	m := goldenMessage()
	m.Body = make([]byte, 128)
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(200, func() {
		var err error
		if _, err = Encode(buf[:0], m, Limits{}); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Encode into a big enough buffer allocates %v", n)
	}
	if n := testing.AllocsPerRun(200, func() { _, _ = Encode(nil, m, Limits{}) }); n != 1 {
		t.Fatalf("Encode into nil allocates %v, want 1", n)
	}
	rec, _ := Encode(nil, m, Limits{})
	// Only the topic copy: the properties hold TAGS but no KEYS or UNIQ_KEY.
	if n := testing.AllocsPerRun(200, func() { _, _, _ = Check(rec, false) }); n != 1 {
		t.Fatalf("Check allocates %v, want 1", n)
	}
}

func TestBlank(t *testing.T) {
	seg := make([]byte, 64)
	PutBlank(seg, 64)
	if !bytes.Equal(seg[:8], cat(be32(64), be32(0xCBD43194))) {
		t.Fatalf("blank header %x", seg[:8])
	}
	size, info, err := Check(seg, true)
	if err != nil || size != 64 || !info.Blank || info.Size != 64 {
		t.Fatalf("Check blank = %d %+v %v", size, info, err)
	}
	if info.NeedsConsumeQueueEntry() || info.NeedsIndex() {
		t.Fatal("blank needs dispatch")
	}
	// Partial padding: incomplete, but the caller still learns it is BLANK.
	size, info, err = Check(seg[:20], false)
	if !errors.Is(err, ErrIncomplete) || size != 64 || !info.Blank {
		t.Fatalf("partial blank = %d %+v %v", size, info, err)
	}
	// Minimum padding.
	PutBlank(seg, BlankSize)
	if size, info, err := Check(seg[:8], false); err != nil || size != 8 || !info.Blank {
		t.Fatalf("min blank = %d %+v %v", size, info, err)
	}
	// Too small a padding is corrupt.
	copy(seg, be32(7))
	if _, _, err := Check(seg, false); !errors.Is(err, ErrBadSize) {
		t.Fatalf("blank size 7: %v", err)
	}
	copy(seg, be32(0xFFFFFFF0))
	if _, _, err := Check(seg, false); !errors.Is(err, ErrBadSize) {
		t.Fatalf("blank size negative: %v", err)
	}
	PutBlank(seg, 64)
	if _, err := Decode(seg); !errors.Is(err, ErrBlank) {
		t.Fatalf("Decode blank: %v", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("PutBlank(4) did not panic")
			}
		}()
		PutBlank(seg, 4)
	}()
}

// TestSegmentWalk walks a segment the way recovery does: records, a BLANK,
// then the zeros past it.
func TestSegmentWalk(t *testing.T) {
	const segSize = 1024
	seg := make([]byte, segSize)
	var off int
	var want []int64
	for i := 0; ; i++ {
		m := goldenMessage()
		m.Body = bytes.Repeat([]byte{byte(i)}, 30+i*7)
		n, _ := EncodedSize(m)
		if off+n+BlankSize > segSize {
			PutBlank(seg[off:], int32(segSize-off))
			break
		}
		rec, _ := Encode(seg[off:off], m, Limits{})
		Stamp(rec, int64(i), int64(off), 1)
		want = append(want, int64(off))
		off += n
	}
	var got []int64
	for p := 0; p < segSize; {
		size, info, err := Check(seg[p:], true)
		if err != nil {
			t.Fatalf("at %d: %v", p, err)
		}
		if info.Blank {
			if p+size != segSize {
				t.Fatalf("blank at %d pads %d, segment ends at %d", p, size, segSize)
			}
			break
		}
		if info.PhysOffset != int64(p) {
			t.Fatalf("PhysOffset %d at %d", info.PhysOffset, p)
		}
		got = append(got, info.PhysOffset)
		p += size
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("walk %v want %v", got, want)
	}
	// Past the written data, a fresh segment reads as zeroed.
	if _, _, err := Check(make([]byte, 100), false); !errors.Is(err, ErrZeroed) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("zeros: %v", err)
	}
}

func TestInfoDispatchFields(t *testing.T) {
	m := goldenMessage()
	m.Properties = EncodeProperties(map[string]string{
		PropertyTags:    "TagA",
		PropertyKeys:    "k1  k2 ",
		PropertyUniqKey: "7F0000010001",
		"OTHER":         "x",
	})
	rec, _ := Encode(nil, m, Limits{})
	_, info, err := Check(rec, false)
	if err != nil {
		t.Fatal(err)
	}
	if info.TagsCode != 2598919 || info.Keys != "k1  k2 " || info.UniqKey != "7F0000010001" {
		t.Fatalf("info %+v", info)
	}
	var keys []string
	for k := range IndexKeys(info.Keys) {
		keys = append(keys, k)
	}
	if fmt.Sprint(keys) != "[k1 k2]" {
		t.Fatalf("IndexKeys %q", keys)
	}
	for _, tc := range []struct {
		sf       int32
		cq, indx bool
	}{
		{SysFlagTransactionNot, true, true},
		{SysFlagTransactionPrepared, false, true},
		{SysFlagTransactionCommit, true, true},
		{SysFlagTransactionRollback, false, false},
		{SysFlagTransactionRollback | SysFlagCompressed, false, false},
	} {
		i := Info{SysFlag: tc.sf}
		if i.NeedsConsumeQueueEntry() != tc.cq || i.NeedsIndex() != tc.indx {
			t.Fatalf("sysflag %x: cq %v index %v", tc.sf, i.NeedsConsumeQueueEntry(), i.NeedsIndex())
		}
	}
	// No keys: empty strings, TagsCode 0.
	m.Properties = nil
	rec, _ = Encode(nil, m, Limits{})
	_, info, _ = Check(rec, false)
	if info.TagsCode != 0 || info.Keys != "" || info.UniqKey != "" || len(info.Properties) != 0 {
		t.Fatalf("info %+v", info)
	}
}

// TestCheckerInterns: a Checker gives Check's results, reuses one string
// per topic name (no allocation for a run of records of known topics) and
// fills keys only when asked.
func TestCheckerInterns(t *testing.T) {
	var recs [][]byte
	for i, topic := range []string{"a", "b", "a", "c", "b"} {
		m := &Message{Topic: topic, Body: []byte("body"), Properties: EncodeProperties(map[string]string{"KEYS": "k", "UNIQ_KEY": "u", "TAGS": "t"})}
		b, err := Encode(nil, m, Limits{})
		if err != nil {
			t.Fatal(i, err)
		}
		recs = append(recs, b)
	}
	for _, keys := range []bool{false, true} {
		c := Checker{Keys: keys}
		for i, b := range recs {
			_, want, err := Check(b, true)
			if err != nil {
				t.Fatal(err)
			}
			_, got, err := c.Check(b, true)
			if err != nil {
				t.Fatal(err)
			}
			if !keys {
				want.Keys, want.UniqKey = "", ""
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("record %d keys=%v: Checker %+v, Check %+v", i, keys, got, want)
			}
		}
	}
	c := Checker{}
	for _, b := range recs {
		c.Check(b, false) // learn the names
	}
	if n := testing.AllocsPerRun(100, func() {
		for _, b := range recs {
			c.Check(b, false)
		}
	}); n != 0 {
		t.Fatalf("Checker allocated %v times per pass over known topics", n)
	}
}
