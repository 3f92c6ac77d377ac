package wire

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/keelmq/keel/host/remoting"
)

// TestTemplatePatch: a patched template is byte for byte the frame the
// codec encodes for the same command with the same values.
func TestTemplatePatch(t *testing.T) {
	for _, code := range []int16{remoting.CodeSendMessage, remoting.CodeSendMessageV2} {
		s, err := (&LoadSpec{Addr: "x", Producers: 3, BodyBytes: 5, Duration: 1, Code: code}).withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		runID := uint64(0x0123456789ABCDEF)
		tmpl, err := newTemplate(message(&s, 2, []byte("hello")), code, runID)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 200; i++ {
			op := int32(opaqueBase + rng.IntN(math.MaxInt32-opaqueBase+1))
			born := int64(1e12 + rng.Int64N(9e12))
			id := rng.Uint64()
			if i == 0 {
				op, born, id = opaqueBase, 1_000_000_000_000, 0
			}
			tmpl.patch(op, born, id)
			want := message(&s, 2, []byte("hello"))
			want.Opaque = op
			bornKey, propKey := fieldNames(code)
			want.SetExt(bornKey, strconv.FormatInt(born, 10))
			want.SetExt(propKey, string(properties(nil, runID, id)))
			if w := want.AppendFrame(nil); !bytes.Equal(tmpl.buf, w) {
				t.Fatalf("code %d op %d born %d id %x:\n got %q\nwant %q", code, op, born, id, tmpl.buf, w)
			}
		}
	}
}

func TestScanJSONResponse(t *testing.T) {
	for _, tc := range []struct {
		h      string
		ok     bool
		code   int16
		opaque int32
		resp   bool
	}{
		{`{"code":0,"flag":1,"opaque":1000000007,"extFields":{"msgId":"x"}}`, true, 0, 1000000007, true},
		{`{"code":-1,"flag":0,"opaque":-5}`, true, -1, -5, false},
		{`{"code":0,"flag":1,"opaque":3,"remark":"\"code\":9"}`, true, 0, 3, true},
		{`{"x":{"opaque":5},"code":0,"flag":1}`, false, 0, 0, false}, // only nested
		{`{"code":0,"flag":1,"opaque":3,"opaque":4}`, false, 0, 0, false},
		{`{"code":0,"flag":1}`, false, 0, 0, false},
		{`{"code":0 ,"flag":1,"opaque":3}`, false, 0, 0, false},
		{`{"code":"0","flag":1,"opaque":3}`, false, 0, 0, false},
		{`{"code":123456789012,"flag":1,"opaque":3}`, false, 0, 0, false},
	} {
		r, ok := scanJSONResponse([]byte(tc.h))
		if ok != tc.ok || (ok && (r.code != tc.code || r.opaque != tc.opaque || r.isResp != tc.resp)) {
			t.Errorf("%s: got %+v ok=%v", tc.h, r, ok)
		}
	}
}

// FuzzScanJSONResponse: whenever the scan answers, the full decoder agrees
// on code, opaque and the response flag.
func FuzzScanJSONResponse(f *testing.F) {
	f.Add([]byte(`{"code":0,"flag":1,"language":"GO","opaque":1000000001,"serializeTypeCurrentRPC":"JSON","version":317}`))
	f.Add([]byte(`{"code":14,"extFields":{"code":"1"},"flag":1,"opaque":2,"remark":"disk full"}`))
	f.Add([]byte(`{"code":0,"flag":1,"opaque":3,"remark":"\"opaque\":4"}`))
	f.Fuzz(func(t *testing.T, h []byte) {
		r, ok := scanJSONResponse(h)
		if !ok {
			return
		}
		cmd, err := remoting.DecodeHeader(remoting.SerializeJSON, h)
		if err != nil {
			return // not a header at all: the frame reader then fails on the full decode
		}
		if cmd.Code != r.code || cmd.Opaque != r.opaque || cmd.IsResponse() != r.isResp {
			t.Fatalf("%q: scan %+v, decode code=%d opaque=%d flag=%d", h, r, cmd.Code, cmd.Opaque, cmd.Flag)
		}
	})
}
