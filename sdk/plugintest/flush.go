package plugintest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
)

// RunFlush runs the flush strategy conformance suite. newPlugin returns a
// fresh, unconfigured instance each time it is called (several subtests
// each use their own). The subtests check that:
//
//   - RejectsUnknownConfigKey: Configure refuses an unknown key in
//     [flush.config] with an error wrapping sdk.ErrInvalidConfig that
//     names the key.
//   - AcksUnderLoad: with concurrent producers, every ack (the host's
//     Store.WaitFlushed on the record's end) completes within the policy's
//     Timeout when the policy waits for flushes, or within
//     WithAsyncFlushWithin otherwise; the flushed offset never passes the
//     committed offset and never moves back.
//   - PowerCut: on a vfs.CrashFS, a power cut in the middle of the load
//     loses nothing that was reported flushed: after the cut and a reopen,
//     every record whose flush was acknowledged is present and intact.
//   - StopStopsFlushing: after Stop returns, the flushed offset no longer
//     moves.
func RunFlush(t *testing.T, newPlugin func(t *testing.T) sdk.FlushStrategy, opts ...Option) {
	o := buildOptions(opts)
	t.Run("RejectsUnknownConfigKey", func(t *testing.T) {
		checkRejectsUnknownKey(t, newPlugin(t), writeProfile(t, "flush", "", withUnknownKey(o.config)))
	})
	t.Run("AcksUnderLoad", func(t *testing.T) { flushAcksUnderLoad(t, newPlugin, o) })
	t.Run("PowerCut", func(t *testing.T) { flushPowerCut(t, newPlugin, o) })
	t.Run("StopStopsFlushing", func(t *testing.T) { flushStopStops(t, newPlugin, o) })
}

// ackWait is how long an ack may wait under policy pol.
func ackWait(t *testing.T, pol sdk.FlushPolicy, o options) time.Duration {
	if !pol.WaitFlush {
		return o.asyncWithin
	}
	if pol.Timeout <= 0 {
		t.Errorf("AckPolicy %+v waits for flushes but has no Timeout", pol)
		return 5 * time.Second
	}
	return pol.Timeout
}

func flushAcksUnderLoad(t *testing.T, newPlugin func(t *testing.T) sdk.FlushStrategy, o options) {
	e := newEnv(t, o, false)
	p := newPlugin(t)
	start(t, p, writeProfile(t, "flush", "", o.config), e.host)
	pol := p.AckPolicy()
	wait := ackWait(t, pol, o)

	// Monitor: flushed <= committed, flushed never decreases.
	stop := make(chan struct{})
	var monitor sync.WaitGroup
	var violation atomic.Value
	monitor.Add(1)
	go func() {
		defer monitor.Done()
		var last int64
		for {
			select {
			case <-stop:
				return
			default:
			}
			pos := e.store.Positions()
			if pos.Flushed > pos.Committed {
				violation.CompareAndSwap(nil, fmt.Sprintf("flushed %d passed committed %d", pos.Flushed, pos.Committed))
			}
			if pos.Flushed < last {
				violation.CompareAndSwap(nil, fmt.Sprintf("flushed went back from %d to %d", last, pos.Flushed))
			}
			last = pos.Flushed
			time.Sleep(100 * time.Microsecond)
		}
	}()

	var wg sync.WaitGroup
	var maxLat atomic.Int64
	var failures atomic.Int64
	for g := 0; g < o.producers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var last int64
			for i := 0; i < o.perProducer; i++ {
				r, err := e.store.Append(message("FlushT", int32(g%4), fmt.Sprintf("p%d-%d", g, i), ""))
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				last = r.End()
				// A policy that waits acks every record; otherwise check
				// every 25th record and the last.
				if !pol.WaitFlush && i%25 != 24 && i != o.perProducer-1 {
					continue
				}
				begin := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				err = e.store.WaitFlushed(ctx, last)
				cancel()
				lat := time.Since(begin)
				for {
					m := maxLat.Load()
					if int64(lat) <= m || maxLat.CompareAndSwap(m, int64(lat)) {
						break
					}
				}
				if err != nil {
					if failures.Add(1) <= 3 {
						t.Errorf("record ending at %d not flushed within %v (policy %+v): %v", last, wait, pol, err)
					}
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(stop)
	monitor.Wait()
	if v := violation.Load(); v != nil {
		t.Error(v)
	}
	t.Logf("policy %+v: %d×%d appends, slowest ack %v", pol, o.producers, o.perProducer, time.Duration(maxLat.Load()))
}

func flushPowerCut(t *testing.T, newPlugin func(t *testing.T) sdk.FlushStrategy, o options) {
	quiet := o
	quiet.logLevel = 100 // the cut makes the store log expected I/O errors
	e := newEnv(t, quiet, true)
	p := newPlugin(t)
	lc := start(t, p, writeProfile(t, "flush", "", o.config), e.host)
	pol := p.AckPolicy()
	wait := ackWait(t, pol, o)

	type ack struct {
		off  int64
		body string
	}
	var mu sync.Mutex
	var acks []ack
	var flushedBeforeCut int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for g := 0; g < o.producers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			var pending []ack
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf("cut-p%d-%d", g, i)
				r, err := e.store.Append(message("CutT", int32(g%4), body, ""))
				if err != nil {
					return
				}
				pending = append(pending, ack{r.PhysOffset, body})
				if !pol.WaitFlush && len(pending) < 20 {
					continue
				}
				wctx, wcancel := context.WithTimeout(ctx, wait)
				err = e.store.WaitFlushed(wctx, r.End())
				wcancel()
				if err != nil {
					return
				}
				mu.Lock()
				acks = append(acks, pending...)
				mu.Unlock()
				pending = pending[:0]
			}
		}(g)
	}
	// Let the load run until enough acks or enough time.
	eventually(3*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) >= 300
	})
	flushedBeforeCut = e.store.Positions().Flushed
	e.powerCut(func() {
		cancel()
		wg.Wait()
		lc.crash()
	})
	mu.Lock()
	defer mu.Unlock()
	if len(acks) == 0 {
		t.Fatalf("no record was reported flushed before the cut (policy %+v): the check exercised nothing", pol)
	}
	pos := e.store.Positions()
	if pos.Committed < flushedBeforeCut {
		t.Errorf("after the cut the log ends at %d, but %d was reported flushed before it", pos.Committed, flushedBeforeCut)
	}
	lost := 0
	for _, a := range acks {
		b, err := e.store.ReadRecord(a.off)
		if err == nil {
			var body string
			body, err = recordBody(b)
			if err == nil && body != a.body {
				err = fmt.Errorf("body %q, want %q", body, a.body)
			}
		}
		if err != nil {
			if lost++; lost <= 5 {
				t.Errorf("record at %d (%s) was reported flushed before the power cut but is lost: %v", a.off, a.body, err)
			}
		}
	}
	if lost > 0 {
		t.Errorf("%d of %d flushed records lost", lost, len(acks))
	}
	t.Logf("%d records reported flushed before the cut, all present; recovered log ends at %d (flushed before cut %d)", len(acks), pos.Committed, flushedBeforeCut)
}

func flushStopStops(t *testing.T, newPlugin func(t *testing.T) sdk.FlushStrategy, o options) {
	e := newEnv(t, o, false)
	p := newPlugin(t)
	lc := start(t, p, writeProfile(t, "flush", "", o.config), e.host)
	wait := ackWait(t, p.AckPolicy(), o)
	var end int64
	for i := 0; i < 10; i++ {
		r, err := e.store.Append(message("StopT", 0, fmt.Sprint(i), ""))
		if err != nil {
			t.Fatal(err)
		}
		end = r.End()
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := e.store.WaitFlushed(ctx, end); err != nil {
		t.Fatalf("not flushed within %v: %v", wait, err)
	}
	lc.stop()
	before := e.store.Positions()
	for i := 0; i < 10; i++ {
		if _, err := e.store.Append(message("StopT", 0, fmt.Sprint("after-", i), "")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(min(o.asyncWithin, 300*time.Millisecond))
	if after := e.store.Positions(); after.Flushed != before.Flushed {
		t.Errorf("flushed offset moved from %d to %d after Stop returned", before.Flushed, after.Flushed)
	}
}
