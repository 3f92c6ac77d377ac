package wire

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/host/remoting"
	"pgregory.net/rapid"
)

// fakeBroker answers SEND_MESSAGE requests on 127.0.0.1. On each
// connection it holds responses until batch requests are outstanding (or
// until flushAfter passes without a new request) and then answers them in
// reverse arrival order, so a generator that matched responses by arrival
// order, or that did not pipeline, fails. The response code of the n-th
// request the broker answers (over all connections, from 0) is code(n);
// the response echoes the request's properties in its remark.
type fakeBroker struct {
	t          testing.TB
	l          net.Listener
	batch      int
	flushAfter time.Duration
	code       func(id uint64) int16
	// bogus makes the broker also send, before each batch, a response with
	// an opaque no request used and a broker-initiated request.
	bogus bool

	mu     sync.Mutex
	n      uint64          // responses sent
	sent   map[int16]int64 // responses by code
	bogusN int64
	maxOut int64 // most requests outstanding on one connection
	wg     sync.WaitGroup
}

func newFakeBroker(t testing.TB, batch int, code func(uint64) int16) *fakeBroker {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBroker{t: t, l: l, batch: batch, flushAfter: 2 * time.Millisecond, code: code, sent: map[int16]int64{}}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(func() { l.Close(); f.wg.Wait() })
	return f
}

func (f *fakeBroker) addr() string { return f.l.Addr().String() }

func (f *fakeBroker) serve() {
	defer f.wg.Done()
	for {
		nc, err := f.l.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go f.handle(nc)
	}
}

// idOf extracts the KEYS id of a request.
func idOf(cmd *remoting.Command) (uint64, string) {
	props := cmd.Ext("properties")
	if props == "" {
		props = cmd.Ext("i")
	}
	for _, kv := range strings.Split(props, "\x02") {
		if k, v, ok := strings.Cut(kv, "\x01"); ok && k == "KEYS" {
			n, _ := strconv.ParseUint(v, 16, 64)
			return n, props
		}
	}
	return 0, props
}

func (f *fakeBroker) handle(nc net.Conn) {
	defer f.wg.Done()
	defer nc.Close()
	in := make(chan *remoting.Command, 1024)
	go func() {
		defer close(in)
		br := bufio.NewReader(nc)
		for {
			cmd, err := remoting.ReadCommand(br, 0)
			if err != nil {
				return
			}
			in <- cmd
		}
	}()
	var held []*remoting.Command
	timer := time.NewTimer(time.Hour)
	flush := func() bool {
		if len(held) == 0 {
			return true
		}
		var out []byte
		if f.bogus {
			out = (&remoting.Command{Code: remoting.Success, Opaque: 0, Flag: remoting.FlagResponse}).AppendFrame(out)
			out = (&remoting.Command{Code: remoting.CodeNotifyConsumerIDsChanged, Opaque: 77}).AppendFrame(out)
			f.mu.Lock()
			f.bogusN++
			f.mu.Unlock()
		}
		for _, req := range slices.Backward(held) {
			_, props := idOf(req)
			f.mu.Lock()
			code := f.code(f.n)
			f.n++
			f.sent[code]++
			f.mu.Unlock()
			resp := remoting.NewResponse(req, code, props)
			resp.Flag |= remoting.FlagResponse
			out = resp.AppendFrame(out)
		}
		held = held[:0]
		_, err := nc.Write(out)
		return err == nil
	}
	for {
		select {
		case cmd, ok := <-in:
			if !ok {
				return
			}
			held = append(held, cmd)
			f.mu.Lock()
			f.maxOut = max(f.maxOut, int64(len(held)))
			f.mu.Unlock()
			if len(held) >= f.batch {
				if !flush() {
					return
				}
			} else {
				timer.Reset(f.flushAfter)
			}
		case <-timer.C:
			if !flush() {
				return
			}
		}
	}
}

// TestOpaqueMatching drives connections directly: requests answered in
// reverse order, interleaved with a response nobody asked for and a
// broker-initiated request, each reach the call that sent them.
func TestOpaqueMatching(t *testing.T) {
	// SLAVE_NOT_AVAILABLE, not SUCCESS: the generator decodes such
	// responses in full, so the remark (the request's properties) comes
	// back and shows each response reached the call that sent it.
	f := newFakeBroker(t, 16, func(uint64) int16 { return remoting.SlaveNotAvailable })
	f.bogus = true
	f.flushAfter = time.Hour // answer only full batches
	c, err := dial(context.Background(), f.addr(), 16)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	s, err := (&LoadSpec{Addr: f.addr(), Producers: 16, BodyBytes: 8, Duration: time.Second}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for p := 0; p < 16; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			tmpl, err := newTemplate(message(&s, p, []byte("body")), s.Code, 42)
			if err != nil {
				errs <- err
				return
			}
			props := string(properties(nil, 42, uint64(p)))
			cl := &call{done: make(chan reply, 1)}
			op, err := c.start(cl, tmpl, 1, uint64(p))
			if err != nil {
				errs <- err
				return
			}
			select {
			case r := <-cl.done:
				if r.err != nil || r.resp.opaque != op || r.resp.remark != props {
					errs <- fmt.Errorf("producer %d: got %+v, err %v; want opaque %d remark %q", p, r.resp, r.err, op, props)
				}
			case <-time.After(5 * time.Second):
				errs <- fmt.Errorf("producer %d: no response (was the request pipelined?)", p)
			}
		}(p)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := c.unmatched.Load(); got != 1 {
		t.Errorf("unmatched = %d, want 1 (the response with opaque 0)", got)
	}
}

// TestLoadStatuses checks that every response code lands in its status,
// that counts agree exactly with what the broker sent, and that the depth
// cap holds.
func TestLoadStatuses(t *testing.T) {
	codes := []int16{remoting.Success, remoting.Success, remoting.FlushDiskTimeout, remoting.FlushSlaveTimeout,
		remoting.SlaveNotAvailable, remoting.MessageIllegal, remoting.Success}
	f := newFakeBroker(t, 4, func(n uint64) int16 { return codes[n%uint64(len(codes))] })
	f.bogus = true
	r, err := Load(context.Background(), LoadSpec{Addr: f.addr(), Producers: 12, Conns: 2, Depth: 4, BodyBytes: 64,
		Duration: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	want := map[string]int64{}
	var stored, total int64
	for code, n := range f.sent {
		want[StatusOf(code)] += n
		if Stored(StatusOf(code)) {
			stored += n
		}
		total += n
	}
	for _, st := range []string{StatusOK, StatusFlushDiskTimeout, StatusFlushSlaveTimeout, StatusSlaveNotAvailable, StatusError} {
		if r.Statuses[st] != want[st] || want[st] == 0 {
			t.Errorf("status %s: generator counted %d, broker sent %d (want both > 0)", st, r.Statuses[st], want[st])
		}
	}
	if r.Msgs != stored || r.Errors != want[StatusError] || int64(r.Latency.Count()) != total {
		t.Errorf("msgs %d errors %d latencies %d; broker stored %d, errors %d, total %d", r.Msgs, r.Errors, r.Latency.Count(), stored, want[StatusError], total)
	}
	if r.Unmatched != f.bogusN || r.Unmatched == 0 {
		t.Errorf("unmatched %d, broker sent %d bogus responses", r.Unmatched, f.bogusN)
	}
	if f.maxOut > 4 {
		t.Errorf("a connection had %d requests outstanding, depth is 4", f.maxOut)
	}
	if f.maxOut < 2 {
		t.Errorf("at most %d request outstanding: the generator does not pipeline", f.maxOut)
	}
	if !strings.Contains(r.FirstError, "response code 13") {
		t.Errorf("FirstError = %q, want the MESSAGE_ILLEGAL response", r.FirstError)
	}
	if r.MsgsPerSec <= 0 {
		t.Errorf("MsgsPerSec = %v", r.MsgsPerSec)
	}
}

// TestLoadV2Header sends SEND_MESSAGE_V2 with its short field names.
func TestLoadV2Header(t *testing.T) {
	f := newFakeBroker(t, 1, func(uint64) int16 { return remoting.Success })
	r, err := Load(context.Background(), LoadSpec{Addr: f.addr(), Producers: 2, BodyBytes: 16, Duration: 50 * time.Millisecond,
		Code: remoting.CodeSendMessageV2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Statuses[StatusOK] == 0 || r.Errors != 0 {
		t.Fatalf("statuses %v", r.Statuses)
	}
}

// TestLoadAllFail reports why when nothing is stored, and does not hang
// when the broker never answers.
func TestLoadAllFail(t *testing.T) {
	f := newFakeBroker(t, 1, func(uint64) int16 { return remoting.ServiceNotAvailable })
	_, err := Load(context.Background(), LoadSpec{Addr: f.addr(), Producers: 2, BodyBytes: 16, Duration: 30 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "response code 14") {
		t.Fatalf("err = %v, want the SERVICE_NOT_AVAILABLE response", err)
	}

	silent := newFakeBroker(t, 1<<30, nil)
	silent.flushAfter = time.Hour
	t0 := time.Now()
	_, err = Load(context.Background(), LoadSpec{Addr: silent.addr(), Producers: 3, BodyBytes: 16, Duration: 30 * time.Millisecond,
		Timeout: 100 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "no response within") {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if time.Since(t0) > 3*time.Second {
		t.Fatalf("took %v", time.Since(t0))
	}
}

// TestLoadConnectionLost: a broker that closes the connection makes the
// calls fail instead of hanging.
func TestLoadConnectionLost(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				br := bufio.NewReader(nc)
				remoting.ReadCommand(br, 0)
				nc.Close()
			}()
		}
	}()
	_, err = Load(context.Background(), LoadSpec{Addr: l.Addr().String(), Producers: 4, Conns: 2, BodyBytes: 16,
		Duration: 50 * time.Millisecond, Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "no message was stored") {
		t.Fatalf("err = %v", err)
	}
}

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		code int16
		want string
	}{{0, StatusOK}, {10, StatusFlushDiskTimeout}, {11, StatusSlaveNotAvailable}, {12, StatusFlushSlaveTimeout},
		{1, StatusError}, {13, StatusError}, {14, StatusError}, {17, StatusError}, {-1, StatusError}} {
		if got := StatusOf(tc.code); got != tc.want {
			t.Errorf("StatusOf(%d) = %s, want %s", tc.code, got, tc.want)
		}
	}
}

// TestRequestFrames: every request decodes with the broker's own codec
// into the fields the real client sends, with a properties string of
// KEYS, a 32-digit UNIQ_KEY and WAIT.
func TestRequestFrames(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v2 := rapid.Bool().Draw(t, "v2")
		s := LoadSpec{Addr: "x", Producers: 1, BodyBytes: 1, Duration: 1, Queues: rapid.IntRange(1, 64).Draw(t, "queues")}
		if v2 {
			s.Code = remoting.CodeSendMessageV2
		}
		s, err := s.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		p := rapid.IntRange(0, 4095).Draw(t, "p")
		id := rapid.Uint64().Draw(t, "id")
		body := rapid.SliceOfN(rapid.Byte(), 1, 512).Draw(t, "body")
		cmd := message(&s, p, body)
		born, propKey := fieldNames(s.Code)
		cmd.SetExt(propKey, string(properties(nil, 7, id)))
		cmd.SetExt(born, "1700000000000")
		cmd.Opaque = rapid.Int32Range(1, 1<<31-1).Draw(t, "opaque")
		frame := cmd.AppendFrame(nil)
		got, err := remoting.ReadCommand(bufio.NewReader(strings.NewReader(string(frame))), 0)
		if err != nil {
			t.Fatal(err)
		}
		if got.Code != s.Code || got.Opaque != cmd.Opaque || string(got.Body) != string(body) || got.IsResponse() {
			t.Fatalf("decoded %+v", got)
		}
		gotID, props := idOf(got)
		if gotID != id {
			t.Fatalf("KEYS id %x, want %x (props %q)", gotID, id, props)
		}
		if !strings.Contains(props, fmt.Sprintf("\x02UNIQ_KEY\x01%016X%016X\x02", 7, id)) || !strings.HasSuffix(props, "WAIT\x01true\x02") {
			t.Fatalf("properties %q", props)
		}
		topic, queue := "topic", "queueId"
		if v2 {
			topic, queue = "b", "e"
		}
		if got.Ext(topic) != DefaultTopic || got.Ext(queue) != strconv.Itoa(p%s.Queues) {
			t.Fatalf("topic %q queue %q", got.Ext(topic), got.Ext(queue))
		}
	})
}

func TestSpecValidation(t *testing.T) {
	for _, s := range []LoadSpec{
		{Producers: 1, BodyBytes: 1, Duration: time.Second},
		{Addr: "x", BodyBytes: 1, Duration: time.Second},
		{Addr: "x", Producers: 1, Duration: time.Second},
		{Addr: "x", Producers: 1, BodyBytes: 1},
		{Addr: "x", Producers: 1, BodyBytes: 1, Duration: time.Second, Code: remoting.CodePullMessage},
	} {
		if _, err := Load(context.Background(), s); err == nil {
			t.Errorf("Load(%+v) accepted", s)
		}
	}
	s, _ := (&LoadSpec{Addr: "x", Producers: 3, BodyBytes: 1, Duration: 1}).withDefaults()
	if s.Conns != 3 || s.Depth != DefaultDepth || s.Code != remoting.CodeSendMessage || s.Topic != DefaultTopic {
		t.Errorf("defaults: %+v", s)
	}
}
