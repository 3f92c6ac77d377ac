package pluginlane

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// FuzzFrames: any byte stream read as frames either decodes or fails
// with an error, never a panic or an allocation beyond MaxFrame; a call
// body decodes to what appendCallHeader encoded; a status body never
// panics.
func FuzzFrames(f *testing.F) {
	call, _ := appendCallHeader(nil, callHeader{method: "/keel.plugin.v1.Host/ReadLog", timeout: time.Second})
	var seed []byte
	seed = binary.LittleEndian.AppendUint32(seed, uint32(frameOverhead+len(call)+3))
	seed = append(seed, frameCall, 1, 0, 0, 0)
	seed = append(seed, call...)
	seed = append(seed, 8, 1, 16)
	f.Add(seed)
	f.Add([]byte{5, 0, 0, 0, frameCancel, 9, 0, 0, 0})
	f.Add([]byte{9, 0, 0, 0, frameReply, 0, 0, 0, 0, 14, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for i := 0; i < 8; i++ {
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			switch fr.typ {
			case frameCall:
				h, req, err := parseCall(fr.body)
				if err != nil {
					continue
				}
				again, err := appendCallHeader(nil, h)
				if err != nil || !bytes.Equal(append(again, req...), fr.body) {
					t.Fatalf("call %+v did not round-trip: %x vs %x (%v)", h, again, fr.body, err)
				}
			case frameReply, frameEnd:
				if code, rest, err := parseStatus(fr.body); err == nil && code != 0 {
					_ = decodeStatus(code, rest)
				}
			}
		}
	})
}
