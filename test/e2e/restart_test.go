package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// TestRestartMidStreamSIGTERM and TestRestartMidStreamKill9 restart keel
// (sync-flush profile) while a producer sends continuously, then check:
//
//   - every message whose SendSync returned SEND_OK is delivered, to a
//     consumer that kept running across the restart and to a group whose
//     consumer was replaced;
//   - neither group starts again from the beginning: the running consumer
//     does not re-receive the early messages, and the replacement consumer
//     resumes from the committed offset (within the at-least-once
//     boundary);
//   - the restarted store has at least everything /status reported flushed
//     before the stop.
//
// After a kill -9 the running consumer typically needs about 33 s to catch
// up: rocketmq-client-go does not fail requests pending on a connection
// that closed, so the long-polling pulls in flight at the crash wait out
// their 30 s RPC timeout (internal/remote/remote_client.go, closeConnection
// leaves responseTable alone). That is the client's behaviour, not keel's.
func TestRestartMidStreamSIGTERM(t *testing.T) { testRestartMidStream(t, false) }

// TestRestartMidStreamKill9: see TestRestartMidStreamSIGTERM.
func TestRestartMidStreamKill9(t *testing.T) { testRestartMidStream(t, true) }

// streamProducer sends numbered messages in a loop and records which were
// acknowledged with SEND_OK.
type streamProducer struct {
	p     sender
	topic string
	stop  chan struct{}
	done  chan struct{}

	mu        sync.Mutex
	attempted []string    // every body a send was attempted for
	acked     []string    // bodies acknowledged with SEND_OK
	ackedAt   []time.Time // when each ack arrived
	failures  int         // sends that returned an error
	notOK     map[primitive.SendStatus]int
	lastErr   error
}

func startStreamProducer(p sender, topic, prefix string) *streamProducer {
	s := &streamProducer{p: p, topic: topic, stop: make(chan struct{}), done: make(chan struct{}),
		notOK: map[primitive.SendStatus]int{}}
	go func() {
		defer close(s.done)
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				return
			default:
			}
			body := fmt.Sprintf("%s-%06d", prefix, i)
			m := primitive.NewMessage(topic, []byte(body))
			m.WithKeys([]string{body})
			s.mu.Lock()
			s.attempted = append(s.attempted, body)
			s.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			res, err := s.p.SendSync(ctx, m)
			cancel()
			s.mu.Lock()
			switch {
			case err != nil:
				s.failures++
				s.lastErr = err
			case res.Status != primitive.SendOK:
				s.notOK[res.Status]++
			default:
				s.acked = append(s.acked, body)
				s.ackedAt = append(s.ackedAt, time.Now())
			}
			s.mu.Unlock()
			if err != nil {
				// keel is down: do not spin.
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	return s
}

func (s *streamProducer) ackCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acked)
}

func (s *streamProducer) finish() {
	close(s.stop)
	<-s.done
}

// ackedBefore returns the acked bodies whose ack arrived before t.
func (s *streamProducer) ackedBefore(t time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, at := range s.ackedAt {
		if at.Before(t) {
			out = append(out, s.acked[i])
		}
	}
	return out
}

func testRestartMidStream(t *testing.T, kill bool) {
	skipShort(t)
	t.Parallel()
	logClientOnFailure(t)
	how := "sigterm"
	if kill {
		how = "kill9"
	}
	k := startKeel(t, keelConfig{profile: "sync-flush.toml"})
	topic := "E2E_Restart_" + how
	groupLive := "G_Live_" + how     // one consumer, kept running across the restart
	groupResume := "G_Resume_" + how // consumer stopped before the restart, replaced after it

	live := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: groupLive, instance: "live-" + how, topic: topic}, live.handler)
	before := newReceived()
	resume1 := startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: groupResume, instance: "resume1-" + how, topic: topic}, before.handler)

	sp := startStreamProducer(newProducer(t, k.Namesrv, "restart-producer-"+how), topic, "rs")
	t0 := time.Now()
	defer func() {
		select {
		case <-sp.stop:
		default:
			sp.finish()
		}
	}()

	// Phase 1: run long enough that keel has persisted consumer offsets at
	// least once (RocketMQ, like keel, persists them every 5 s; a kill -9
	// may lose the commits since then, which at-least-once allows).
	if err := waitFor(30*time.Second, func() bool {
		_, nl := live.distinct()
		_, nb := before.distinct()
		return time.Since(t0) > 7*time.Second && sp.ackCount() >= 300 && nl >= 200 && nb >= 200
	}); err != nil {
		_, nl := live.distinct()
		_, nb := before.distinct()
		t.Fatalf("phase 1 did not get going within 30s: %d acked, live consumer %d, resume consumer %d (last send error: %v)",
			sp.ackCount(), nl, nb, sp.lastErr)
	}
	// The early messages: acked in the first second, consumed long ago by
	// both groups; neither may see them again after the restart.
	early := sp.ackedBefore(t0.Add(time.Second))
	if len(early) == 0 {
		t.Fatalf("no message was acked in the first second")
	}
	if err := resume1.Shutdown(); err != nil {
		t.Fatalf("shutting down the first consumer of %s: %v", groupResume, err)
	}
	consumedBefore := func() map[string]bool {
		before.mu.Lock()
		defer before.mu.Unlock()
		m := map[string]bool{}
		for b := range before.counts {
			m[b] = true
		}
		return m
	}()
	n0 := sp.ackCount()
	if err := waitFor(10*time.Second, func() bool { return sp.ackCount() >= n0+50 }); err != nil {
		t.Fatalf("producer stalled before the restart")
	}

	st, err := k.status()
	if err != nil {
		t.Fatalf("%v", err)
	}
	flushedBefore := offsetOf(st, "flushed")
	ackedBeforeStop := sp.ackCount()
	if kill {
		k.kill()
	} else {
		k.stop()
	}
	stoppedAt := time.Now()
	k.restart()
	t.Logf("keel restarted (%s) in %v with %d messages acked so far; flushed offset before the stop %d",
		how, time.Since(stoppedAt).Round(time.Millisecond), ackedBeforeStop, flushedBefore)
	st, err = k.status()
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if c := offsetOf(st, "committed"); c < flushedBefore {
		t.Errorf("after the restart /status reports committed offset %d, below the flushed offset %d reported before the stop",
			c, flushedBefore)
	}

	// Phase 2: the producer gets acks again.
	n1 := sp.ackCount()
	if err := waitFor(40*time.Second, func() bool { return sp.ackCount() >= n1+300 }); err != nil {
		t.Fatalf("after the restart the producer got %d more acks in 40s (last error: %v)", sp.ackCount()-n1, sp.lastErr)
	}
	sp.finish()
	sp.mu.Lock()
	acked := append([]string(nil), sp.acked...)
	attempted := append([]string(nil), sp.attempted...)
	t.Logf("producer: %d attempted, %d SEND_OK, %d errors, other statuses %v", len(attempted), len(acked), sp.failures, sp.notOK)
	sp.mu.Unlock()

	after := newReceived()
	startConsumer(t, consumerConfig{namesrv: k.Namesrv, group: groupResume, instance: "resume2-" + how, topic: topic}, after.handler)
	var wantAfter []string // acked messages the first consumer of groupResume had not consumed
	for _, b := range acked {
		if !consumedBefore[b] {
			wantAfter = append(wantAfter, b)
		}
	}

	// The running consumer's queues may stall until its next heartbeat
	// (every 30 s) tells the restarted broker about its group, then the
	// next rebalance (every 20 s): allow for both.
	var liveDone, afterDone time.Duration
	if err := waitFor(75*time.Second, func() bool {
		if liveDone == 0 && live.hasAll(acked) {
			liveDone = time.Since(stoppedAt)
			t.Logf("running consumer complete %v after the stop", liveDone.Round(time.Millisecond))
		}
		if afterDone == 0 && after.hasAll(wantAfter) {
			afterDone = time.Since(stoppedAt)
			t.Logf("replacement consumer complete %v after the stop", afterDone.Round(time.Millisecond))
		}
		return liveDone > 0 && afterDone > 0
	}); err != nil {
		if m := live.missing(acked); len(m) > 0 {
			t.Errorf("ACKNOWLEDGED MESSAGES LOST for the consumer kept running across the restart: %d of %d missing: %s",
				len(m), len(acked), abbrev(m))
		}
		if m := after.missing(wantAfter); len(m) > 0 {
			t.Errorf("ACKNOWLEDGED MESSAGES LOST for the replacement consumer of %s: %d of %d missing: %s",
				groupResume, len(m), len(wantAfter), abbrev(m))
		}
		return
	}
	t.Logf("both groups had every acknowledged message %v after the restart", time.Since(stoppedAt).Round(time.Millisecond))
	for name, r := range map[string]*received{"running": live, "replacement": after} {
		if u := r.unexpected(attempted); len(u) > 0 {
			t.Errorf("%s consumer received bodies never sent: %s", name, abbrev(u))
		}
	}
	// The running consumer must not have been sent back to the start.
	var liveAgain []string
	for _, b := range early {
		if live.count(b) > 1 {
			liveAgain = append(liveAgain, b)
		}
	}
	if len(liveAgain) > 0 {
		t.Errorf("the consumer kept running across the restart re-received %d of the %d earliest messages (reset towards the start?): %s",
			len(liveAgain), len(early), abbrev(liveAgain))
	}
	t.Logf("running consumer: %d redeliveries in all", len(live.duplicates()))

	// The replacement consumer resumes from the committed offset.
	var again, earlyAgain []string
	for b := range consumedBefore {
		if after.has(b) {
			again = append(again, b)
		}
	}
	for _, b := range early {
		if after.has(b) {
			earlyAgain = append(earlyAgain, b)
		}
	}
	t.Logf("replacement consumer re-received %d of the %d messages its group consumed before the restart", len(again), len(consumedBefore))
	if len(earlyAgain) > 0 {
		t.Errorf("the replacement consumer of %s re-received %d of the %d earliest messages: its committed offset was reset towards the start: %s",
			groupResume, len(earlyAgain), len(early), abbrev(earlyAgain))
	}
	if !kill && len(again) > 10 {
		// A clean shutdown persists every committed offset: only the
		// at-least-once boundary may come again.
		t.Errorf("after a clean restart the replacement consumer of %s re-received %d of the %d messages its group had consumed and committed",
			groupResume, len(again), len(consumedBefore))
	}
}

// offsetOf reads /status offsets[name], or -1.
func offsetOf(st map[string]any, name string) int64 {
	offs, _ := st["offsets"].(map[string]any)
	v, ok := offs[name].(float64)
	if !ok {
		return -1
	}
	return int64(v)
}
