package remoting

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
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
// frame slowly; the bytes the server holds never exceed the budget (the
// peak is tracked at every reservation, and sampled on the side too), the
// readers that did not fit waited instead, and every request is answered.
func TestBudgetBoundsBufferedRequests(t *testing.T) {
	const (
		limit = 4 << 20
		conns = 24
		size  = 1 << 20
	)
	budget := NewBudget(limit)
	s := newEchoServer(ServerConfig{MaxFrame: 2 << 20, Budget: budget})
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
	var sampled atomic.Int64
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
			if b := budget.Stats().Buffered; b > sampled.Load() {
				sampled.Store(b)
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
	if st.Peak < limit-size {
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
