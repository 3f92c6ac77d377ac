package record

import "testing"

// benchMessage is a typical small producer message: a 128-byte body and the
// properties rocketmq-client-go sends (UNIQ_KEY, TAGS, WAIT).
func benchMessage() *Message {
	m := goldenMessage()
	m.Topic = "BenchmarkTopic"
	m.Body = make([]byte, 128)
	for i := range m.Body {
		m.Body[i] = byte(i)
	}
	m.Properties = []byte("UNIQ_KEY\x017F000001A8B418B4AAC2541D9EB60000\x02TAGS\x01TagA\x02WAIT\x01true\x02")
	return m
}

func BenchmarkEncode128(b *testing.B) {
	m := benchMessage()
	buf := make([]byte, 0, 1024)
	n, _ := EncodedSize(m)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		rec, err := Encode(buf[:0], m, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		Stamp(rec, 1, 2, 3)
	}
}

func BenchmarkCheck(b *testing.B) {
	rec, _ := Encode(nil, benchMessage(), Limits{})
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Check(rec, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckCRC(b *testing.B) {
	rec, _ := Encode(nil, benchMessage(), Limits{})
	b.SetBytes(int64(len(rec)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Check(rec, true); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	rec, _ := Encode(nil, benchMessage(), Limits{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(rec); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStamp(b *testing.B) {
	rec, _ := Encode(nil, benchMessage(), Limits{})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		Stamp(rec, int64(i), int64(i), int64(i))
	}
}
