package remoting

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// startSlow sends cmd as a request written in chunk-byte pieces with a pause
// between them, and returns a channel for its response.
func (c *testClient) startSlow(cmd *Command, chunk int, pause time.Duration) <-chan *Command {
	cmd.Opaque = c.opaque.Add(1)
	cmd.Language = "GO"
	cmd.Version = 317
	ch := make(chan *Command, 1)
	c.mu.Lock()
	c.waiters[cmd.Opaque] = ch
	c.mu.Unlock()
	frame := cmd.AppendFrame(nil)
	go func() {
		for len(frame) > 0 {
			n := min(chunk, len(frame))
			c.wmu.Lock()
			_, err := c.nc.Write(frame[:n])
			c.wmu.Unlock()
			if err != nil {
				return
			}
			frame = frame[n:]
			time.Sleep(pause)
		}
	}()
	return ch
}

// waitBuffered waits until b holds want bytes.
func waitBuffered(t *testing.T, b *Budget, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.Stats().Buffered != want {
		if time.Now().After(deadline) {
			t.Fatalf("budget holds %d bytes, want %d", b.Stats().Buffered, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestBudgetBoundsBufferedRequests: many connections each send a large
// frame slowly, so that frames are reserved piece by piece side by side;
// the bytes the server holds never exceed the budget (the peak is tracked
// at every reservation, and sampled on the side too), partly read frames
// never exceed their share, the readers that did not fit waited instead,
// nobody deadlocked, and every request is answered.
func TestBudgetBoundsBufferedRequests(t *testing.T) {
	const (
		limit    = 4 << 20
		conns    = 24
		size     = 1 << 20
		maxFrame = size + 64<<10
		share    = limit - maxFrame
	)
	budget := NewBudget(limit)
	s := newEchoServer(ServerConfig{MaxFrame: maxFrame, Budget: budget})
	var inHandler atomic.Int64 // the most Buffered a handler saw
	s.Handle(codeEcho, func(req *Request) *Command {
		if b := budget.Stats().Buffered; b > inHandler.Load() {
			inHandler.Store(b)
		}
		r := NewResponse(req.Cmd, Success, "")
		r.Body = req.Cmd.Body[:16]
		return r
	})
	addr := startServer(t, s)

	stop := make(chan struct{})
	var sampled, streamed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			st := budget.Stats()
			if st.Buffered > sampled.Load() {
				sampled.Store(st.Buffered)
			}
			if st.Streaming > streamed.Load() {
				streamed.Store(st.Streaming)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()

	var answers []<-chan *Command
	for i := 0; i < conns; i++ {
		c := dialTest(t, addr)
		body := make([]byte, size)
		body[0] = byte(i)
		answers = append(answers, c.startSlow(&Command{Code: codeEcho, Body: body}, 64<<10, 2*time.Millisecond))
	}
	for i, ch := range answers {
		select {
		case r := <-ch:
			if r.Code != Success || len(r.Body) != 16 || r.Body[0] != byte(i) {
				t.Fatalf("connection %d: answer code %d body %d bytes", i, r.Code, len(r.Body))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("connection %d: no answer (budget %+v)", i, budget.Stats())
		}
	}
	close(stop)
	wg.Wait()

	st := budget.Stats()
	t.Logf("budget %+v, sampled peak %d, handler-seen peak %d", st, sampled.Load(), inHandler.Load())
	if st.Peak > limit || sampled.Load() > limit || inHandler.Load() > limit {
		t.Fatalf("buffered request bytes exceeded the budget: peak %d sampled %d in handler %d > %d",
			st.Peak, sampled.Load(), inHandler.Load(), limit)
	}
	if streamed.Load() > share {
		t.Fatalf("partly read frames held %d bytes, share %d", streamed.Load(), share)
	}
	if st.Peak < share {
		t.Fatalf("peak %d: the budget was never close to full, so the test proved nothing", st.Peak)
	}
	if st.Waits == 0 {
		t.Fatal("no reader ever waited for the budget: 24 MiB of frames fit in 4 MiB?")
	}
	waitBuffered(t, budget, 0)
}

// TestBudgetHeldUntilAsyncHandlerDone: a request answered from Request.Go
// keeps its frame's bytes reserved until the goroutine returns, so a second
// frame that does not fit beside it waits for that, then goes through.
func TestBudgetHeldUntilAsyncHandlerDone(t *testing.T) {
	budget := NewBudget(1 << 20)
	addr := startServer(t, newEchoServer(ServerConfig{Budget: budget}))
	a, b := dialTest(t, addr), dialTest(t, addr)
	start := time.Now()
	slow := a.start(&Command{Code: codeDelay, ExtFields: FieldsOf(map[string]string{"delay": "400ms"}), Body: make([]byte, 700<<10)})
	deadline := time.Now().Add(5 * time.Second)
	for budget.Stats().Buffered < 700<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("the first frame never took its budget: %+v", budget.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	fast := b.start(&Command{Code: codeEcho, Body: make([]byte, 700<<10)})
	// The first frame's handler waits 400 ms from after its reservation,
	// so for 200 ms from now the second frame cannot have got room.
	select {
	case <-fast:
		t.Fatalf("the second frame was served while the first still held the budget (after %v)", time.Since(start))
	case <-slow:
		t.Fatalf("the first answer came before its 400 ms delay (after %v)", time.Since(start))
	case <-time.After(200 * time.Millisecond):
	}
	select {
	case <-slow:
	case <-time.After(5 * time.Second):
		t.Fatal("no answer to the first frame")
	}
	select {
	case r := <-fast:
		if len(r.Body) != 700<<10 {
			t.Fatalf("second answer has %d bytes", len(r.Body))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the second frame never got the budget: %+v", budget.Stats())
	}
	if st := budget.Stats(); st.Waits == 0 || st.Peak > 1<<20 {
		t.Fatalf("budget %+v: want a wait and a peak within the limit", st)
	}
	waitBuffered(t, budget, 0)
}

// TestBudgetRefusesFrameLargerThanBudget: a frame bigger than the whole
// budget (though within MaxFrame) closes its connection at once instead of
// waiting forever; others keep working and nothing stays reserved.
func TestBudgetRefusesFrameLargerThanBudget(t *testing.T) {
	budget := NewBudget(64 << 10)
	addr := startServer(t, newEchoServer(ServerConfig{MaxFrame: 1 << 20, Budget: budget}))
	good, bad := dialTest(t, addr), dialTest(t, addr)
	bad.start(&Command{Code: codeEcho, Body: make([]byte, 200<<10)})
	if !bad.waitClosed(2 * time.Second) {
		t.Fatal("a frame larger than the budget did not close its connection")
	}
	if st := budget.Stats(); st.Refused != 1 || st.Buffered != 0 {
		t.Fatalf("budget %+v: want one refusal and nothing held", st)
	}
	if r := good.call(codeEcho, nil, make([]byte, 32<<10)); len(r.Body) != 32<<10 {
		t.Fatalf("other connection broken: %+v", r)
	}
	err := budget.Acquire(context.Background(), 65<<10)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Acquire over the limit: %v", err)
	}
}

// TestBudgetWaitEndsAtServerClose: a reader waiting for room does not
// hold up Close.
func TestBudgetWaitEndsAtServerClose(t *testing.T) {
	budget := NewBudget(1 << 20)
	s := newEchoServer(ServerConfig{Budget: budget})
	addr := startServer(t, s)
	a, b := dialTest(t, addr), dialTest(t, addr)
	a.start(&Command{Code: codeDelay, ExtFields: FieldsOf(map[string]string{"delay": "1h"}), Body: make([]byte, 700<<10)})
	deadline := time.Now().Add(5 * time.Second)
	for budget.Stats().Buffered < 700<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("the first frame never took its budget: %+v", budget.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	b.start(&Command{Code: codeEcho, Body: make([]byte, 700<<10)})
	for budget.Stats().Waits == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second reader never waited")
		}
		time.Sleep(time.Millisecond)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung on a reader waiting for the budget")
	}
	if st := budget.Stats(); st.Buffered != 0 {
		t.Fatalf("budget %+v after Close: want nothing held", st)
	}
}

// TestBudgetConcurrent hammers one budget from many goroutines: no moment
// holds more than the limit, waiters are granted in order, cancelled waits
// give nothing away, and everything is returned at the end.
func TestBudgetConcurrent(t *testing.T) {
	const limit = 1000
	b := NewBudget(limit)
	var held atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for i := 0; i < 500; i++ {
				n := int64(1 + rng.IntN(400))
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(200))*time.Microsecond)
				err := b.Acquire(ctx, n)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Acquire(%d): %v", n, err)
					}
					continue
				}
				if h := held.Add(n); h > limit {
					t.Errorf("%d bytes held at once, limit %d", h, limit)
				}
				time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
				held.Add(-n)
				b.Release(n)
			}
		}(uint64(g))
	}
	wg.Wait()
	st := b.Stats()
	if st.Buffered != 0 || st.Peak > limit || st.Waits == 0 {
		t.Fatalf("after the run: %+v", st)
	}
}

// TestBudgetFIFO: a large waiter at the head is not overtaken by a
// smaller one that would fit.
func TestBudgetFIFO(t *testing.T) {
	b := NewBudget(100)
	if err := b.Acquire(context.Background(), 60); err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 2)
	go func() { _ = b.Acquire(context.Background(), 80); order <- 80 }()
	for b.Stats().Waits < 1 {
		time.Sleep(time.Millisecond)
	}
	go func() { _ = b.Acquire(context.Background(), 30); order <- 30 }()
	for b.Stats().Waits < 2 {
		time.Sleep(time.Millisecond)
	}
	select {
	case n := <-order:
		t.Fatalf("waiter %d granted while 60 of 100 are held and 80 waits first", n)
	case <-time.After(50 * time.Millisecond):
	}
	b.Release(60) // 80 fits now; 30 does not fit beside it
	if n := <-order; n != 80 {
		t.Fatalf("first grant %d, want 80", n)
	}
	select {
	case n := <-order:
		t.Fatalf("waiter %d granted beside 80 of 100", n)
	case <-time.After(50 * time.Millisecond):
	}
	b.Release(80)
	if n := <-order; n != 30 {
		t.Fatalf("second grant %d, want 30", n)
	}
	b.Release(30)
	if st := b.Stats(); st.Buffered != 0 || st.Peak != 80 {
		t.Fatalf("%+v", st)
	}
}

// stallFrame dials addr and writes the first sent bytes of a request frame
// with a body of size bytes, then nothing more; the connection is closed
// at the end of the test.
func stallFrame(t *testing.T, addr string, size, sent int) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	frame := (&Command{Code: codeEcho, Language: "GO", Version: 317, Opaque: 1, Body: make([]byte, size)}).AppendFrame(nil)
	if _, err := nc.Write(frame[:sent]); err != nil {
		t.Fatal(err)
	}
	return nc
}

// TestBudgetStalledFramesDoNotBlockOthers is the slowloris case: with a
// 4 MiB budget, connections announce 1 MiB frames and send nothing more
// (or only part of them); they hold only what they sent, and another
// client's small request is answered at once, as are small requests on
// connections that have a large frame half sent. Before the budget was
// reserved as bytes arrive, the four announcements took the whole budget
// and everything else waited for the idle timeout.
func TestBudgetStalledFramesDoNotBlockOthers(t *testing.T) {
	const limit = 4 << 20
	for _, tc := range []struct {
		name     string
		maxFrame int
		sent     int // bytes of each stalled frame sent
	}{
		{"announce-only", 2 << 20, 4},
		{"announce-only-maxframe-over-budget", 16 << 20, 4},
		{"header-sent", 2 << 20, 300},
		{"part-sent", 2 << 20, 200 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			budget := NewBudget(limit)
			addr := startServer(t, newEchoServer(ServerConfig{MaxFrame: tc.maxFrame, Budget: budget}))
			for i := 0; i < 8; i++ {
				stallFrame(t, addr, 1<<20, tc.sent)
			}
			// What they sent has arrived; give the readers time to reserve it.
			time.Sleep(100 * time.Millisecond)
			st := budget.Stats()
			// A frame holds what arrived beyond its 8-byte prefix, or up to a
			// quarter more; one that sent only its prefix holds nothing.
			if maxHeld := int64(8 * (tc.sent + tc.sent/4)); tc.sent <= 8 && st.Buffered != 0 || st.Buffered > maxHeld {
				t.Fatalf("stalled frames that sent %d bytes each hold %+v", tc.sent, st)
			}
			c := dialTest(t, addr)
			for i := 0; i < 20; i++ {
				r, err := c.callTimeout(&Command{Code: codeEcho, Body: make([]byte, 1<<10)}, time.Second)
				if err != nil {
					t.Fatalf("small request %d behind stalled frames: %v (budget %+v)", i, err, budget.Stats())
				}
				if r.Code != Success || len(r.Body) != 1<<10 {
					t.Fatalf("small request %d: %+v", i, r)
				}
			}
		})
	}
}

// TestBudgetStalledLaneKeepsSmallRequestsFlowing: partly sent frames fill
// the share of partly read frames and one more holds the lane, stalled;
// a further large frame waits for the lane, but small requests, which
// arrive whole, are still answered, and the large one goes through once
// the staller hangs up.
func TestBudgetStalledLaneKeepsSmallRequestsFlowing(t *testing.T) {
	const (
		limit    = 4 << 20
		maxFrame = 1<<20 + 64<<10
		share    = limit - maxFrame
	)
	budget := NewBudget(limit)
	addr := startServer(t, newEchoServer(ServerConfig{MaxFrame: maxFrame, Budget: budget}))
	var stalled []net.Conn
	for i := 0; i < 5; i++ {
		stalled = append(stalled, stallFrame(t, addr, 1<<20, 600<<10))
	}
	deadline := time.Now().Add(5 * time.Second)
	for budget.Stats().Buffered < 5*600<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled frames never reserved what they sent: %+v", budget.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	st := budget.Stats()
	if st.Streaming > share || st.Streaming == st.Buffered {
		t.Fatalf("budget %+v: want the share (%d) full and one frame beyond it on the lane", st, share)
	}
	big := dialTest(t, addr)
	bigAnswer := big.start(&Command{Code: codeEcho, Body: make([]byte, 1<<20)})
	c := dialTest(t, addr)
	for i := 0; i < 20; i++ {
		r, err := c.callTimeout(&Command{Code: codeEcho, Body: make([]byte, 1<<10)}, time.Second)
		if err != nil {
			t.Fatalf("small request %d behind a stalled lane: %v (budget %+v)", i, err, budget.Stats())
		}
		if r.Code != Success {
			t.Fatalf("small request %d: %+v", i, r)
		}
	}
	select {
	case <-bigAnswer:
		t.Fatal("a large frame was read while the share was full and the lane held")
	default:
	}
	for _, nc := range stalled {
		nc.Close()
	}
	select {
	case r := <-bigAnswer:
		if len(r.Body) != 1<<20 {
			t.Fatalf("large answer has %d bytes", len(r.Body))
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the large frame never went through: %+v", budget.Stats())
	}
	waitBuffered(t, budget, 0)
	if st := budget.Stats(); st.Peak > limit || st.Streaming != 0 {
		t.Fatalf("after the run: %+v", st)
	}
}

// TestBudgetReleasedWhenHandlerPanicsAfterAsync: a handler that takes an
// Async reply and then panics gets SYSTEM_ERROR, its frame's budget and
// its MaxInflight slot come back at once, and calling the orphaned reply
// later does nothing (no second answer, no double release).
func TestBudgetReleasedWhenHandlerPanicsAfterAsync(t *testing.T) {
	budget := NewBudget(1 << 20)
	s := newEchoServer(ServerConfig{Budget: budget, MaxInflight: 2})
	replies := make(chan func(*Command), 4)
	s.Handle(9, func(req *Request) *Command {
		reply, ok := req.Async()
		if !ok {
			return nil
		}
		replies <- reply
		panic("boom after Async")
	})
	s.Handle(10, func(req *Request) *Command {
		reply, ok := req.Async()
		if !ok {
			return nil
		}
		req.Go(func(context.Context) *Command {
			replies <- reply
			panic("async boom after Async")
		})
		return nil
	})
	c := dialTest(t, startServer(t, s))
	for _, code := range []int16{9, 10} {
		r := c.call(code, nil, make([]byte, 100<<10))
		if r.Code != SystemError {
			t.Fatalf("code %d: got %+v", code, r)
		}
		waitBuffered(t, budget, 0)
		reply := <-replies
		reply(NewResponse(&Command{}, Success, "late")) // must do nothing
		reply(nil)
		if st := budget.Stats(); st.Buffered != 0 {
			t.Fatalf("code %d: budget %+v after the late reply", code, st)
		}
		// Every MaxInflight slot came back.
		s.mu.Lock()
		for conn := range s.conns {
			if n := len(conn.sem); n != 0 {
				t.Errorf("code %d: %d MaxInflight slots still taken", code, n)
			}
		}
		s.mu.Unlock()
	}
	if r := c.call(codeEcho, nil, []byte("x")); r.Code != Success {
		t.Fatalf("echo after the panics: %+v", r)
	}
	c.mu.Lock()
	n := len(c.arrivals)
	c.mu.Unlock()
	if n != 3 {
		t.Fatalf("%d answers, want 3 (a late reply was sent?)", n)
	}
}

// recordingReserver records readCommand's reservations against what the
// reader has delivered so far.
type recordingReserver struct {
	t        *testing.T
	r        *countingReader
	total    int64
	reserved int64
	calls    int
	final    bool // a reservation with partial false was made
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (rr *recordingReserver) begin(total int64) error { rr.total = total; return nil }

func (rr *recordingReserver) reserve(n int64, partial bool) error {
	rr.calls++
	if n <= 0 || rr.final {
		rr.t.Fatalf("reservation %d of %d bytes (partial %v) after the final one: %v", rr.calls, n, partial, rr.final)
	}
	rr.reserved += n
	// The body starts 8 bytes into the frame; what is reserved stays
	// within a quarter (plus one piece of the read) of what has arrived.
	arrived := rr.r.n - 8
	if rr.reserved > arrived+arrived/4+1 {
		rr.t.Fatalf("reserved %d bytes with %d arrived", rr.reserved, arrived)
	}
	rr.final = !partial
	if !partial && arrived < rr.total-4 {
		rr.t.Fatalf("final reservation with %d of %d bytes arrived", arrived, rr.total-4)
	}
	return nil
}

// TestReadCommandReservesAsBytesArrive: readCommand's buffer grows, and
// is reserved, only as bytes arrive, in total exactly the frame's length
// past the prefix; a frame that has wholly arrived is reserved in one
// piece.
func TestReadCommandReservesAsBytesArrive(t *testing.T) {
	body := make([]byte, 300<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	frame := (&Command{Code: 3, Opaque: 9, Body: body}).AppendFrame(nil)
	for _, tc := range []struct {
		name string
		src  func() io.Reader
		one  bool
	}{
		{"one-byte-reads", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(frame)) }, false},
		{"half-reads", func() io.Reader { return iotest.HalfReader(bytes.NewReader(frame)) }, false},
		{"whole-small", func() io.Reader { return bytes.NewReader(frame[:0]) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := frame
			if tc.one {
				want = (&Command{Code: 3, Opaque: 9, Body: body[:1000]}).AppendFrame(nil)
			}
			cr := &countingReader{r: tc.src()}
			if tc.one {
				cr.r = bytes.NewReader(want)
			}
			rr := &recordingReserver{t: t, r: cr}
			cmd, err := readCommand(bufio.NewReaderSize(cr, 64<<10), 1<<20, rr)
			if err != nil {
				t.Fatal(err)
			}
			if rr.reserved != int64(len(want))-8 || tc.one && !rr.final {
				t.Fatalf("reserved %d in %d calls (final %v), frame body %d", rr.reserved, rr.calls, rr.final, len(want)-8)
			}
			if tc.one && rr.calls != 1 {
				t.Fatalf("a frame that arrived whole took %d reservations", rr.calls)
			}
			if cmd.Code != 3 || cmd.Opaque != 9 || !bytes.Equal(cmd.AppendFrame(nil), want) {
				t.Fatalf("decoded frame differs")
			}
		})
	}
}
