package replication

import (
	"bytes"
	"errors"
	"net"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/keelmq/keel/sdk"
)

func genEpochs(t *rapid.T, label string) []sdk.Epoch {
	n := rapid.IntRange(0, 6).Draw(t, label+"N")
	var out []sdk.Epoch
	e, s := int32(0), int64(0)
	for i := 0; i < n; i++ {
		e += int32(rapid.IntRange(1, 5).Draw(t, label+"E"))
		s += rapid.Int64Range(0, 1<<20).Draw(t, label+"S")
		out = append(out, sdk.Epoch{Epoch: e, StartOffset: s})
	}
	return out
}

// TestPayloadRoundTrip: every message decodes to what was encoded, and
// re-encodes to the same bytes.
func TestPayloadRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var n1, n2 [NonceSize]byte
		copy(n1[:], rapid.SliceOfN(rapid.Byte(), NonceSize, NonceSize).Draw(t, "n1"))
		copy(n2[:], rapid.SliceOfN(rapid.Byte(), NonceSize, NonceSize).Draw(t, "n2"))
		min := rapid.Int64Range(0, 1<<40).Draw(t, "min")
		msgs := []struct {
			typ FrameType
			v   any
			enc []byte
			dec func([]byte) (any, error)
		}{}
		add := func(typ FrameType, v any, enc []byte, dec func([]byte) (any, error)) {
			msgs = append(msgs, struct {
				typ FrameType
				v   any
				enc []byte
				dec func([]byte) (any, error)
			}{typ, v, enc, dec})
		}
		h := Hello{Version: uint16(rapid.IntRange(0, 65535).Draw(t, "v")), Nonce: n1, Proof: n2, ID: rapid.StringN(0, 40, MaxIDLen).Draw(t, "id")}
		add(FrameClientHello, h, h.Marshal(), func(b []byte) (any, error) { return DecodeHello(b) })
		a := Auth{Proof: n1}
		add(FrameAuth, a, a.Marshal(), func(b []byte) (any, error) { return DecodeAuth(b) })
		st := State{Min: min, End: min + rapid.Int64Range(0, 1<<30).Draw(t, "len"), MaxEpoch: rapid.Int32().Draw(t, "max"),
			Epochs: genEpochs(t, "se"), Takeovers: rapid.SliceOfN(rapid.Int32(), 0, 5).Draw(t, "to")}
		add(FrameState, st, st.Marshal(), func(b []byte) (any, error) { return DecodeState(b) })
		p := Plan{From: min, AckFlushed: rapid.Bool().Draw(t, "af"), MaxEpoch: rapid.Int32().Draw(t, "pm"), Epochs: genEpochs(t, "pe"),
			Takeovers: rapid.SliceOfN(rapid.Int32(), 0, 5).Draw(t, "pt")}
		add(FramePlan, p, p.Marshal(), func(b []byte) (any, error) { return DecodePlan(b) })
		pl := Pull{From: min, To: min + rapid.Int64Range(0, 1<<30).Draw(t, "pl")}
		add(FramePull, pl, pl.Marshal(), func(b []byte) (any, error) { return DecodePull(b) })
		hb := Heartbeat{Committed: min}
		add(FrameHeartbeat, hb, hb.Marshal(), func(b []byte) (any, error) { return DecodeHeartbeat(b) })
		ack := Ack{Received: min + 10, Flushed: min}
		add(FrameAck, ack, ack.Marshal(), func(b []byte) (any, error) { return DecodeAck(b) })
		em := ErrorMsg{Code: ErrorCode(rapid.IntRange(0, 255).Draw(t, "code")), Reason: rapid.StringN(0, 100, MaxReasonLen).Draw(t, "reason")}
		add(FrameError, em, em.Marshal(), func(b []byte) (any, error) { return DecodeErrorMsg(b) })
		for _, m := range msgs {
			got, err := m.dec(m.enc)
			if err != nil {
				t.Fatalf("%s: %v", m.typ, err)
			}
			if !equalMsg(got, m.v) {
				t.Fatalf("%s: decoded %+v, encoded %+v", m.typ, got, m.v)
			}
			// Framed, then decoded from a stream with trailing bytes.
			wire := AppendFrame(nil, m.typ, m.enc)
			f, n, err := DecodeFrame(append(wire, 0xff), len(m.enc))
			if err != nil || n != len(wire) || f.Type != m.typ || !bytes.Equal(f.Payload, m.enc) {
				t.Fatalf("%s: frame %v %d %v", m.typ, f, n, err)
			}
			if _, _, err := DecodeFrame(wire[:len(wire)-1], len(m.enc)); len(m.enc) > 0 && !errors.Is(err, ErrShortFrame) {
				t.Fatalf("%s: short frame: %v", m.typ, err)
			}
			if len(m.enc) > 0 {
				if _, _, err := DecodeFrame(wire, len(m.enc)-1); !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("%s: bound: %v", m.typ, err)
				}
				// Every strict prefix of a payload is rejected.
				cut := rapid.IntRange(0, len(m.enc)-1).Draw(t, "cut")
				if _, err := m.dec(m.enc[:cut]); err == nil {
					t.Fatalf("%s: prefix of %d/%d bytes decoded", m.typ, cut, len(m.enc))
				}
			}
		}
		dh := DataHeader{Offset: min + 5, Epoch: 3, EpochStart: min, Committed: min + 100}
		body := rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, "body")
		gh, gb, err := DecodeData(append(dh.Marshal(), body...))
		if err != nil || gh != dh || !bytes.Equal(gb, body) {
			t.Fatalf("data %+v %v %v", gh, gb, err)
		}
	})
}

func equalMsg(a, b any) bool {
	norm := func(v any) any {
		switch x := v.(type) {
		case State:
			if len(x.Epochs) == 0 {
				x.Epochs = nil
			}
			if len(x.Takeovers) == 0 {
				x.Takeovers = nil
			}
			return x
		case Plan:
			if len(x.Epochs) == 0 {
				x.Epochs = nil
			}
			if len(x.Takeovers) == 0 {
				x.Takeovers = nil
			}
			return x
		}
		return v
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct {
		name string
		err  error
		f    func() error
	}{
		{"unknown frame type", ErrBadFrame, func() error { _, _, err := DecodeFrame([]byte{99, 0, 0, 0, 0}, 10); return err }},
		{"type zero", ErrBadFrame, func() error { _, _, err := DecodeFrame([]byte{0, 0, 0, 0, 0}, 10); return err }},
		{"huge length", ErrFrameTooLarge, func() error { _, _, err := DecodeFrame([]byte{7, 0xff, 0xff, 0xff, 0xff}, 1<<20); return err }},
		{"epoch count beyond payload", ErrBadFrame, func() error {
			_, err := DecodeState(append(make([]byte, 20), 0xff, 0xff, 0xff, 0xff))
			return err
		}},
		{"state end below min", ErrBadFrame, func() error { _, err := DecodeState(State{Min: 10, End: 5}.Marshal()); return err }},
		{"trailing bytes", ErrBadFrame, func() error { _, err := DecodeAck(append(Ack{}.Marshal(), 0)); return err }},
		{"negative ack", ErrBadFrame, func() error { _, err := DecodeAck(Ack{Received: -1}.Marshal()); return err }},
		{"pull backwards", ErrBadFrame, func() error { _, err := DecodePull(Pull{From: 10, To: 5}.Marshal()); return err }},
		{"plan flags", ErrBadFrame, func() error {
			b := Plan{}.Marshal()
			b[8] = 2
			_, err := DecodePlan(b)
			return err
		}},
		{"data epoch start after offset", ErrBadFrame, func() error {
			_, _, err := DecodeData(DataHeader{Offset: 5, EpochStart: 6}.Marshal())
			return err
		}},
		{"short data", ErrBadFrame, func() error { _, _, err := DecodeData(make([]byte, 10)); return err }},
		{"long id", ErrBadFrame, func() error {
			b := Hello{}.Marshal()
			b[len(b)-2], b[len(b)-1] = 0xff, 0xff
			_, err := DecodeHello(b)
			return err
		}},
	}
	for _, tc := range cases {
		if err := tc.f(); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
}

func TestConnFrames(t *testing.T) {
	a, b := net.Pipe()
	ca, cb := NewConn(a, 1024, time.Second), NewConn(b, 1024, time.Second)
	go func() {
		ca.WriteFrame(true, FrameAck, Ack{Received: 7}.Marshal())
		ca.WriteFrame(true, FrameData, DataHeader{Offset: 1}.Marshal(), []byte("xyz"))
		ca.WriteFrame(true, FrameError, ErrorMsg{Code: CodeRefused, Reason: "no"}.Marshal())
	}()
	f, err := cb.ExpectFrame(FrameAck)
	if err != nil {
		t.Fatal(err)
	}
	if ack, _ := DecodeAck(f.Payload); ack.Received != 7 {
		t.Fatal(ack)
	}
	if _, err := cb.ExpectFrame(FrameAck); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("wrong type: %v", err)
	}
	_, err = cb.ExpectFrame(FrameAck)
	var pe *PeerError
	if !errors.As(err, &pe) || pe.Code != CodeRefused || !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("peer error: %v", err)
	}
	if err := ca.WriteFrame(true, FrameMeta, make([]byte, 2000)); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized write: %v", err)
	}
	a.Close()
	b.Close()
}

// TestConnMixedFrames sends buffered small frames, large frames (sent by
// a gathering write, not copied) and flushes over TCP, and checks every
// frame arrives whole and in order.
func TestConnMixedFrames(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sizes := []int{0, 10, largePart, 3, largePart - 1, 1 << 20, 7, connBufSize + 5, 1}
	payload := func(i, n int) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i + j)
		}
		return b
	}
	errc := make(chan error, 1)
	go func() {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			errc <- err
			return
		}
		c := NewConn(nc, 4<<20, time.Second)
		defer c.Close()
		for i, n := range sizes {
			hdr := DataHeader{Offset: int64(i)}.Marshal()
			if err := c.WriteFrame(i%3 == 2, FrameData, hdr, payload(i, n)); err != nil {
				errc <- err
				return
			}
		}
		errc <- c.Flush()
	}()
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := NewConn(nc, 4<<20, 3*time.Second)
	defer c.Close()
	// Odd frames are read with ReadFrameInto into two rotating buffers,
	// the way the slave's piped reader does: a payload read into one
	// buffer stays intact while the next frame is read into the other.
	bufs := [2][]byte{make([]byte, 0, 16), nil}
	var prev []byte
	var prevWant []byte
	for i, n := range sizes {
		var f Frame
		var err error
		if i%2 == 1 {
			f, err = c.ReadFrameInto(bufs[i/2%2])
			bufs[i/2%2] = f.Payload
		} else {
			f, err = c.ExpectFrame(FrameData)
		}
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		h, data, err := DecodeData(f.Payload)
		if err != nil || h.Offset != int64(i) || !bytes.Equal(data, payload(i, n)) {
			t.Fatalf("frame %d: header %+v, %d bytes, err %v", i, h, len(data), err)
		}
		if prev != nil && !bytes.Equal(prev, prevWant) {
			t.Fatalf("frame %d overwrote the payload of the frame read into the other buffer", i)
		}
		if i%2 == 1 {
			prev, prevWant = f.Payload, bytes.Clone(f.Payload)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestAuthMutual(t *testing.T) {
	for _, tc := range []struct {
		name              string
		master, slave     string
		masterOK, slaveOK bool
	}{
		{"same secret", "k", "k", true, true},
		{"different secrets", "k", "j", false, false},
		{"empty secrets (unauthenticated profile)", "", "", true, true},
		{"slave without secret", "k", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			defer b.Close()
			done := make(chan error, 1)
			go func() {
				id, err := ServerAuth(NewConn(a, 1024, time.Second), tc.master, "m")
				if err == nil && id != "s" {
					err = errors.New("wrong id " + id)
				}
				if err != nil {
					a.Close()
				}
				done <- err
			}()
			id, err := ClientAuth(NewConn(b, 1024, time.Second), tc.slave, "s")
			if err != nil {
				b.Close()
			}
			merr := <-done
			if (err == nil) != tc.slaveOK || (merr == nil) != tc.masterOK {
				t.Fatalf("slave %v (id %q), master %v", err, id, merr)
			}
			if !tc.slaveOK && !errors.Is(err, ErrAuth) {
				t.Fatalf("slave error does not wrap ErrAuth: %v", err)
			}
		})
	}
	// Proofs are bound to direction and nonces.
	var x, y [NonceSize]byte
	y[0] = 1
	if Proof("k", labelMaster, x, y) == Proof("k", labelSlave, x, y) || Proof("k", labelMaster, x, y) == Proof("k", labelMaster, y, x) {
		t.Fatal("proofs not bound to label and nonce order")
	}
}

// FuzzDecodeFrame decodes arbitrary bytes as an HA frame and its payload:
// never a panic, never more than the bound, and whatever decodes
// re-encodes to the same bytes.
func FuzzDecodeFrame(f *testing.F) {
	f.Add(AppendFrame(nil, FrameClientHello, Hello{Version: 1, ID: "slave-1"}.Marshal()))
	f.Add(AppendFrame(nil, FrameState, State{Min: 0, End: 100, MaxEpoch: 3, Epochs: []sdk.Epoch{{Epoch: 1}, {Epoch: 3, StartOffset: 50}}, Takeovers: []int32{3}}.Marshal()))
	f.Add(AppendFrame(nil, FramePlan, Plan{From: 50, AckFlushed: true, Epochs: []sdk.Epoch{{Epoch: 1}}}.Marshal()))
	f.Add(AppendFrame(nil, FrameData, DataHeader{Offset: 8, Epoch: 1, Committed: 20}.Marshal(), []byte("records")))
	f.Add(AppendFrame(nil, FrameAck, Ack{Received: 9, Flushed: 8}.Marshal()))
	f.Add(AppendFrame(nil, FrameError, ErrorMsg{Code: CodeLying, Reason: "ack beyond"}.Marshal()))
	f.Add([]byte{byte(FrameState), 0, 0, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	const bound = 1 << 16
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, n, err := DecodeFrame(b, bound)
		if err != nil {
			return
		}
		if n > len(b) || len(fr.Payload) > bound || n != FrameHeaderSize+len(fr.Payload) {
			t.Fatalf("frame of %d bytes from %d", n, len(b))
		}
		p := fr.Payload
		var re []byte
		switch fr.Type {
		case FrameClientHello, FrameServerHello:
			if m, err := DecodeHello(p); err == nil {
				re = m.Marshal()
			}
		case FrameAuth:
			if m, err := DecodeAuth(p); err == nil {
				re = m.Marshal()
			}
		case FrameState:
			if m, err := DecodeState(p); err == nil {
				re = m.Marshal()
			}
		case FramePlan:
			if m, err := DecodePlan(p); err == nil {
				re = m.Marshal()
			}
		case FramePull:
			if m, err := DecodePull(p); err == nil {
				re = m.Marshal()
			}
		case FrameData:
			if h, d, err := DecodeData(p); err == nil {
				re = append(h.Marshal(), d...)
			}
		case FrameHeartbeat:
			if m, err := DecodeHeartbeat(p); err == nil {
				re = m.Marshal()
			}
		case FrameAck:
			if m, err := DecodeAck(p); err == nil {
				re = m.Marshal()
			}
		case FrameError:
			if m, err := DecodeErrorMsg(p); err == nil {
				re = m.Marshal()
			}
		case FrameMeta:
			re = p
		}
		if re != nil && !bytes.Equal(re, p) {
			t.Fatalf("%s: re-encoded %x, got %x", fr.Type, re, p)
		}
	})
}
