// Package peers measures other systems in the same benchmark run, with the
// same body size and the same concurrency model as the keel cells: P
// producer goroutines, each with one message in flight, timing each
// publish from send to acknowledgement.
//
//   - NATS JetStream embedded (nats-server v2 in this process, file
//     storage, published to with the nats.go jetstream client): "r1-default"
//     (write per message, fsync every 2 minutes), "r1-sync" (SyncAlways:
//     fsync per message), "r3-sync" (three in-process servers clustered
//     over 127.0.0.1, SyncAlways, R3 stream).
//   - Redis, when redis-server is on PATH: "always" and "everysec"
//     (appendfsync), and "-wait" variants with a replica and WAIT 1 after
//     every SET. Otherwise each Redis configuration is reported skipped
//     with a note.
//
// Everything listens on 127.0.0.1 only.
package peers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/keelmq/keel/bench/hist"
)

// ErrSkipped means the peer cannot run here (the note says why).
var ErrSkipped = errors.New("peer skipped")

// Spec describes one run of one peer configuration.
type Spec struct {
	// System is "nats" or "redis"; Config one of its configurations.
	System, Config string
	// Dir is a scratch directory (created; removed afterwards).
	Dir       string
	Producers int
	BodyBytes int
	Warmup    time.Duration
	Duration  time.Duration
}

// Result is one run.
type Result struct {
	Msgs       int64
	MsgsPerSec float64
	Latency    hist.Histogram // ns, send to ack
	Errors     int64
	Note       string
}

// Run runs one configuration once. It returns an error wrapping
// ErrSkipped when the peer is not available.
func Run(ctx context.Context, s Spec) (*Result, error) {
	switch s.System {
	case "nats":
		return runNATS(ctx, s)
	case "redis":
		return runRedis(ctx, s)
	}
	return nil, fmt.Errorf("unknown peer system %q", s.System)
}

// load runs producers goroutines calling send until the window ends and
// measures the calls that started inside it. send(p, seq) publishes one
// message and returns when it is acknowledged.
func load(ctx context.Context, producers int, warmup, dur time.Duration, send func(p int, seq uint64) error) (*Result, error) {
	start := time.Now()
	mStart, mEnd := start.Add(warmup), start.Add(warmup+dur)
	type st struct {
		h    hist.Histogram
		n    int64
		errs int64
		err  error
	}
	ss := make([]st, producers)
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			s := &ss[p]
			var seq uint64
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(mEnd) {
					return
				}
				seq++
				err := send(p, seq)
				t1 := time.Now()
				if err != nil {
					s.errs++
					s.err = err
					time.Sleep(time.Millisecond)
					continue
				}
				if !t0.Before(mStart) {
					s.h.Record(int64(t1.Sub(t0)))
					s.n++
				}
			}
		}(p)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &Result{}
	var lastErr error
	for i := range ss {
		r.Latency.Merge(&ss[i].h)
		r.Msgs += ss[i].n
		r.Errors += ss[i].errs
		if ss[i].err != nil {
			lastErr = ss[i].err
		}
	}
	if r.Msgs == 0 && lastErr != nil {
		return nil, fmt.Errorf("every publish failed: %w", lastErr)
	}
	r.MsgsPerSec = float64(r.Msgs) / dur.Seconds()
	return r, nil
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}
