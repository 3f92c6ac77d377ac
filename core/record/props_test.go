package record

import (
	"bytes"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestParseProperties(t *testing.T) {
	good := []struct {
		raw  string
		want map[string]string
	}{
		{"", map[string]string{}},
		{"a\x011\x02", map[string]string{"a": "1"}},
		{"a\x011", map[string]string{"a": "1"}}, // no final separator (Java 5 client)
		{"a\x011\x02b\x012\x02", map[string]string{"a": "1", "b": "2"}},
		{"a\x011\x02b\x012", map[string]string{"a": "1", "b": "2"}},
		{"a\x01\x02", map[string]string{"a": ""}},             // empty value
		{"a\x011\x02a\x012\x02", map[string]string{"a": "2"}}, // last wins
		{"UNIQ_KEY\x017F00\x02KEYS\x01k1 k2\x02TAGS\x01*\x02", map[string]string{"UNIQ_KEY": "7F00", "KEYS": "k1 k2", "TAGS": "*"}},
		{"ü\x01日本\x02", map[string]string{"ü": "日本"}},
	}
	for _, tc := range good {
		got, err := ParseProperties([]byte(tc.raw))
		if err != nil {
			t.Fatalf("%q: %v", tc.raw, err)
		}
		if !maps.Equal(got, tc.want) {
			t.Fatalf("%q: %v want %v", tc.raw, got, tc.want)
		}
		for k, v := range tc.want {
			if g, ok := GetProperty([]byte(tc.raw), k); !ok || g != v {
				t.Fatalf("%q: GetProperty(%q) = %q %v", tc.raw, k, g, ok)
			}
		}
		if _, ok := GetProperty([]byte(tc.raw), "absent"); ok {
			t.Fatalf("%q: absent key found", tc.raw)
		}
	}
	bad := []string{
		"\x02",                // empty pair
		"a\x011\x02\x02",      // double separator
		"\x02a\x011",          // leading separator
		"a",                   // no name/value separator
		"a\x011\x02b",         // second pair without separator
		"\x011\x02",           // empty name
		"a\x011\x012\x02",     // value contains 0x01
		"a\x011\x02\x01b\x02", // empty name later
	}
	for _, raw := range bad {
		if m, err := ParseProperties([]byte(raw)); !errors.Is(err, ErrMalformedProperties) || !errors.Is(err, ErrInvalid) || m != nil {
			t.Fatalf("%q: %v %v", raw, m, err)
		}
	}
	// GetProperty is lenient on malformed input, Java-style.
	if v, ok := GetProperty([]byte("junk\x02a\x011\x012\x02"), "a"); !ok || v != "1\x012" {
		t.Fatalf("lenient GetProperty = %q %v", v, ok)
	}
}

func TestGetPropertyAllocs(t *testing.T) {
	raw := []byte("UNIQ_KEY\x017F0000010001\x02KEYS\x01k1 k2\x02TAGS\x01TagA\x02")
	if n := testing.AllocsPerRun(100, func() { _, _ = GetProperty(raw, "ABSENT") }); n != 0 {
		t.Fatalf("GetProperty miss allocates %v", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = GetProperty(raw, PropertyKeys) }); n > 1 {
		t.Fatalf("GetProperty hit allocates %v", n)
	}
}

func TestEncodeSetRemoveProperties(t *testing.T) {
	m := map[string]string{"b": "2", "a": "1", "c": ""}
	got := EncodeProperties(m)
	if string(got) != "a\x011\x02b\x012\x02c\x01\x02" {
		t.Fatalf("EncodeProperties %q", got)
	}
	if EncodeProperties(nil) != nil || EncodeProperties(map[string]string{}) != nil {
		t.Fatal("empty map not nil")
	}
	raw := []byte("a\x011\x02b\x012") // no final separator
	set := SetProperty(raw, "a", "9")
	if string(set) != "b\x012\x02a\x019\x02" {
		t.Fatalf("SetProperty replace %q", set)
	}
	set = SetProperty(raw, "z", "x y")
	if string(set) != "a\x011\x02b\x012\x02z\x01x y\x02" {
		t.Fatalf("SetProperty append %q", set)
	}
	if string(raw) != "a\x011\x02b\x012" {
		t.Fatal("SetProperty modified its input")
	}
	set = SetProperty(nil, PropertyRealTopic, "T")
	if string(set) != "REAL_TOPIC\x01T\x02" {
		t.Fatalf("SetProperty on empty %q", set)
	}
	// Duplicates all go; unparseable pairs are kept verbatim.
	rm := RemoveProperty([]byte("a\x011\x02junk\x02a\x012\x02b\x013"), "a")
	if string(rm) != "junk\x02b\x013\x02" {
		t.Fatalf("RemoveProperty %q", rm)
	}
	// Aliasing: the result has its own backing array.
	in := make([]byte, 0, 100)
	in = append(in, "a\x011\x02"...)
	out := SetProperty(in, "b", "2")
	out[0] = 'X'
	if in[0] != 'a' {
		t.Fatal("SetProperty aliases its input")
	}
	for _, tc := range []struct{ k, v string }{{"", "v"}, {"a\x01", "v"}, {"a\x02", "v"}, {"a", "x\x01"}, {"a", "x\x02"}} {
		if err := CheckProperty(tc.k, tc.v); !errors.Is(err, ErrMalformedProperties) {
			t.Fatalf("CheckProperty(%q,%q) = %v", tc.k, tc.v, err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("SetProperty(%q,%q) did not panic", tc.k, tc.v)
				}
			}()
			SetProperty(nil, tc.k, tc.v)
		}()
	}
}

func genName() *rapid.Generator[string] {
	return rapid.StringMatching(`[A-Za-z_#0-9ü日]{1,12}`)
}

func genValue() *rapid.Generator[string] {
	return rapid.StringMatching(`[ -~é日]{0,20}`)
}

func TestPropertiesRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.MapOf(genName(), genValue()).Draw(t, "props")
		raw := EncodeProperties(m)
		got, err := ParseProperties(raw)
		if err != nil {
			t.Fatalf("parse of encoded: %v", err)
		}
		if !maps.Equal(got, m) {
			t.Fatalf("round trip %v != %v", got, m)
		}
		// Without the final separator it still parses the same.
		if len(raw) > 0 {
			got, err = ParseProperties(raw[:len(raw)-1])
			if err != nil || !maps.Equal(got, m) {
				t.Fatalf("without final separator: %v %v", got, err)
			}
		}
		for k, v := range m {
			if g, ok := GetProperty(raw, k); !ok || g != v {
				t.Fatalf("GetProperty(%q) = %q %v want %q", k, g, ok, v)
			}
		}
		k := genName().Draw(t, "setKey")
		v := genValue().Draw(t, "setValue")
		set := SetProperty(raw, k, v)
		want := maps.Clone(m)
		want[k] = v
		got, err = ParseProperties(set)
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("after SetProperty: %v %v want %v", got, err, want)
		}
		delete(want, k)
		got, err = ParseProperties(RemoveProperty(set, k))
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("after RemoveProperty: %v %v want %v", got, err, want)
		}
		// Check's dispatch fields agree with GetProperty.
		tags, _ := GetProperty(raw, PropertyTags)
		keys, _ := GetProperty(raw, PropertyKeys)
		uniq, _ := GetProperty(raw, PropertyUniqKey)
		dt, dk, du := dispatchProps(raw)
		if string(dt) != tags || string(dk) != keys || string(du) != uniq {
			t.Fatal("dispatchProps disagrees with GetProperty")
		}
	})
}

func TestTagsHashCode(t *testing.T) {
	// Expected values follow Java's String.hashCode() definition over UTF-16
	// code units; the ASCII ones are well-known Java results.
	for _, tc := range []struct {
		s    string
		want int64
	}{
		{"", 0},
		{"TagA", 2598919}, // 84*31^3 + 97*31^2 + 103*31 + 65
		{"hello", 99162322},
		{"Hello World", -862545276},
		{"polygenelubricants", -2147483648}, // famous Integer.MIN_VALUE hash
		{"é", 233},
		{"€", 8364},
		{"😀", 1772899},  // surrogates D83D DE00: 0xD83D*31 + 0xDE00
		{"a😀", 1866116}, // 97*31^2 + 0xD83D*31 + 0xDE00
		{"😀😀😀😀😀", -2013060241},
		{"日本語タグ", -858417240},
	} {
		if got := TagsHashCode(tc.s); got != tc.want {
			t.Errorf("TagsHashCode(%q) = %d, want %d", tc.s, got, tc.want)
		}
		if got := tagsCodeBytes([]byte(tc.s)); got != tc.want {
			t.Errorf("tagsCodeBytes(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
	// Invalid UTF-8: each bad byte is one U+FFFD.
	if TagsHashCode("\xff") != 0xFFFD || tagsCodeBytes([]byte("\xff")) != 0xFFFD {
		t.Error("invalid byte not U+FFFD")
	}
}

func TestOffsetMsgID(t *testing.T) {
	id := OffsetMsgID(netip.MustParseAddrPort("10.0.0.1:10911"), 0x1234)
	// 0A000001 | 00002A9F | 0000000000001234
	if id != "0A00000100002A9F0000000000001234" {
		t.Fatalf("v4 id %s", id)
	}
	id6 := OffsetMsgID(netip.MustParseAddrPort("[2001:db8::1]:80"), -1)
	if id6 != "20010DB8000000000000000000000001"+"00000050"+"FFFFFFFFFFFFFFFF" {
		t.Fatalf("v6 id %s", id6)
	}
	for _, tc := range []struct {
		ap  netip.AddrPort
		off int64
	}{
		{netip.MustParseAddrPort("10.0.0.1:10911"), 0},
		{netip.MustParseAddrPort("255.255.255.255:65535"), 1 << 62},
		{netip.MustParseAddrPort("[::1]:1"), 77},
		{netip.MustParseAddrPort("[fe80::1:2:3:4]:10911"), -5},
	} {
		ap, off, err := ParseOffsetMsgID(OffsetMsgID(tc.ap, tc.off))
		if err != nil || ap != tc.ap || off != tc.off {
			t.Fatalf("%v %d: got %v %d %v", tc.ap, tc.off, ap, off, err)
		}
		lower, _, err := ParseOffsetMsgID(strings.ToLower(OffsetMsgID(tc.ap, tc.off)))
		if err != nil || lower != tc.ap {
			t.Fatalf("lowercase: %v %v", lower, err)
		}
	}
	// A mapped address is stored as IPv4.
	if OffsetMsgID(netip.MustParseAddrPort("[::ffff:10.0.0.1]:10911"), 0x1234) != "0A00000100002A9F0000000000001234" {
		t.Fatal("4-in-6 not normalized")
	}
	for _, bad := range []string{"", "0A000001", "0A00000100002A9F000000000000123", "0A00000100002A9F000000000000123G", "0A00000100012A9F0000000000001234"} {
		if _, _, err := ParseOffsetMsgID(bad); !errors.Is(err, ErrBadMsgID) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = OffsetMsgID(v4b, 99) }); n != 1 {
		t.Fatalf("OffsetMsgID allocates %v", n)
	}
}

func TestClientBatch(t *testing.T) {
	// Two messages exactly as rocketmq-client-go's Message.Marshal writes
	// them, built by hand.
	body := cat(
		be32(20+5+2+8), be32(0), be32(0), be32(7), be32(5), []byte("hello"),
		[]byte{0, 8}, []byte("TAGS\x01A\x02\x02")[:8],
		be32(20+0+2+0), be32(0), be32(0), be32(0xFFFFFFFF), be32(0), []byte{0, 0},
	)
	msgs, err := DecodeClientBatch(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].Flag != 7 || string(msgs[0].Body) != "hello" || string(msgs[0].Properties) != "TAGS\x01A\x02\x02" ||
		msgs[1].Flag != -1 || len(msgs[1].Body) != 0 || len(msgs[1].Properties) != 0 {
		t.Fatalf("decoded %+v", msgs)
	}
	if &msgs[0].Body[0] != &body[20] {
		t.Fatal("body copied")
	}
	if again := AppendClientBatch(nil, msgs); !bytes.Equal(again, body) {
		t.Fatalf("AppendClientBatch %x", again)
	}
	// Appending to a body through the result must not clobber the next message.
	_ = append(msgs[0].Body, 'X')
	if !bytes.Equal(body[25:27], []byte{0, 8}) {
		t.Fatal("Body capacity reaches into the batch")
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = DecodeClientBatch(body) }); n != 1 {
		t.Fatalf("DecodeClientBatch allocates %v", n)
	}
	bad := map[string][]byte{
		"empty":               nil,
		"short header":        body[:10],
		"truncated body":      body[:23],
		"truncated props":     body[:30],
		"trailing bytes":      append(bytes.Clone(body), 1, 2, 3),
		"total mismatch":      append(be32(36), body[4:]...),
		"negative body len":   cat(be32(22), be32(0), be32(0), be32(0), be32(0xFFFFFFFF), []byte{0, 0}),
		"negative props len":  cat(be32(22), be32(0), be32(0), be32(0), be32(0), []byte{0x80, 0}),
		"props past end":      cat(be32(24), be32(0), be32(0), be32(0), be32(0), []byte{0, 3}, []byte("ab")),
		"body len past end":   cat(be32(22), be32(0), be32(0), be32(0), be32(100), []byte{0, 0}),
		"second msg mismatch": append(bytes.Clone(body[:35]), cat(be32(23), be32(0), be32(0), be32(0), be32(0), []byte{0, 0})...),
	}
	for name, b := range bad {
		if msgs, err := DecodeClientBatch(b); !errors.Is(err, ErrBadBatch) || msgs != nil {
			t.Errorf("%s: %v %v", name, msgs, err)
		}
	}
}

func TestRoundTripRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		addr := func(label string) netip.AddrPort {
			var a netip.Addr
			if rapid.Bool().Draw(t, label+"v6") {
				a = netip.AddrFrom16([16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, label+"a16"))).Unmap()
			} else {
				a = netip.AddrFrom4([4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, label+"a4")))
			}
			return netip.AddrPortFrom(a, rapid.Uint16().Draw(t, label+"port"))
		}
		m := &Message{
			Topic:                     rapid.StringN(1, 200, 200).Draw(t, "topic"),
			QueueID:                   rapid.Int32().Draw(t, "qid"),
			Flag:                      rapid.Int32().Draw(t, "flag"),
			Body:                      rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "body"),
			Properties:                EncodeProperties(rapid.MapOf(genName(), genValue()).Draw(t, "props")),
			SysFlag:                   rapid.Int32().Draw(t, "sysflag"),
			BornTimestamp:             rapid.Int64().Draw(t, "born"),
			BornHost:                  addr("born"),
			StoreHost:                 addr("store"),
			ReconsumeTimes:            rapid.Int32().Draw(t, "reconsume"),
			PreparedTransactionOffset: rapid.Int64().Draw(t, "prep"),
		}
		if len(m.Topic) > 300 {
			m.Topic = m.Topic[:300]
		}
		lim := Limits{MaxTopicLength: 300}
		rec, err := Encode(nil, m, lim)
		if err != nil {
			t.Fatal(err)
		}
		q, p, ts := rapid.Int64().Draw(t, "q"), rapid.Int64().Draw(t, "p"), rapid.Int64().Draw(t, "ts")
		Stamp(rec, q, p, ts)
		r, err := Decode(rec)
		if err != nil {
			t.Fatal(err)
		}
		got := r.Message()
		if got.Topic != m.Topic || got.QueueID != m.QueueID || got.Flag != m.Flag || !bytes.Equal(got.Body, m.Body) ||
			!bytes.Equal(got.Properties, m.Properties) || got.SysFlag != hostSysFlag(m) || got.BornTimestamp != m.BornTimestamp ||
			got.BornHost != m.BornHost || got.StoreHost != m.StoreHost || got.ReconsumeTimes != m.ReconsumeTimes ||
			got.PreparedTransactionOffset != m.PreparedTransactionOffset || r.QueueOffset != q || r.PhysOffset != p || r.StoreTimestamp != ts {
			t.Fatalf("round trip\n got %+v\nwant %+v", got, m)
		}
		size, info, err := Check(rec, false)
		if err != nil || size != len(rec) || info.Topic != m.Topic || info.StoreTimestamp != ts || info.PhysOffset != p {
			t.Fatalf("Check %d %+v %v", size, info, err)
		}
		if tags, _ := GetProperty(m.Properties, PropertyTags); info.TagsCode != TagsHashCode(tags) {
			t.Fatal("TagsCode")
		}
		if id := OffsetMsgID(r.StoreHost, r.PhysOffset); true {
			ap, off, err := ParseOffsetMsgID(id)
			if err != nil || ap != m.StoreHost || off != p {
				t.Fatalf("msgid %s: %v %d %v", id, ap, off, err)
			}
		}
	})
}

// TestEditPropertiesRapid checks EditProperties against a map model: the
// pairs of raw not removed nor set keep their order, then set's pairs in
// the order given; and it is one call for what RemoveProperty and
// SetProperty do one name at a time.
func TestEditPropertiesRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.MapOf(genName(), genValue()).Draw(t, "props")
		raw := EncodeProperties(m)
		if rapid.Bool().Draw(t, "noFinalSeparator") && len(raw) > 0 {
			raw = raw[:len(raw)-1]
		}
		remove := rapid.SliceOf(genName()).Draw(t, "remove")
		setMap := rapid.MapOf(genName(), genValue()).Draw(t, "set")
		var set []string
		for k, v := range setMap {
			set = append(set, k, v)
		}
		got := EditProperties(raw, remove, set...)
		want := maps.Clone(m)
		for _, k := range remove {
			delete(want, k)
		}
		maps.Copy(want, setMap)
		parsed, err := ParseProperties(got)
		if err != nil || !maps.Equal(parsed, want) {
			t.Fatalf("EditProperties(%q, %q, %q) = %q: parses to %v %v, want %v", raw, remove, set, got, parsed, err, want)
		}
		step := slices.Clone(raw)
		for _, k := range remove {
			step = RemoveProperty(step, k)
		}
		for i := 0; i < len(set); i += 2 {
			step = SetProperty(step, set[i], set[i+1])
		}
		if len(remove)+len(set) > 0 && !bytes.Equal(step, got) { // (no call at all leaves raw unnormalised)
			t.Fatalf("one name at a time %q, in one pass %q", step, got)
		}
		if len(got) > 0 && len(raw) > 0 && &got[0] == &raw[0] {
			t.Fatal("the result aliases raw")
		}
	})
}

func TestFirstPropertyRapid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.MapOf(genName(), genValue()).Draw(t, "props")
		raw := EncodeProperties(m)
		gen := genName()
		if len(m) > 0 { // names raw holds, most of the time
			gen = rapid.OneOf(gen, rapid.SampledFrom(slices.Sorted(maps.Keys(m))), rapid.SampledFrom(slices.Sorted(maps.Keys(m))))
		}
		names := rapid.SliceOfN(gen, 0, 8).Draw(t, "names")
		var wn, wv string
		var wok bool
		for _, n := range names {
			if v, ok := GetProperty(raw, n); ok {
				wn, wv, wok = n, v, true
				break
			}
		}
		n, v, ok := FirstProperty(raw, names...)
		if n != wn || v != wv || ok != wok {
			t.Fatalf("FirstProperty(%q, %q) = %q %q %v, GetProperty in turn gives %q %q %v", raw, names, n, v, ok, wn, wv, wok)
		}
	})
}
