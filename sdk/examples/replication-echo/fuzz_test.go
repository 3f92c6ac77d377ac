package echo

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReadHello: the master's decoder of a slave's hello never panics;
// whatever it accepts has a valid id and encodes back to the bytes it
// read; whatever it refuses is a read error or wraps errProtocol, and a
// hello of another version is a *versionError naming that version.
func FuzzReadHello(f *testing.F) {
	var b bytes.Buffer
	writeHello(&b, hello{secret: "s3cret", id: "0123456789abcdef0123456789abcdef", from: 4096})
	f.Add(b.Bytes())
	b.Reset()
	writeHello(&b, hello{id: "slave-1.zone:a_b", from: -1})
	f.Add(b.Bytes())
	f.Add([]byte("ECHO\x01\x00\x06s3cret\x00\x00\x00\x00\x00\x00\x10\x00")) // version 1: no id
	f.Add([]byte("ECHO\x02\xff\xff"))
	f.Add([]byte("ECHO\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"))    // empty id
	f.Add([]byte("ECHO\x02\x00\x00\x41" + string(make([]byte, 73))))         // id too long
	f.Add([]byte("ECHO\x02\x00\x00\x02a\n\x00\x00\x00\x00\x00\x00\x00\x00")) // a control byte in the id
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := readHello(bytes.NewReader(in))
		if err != nil {
			var ve *versionError
			switch {
			case errors.As(err, &ve):
				if len(in) < 5 || in[4] == protoVersion || ve.got != in[4] {
					t.Fatalf("version error %v for input %x", err, in)
				}
			case errors.Is(err, errProtocol), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			default:
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if err := validID(h.id); err != nil || h.from < -1 {
			t.Fatalf("accepted hello %+v: %v", h, err)
		}
		var out bytes.Buffer
		if err := writeHello(&out, h); err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatalf("hello %+v re-encodes as %x, input %x", h, out.Bytes(), in)
		}
	})
}

// FuzzReadFrame: the slave's frame decoder never panics, never returns
// more than maxLen data bytes, and round-trips what it accepts.
func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	writeFrame(&b, frame{kind: frameData, offset: 8192, data: []byte("record bytes")})
	writeFrame(&b, frame{kind: frameHeartbeat, offset: 8204})
	f.Add(b.Bytes())
	f.Add([]byte("D\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"))
	f.Add([]byte("X\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Add([]byte("H\x80\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		const maxLen = 1 << 16
		r := bytes.NewReader(in)
		for {
			before := r.Len()
			fr, err := readFrame(r, maxLen)
			if err != nil {
				if !errors.Is(err, errProtocol) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("unexpected error kind: %v", err)
				}
				return
			}
			if len(fr.data) > maxLen || fr.offset < 0 {
				t.Fatalf("accepted frame %+v", fr)
			}
			var out bytes.Buffer
			writeFrame(&out, fr)
			consumed := in[len(in)-before : len(in)-r.Len()]
			if !bytes.Equal(out.Bytes(), consumed) {
				t.Fatalf("frame re-encodes as %x, consumed %x", out.Bytes(), consumed)
			}
		}
	})
}

// FuzzReadAck: acks are 8 bytes, never negative.
func FuzzReadAck(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x10\x00"))
	f.Add([]byte("\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, in []byte) {
		off, err := readAck(bytes.NewReader(in))
		if err == nil && off < 0 {
			t.Fatalf("negative ack %d accepted", off)
		}
	})
}
