package echo

import (
	"bufio"
	"bytes"
	"testing"
)

// bufferedData sees a data frame only when it is next, at the offset
// asked for, and complete in the buffer; it consumes nothing.
func TestBufferedData(t *testing.T) {
	var b bytes.Buffer
	writeFrame(&b, frame{kind: frameData, offset: 100, data: []byte("abcd")})
	writeFrame(&b, frame{kind: frameHeartbeat, offset: 104})
	writeFrame(&b, frame{kind: frameData, offset: 104, data: []byte("efgh")})
	whole := b.Bytes()

	br := bufio.NewReader(bytes.NewReader(whole))
	br.Peek(len(whole)) // fill the buffer
	for _, c := range []struct {
		at   int64
		n    int
		want bool
	}{{100, 4, true}, {99, 0, false}, {104, 0, false}} {
		if n, ok := bufferedData(br, c.at); ok != c.want || (ok && n != c.n) {
			t.Errorf("bufferedData at %d = %d, %v; want %d, %v", c.at, n, ok, c.n, c.want)
		}
	}
	if f, err := readFrame(br, 64); err != nil || f.offset != 100 {
		t.Fatalf("readFrame after bufferedData: %+v, %v (it consumed bytes)", f, err)
	}
	if _, ok := bufferedData(br, 104); ok {
		t.Error("a heartbeat taken for a data frame")
	}

	// Only part of the frame has arrived.
	part := bufio.NewReader(bytes.NewReader(whole[:13+2]))
	part.Peek(13 + 2)
	if n, ok := bufferedData(part, 100); ok {
		t.Errorf("an incomplete frame reported complete (%d bytes)", n)
	}
}
