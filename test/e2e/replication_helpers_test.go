package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk/replication"
)

// This file holds the replication tests' helpers: starting masters and
// slaves from the shipped profiles, a typed view of GET /status, an
// in-test TCP proxy for the HA link, and reading a stopped node's log.

// replStatus is the part of GET /status the replication tests read.
type replStatus struct {
	Role        string            `json:"role"`
	Epoch       int32             `json:"epoch"`
	Listeners   map[string]string `json:"listeners"`
	Offsets     map[string]int64  `json:"offsets"`
	Writable    string            `json:"writable"`
	Replication struct {
		AckedOffset int64
		InSync      int
		Fenced      bool
		Reason      string
		Replicas    []struct {
			ID        string
			Addr      string
			AckOffset int64
			InSync    bool
			Connected bool
		}
	} `json:"Replication"`
	Plugins []struct {
		Kind   string         `json:"kind"`
		Name   string         `json:"name"`
		State  string         `json:"state"`
		Status map[string]any `json:"status"`
	} `json:"plugins"`
}

func (s *replStatus) committed() int64 { return s.Offsets["committed"] }

// plugin returns the status map of the plugin of kind ("replication").
func (s *replStatus) plugin(kind string) map[string]any {
	for _, p := range s.Plugins {
		if p.Kind == kind {
			return p.Status
		}
	}
	return nil
}

// String summarises the status for failure messages.
func (s *replStatus) String() string {
	if s == nil {
		return "<no status>"
	}
	return fmt.Sprintf("role=%s epoch=%d writable=%q offsets=%v replication={acked=%d in_sync=%d fenced=%v reason=%q replicas=%+v} plugin=%v",
		s.Role, s.Epoch, s.Writable, s.Offsets, s.Replication.AckedOffset, s.Replication.InSync,
		s.Replication.Fenced, s.Replication.Reason, s.Replication.Replicas, s.plugin("replication"))
}

// rstatus reads GET /status as a replStatus.
func (k *keelProc) rstatus() (*replStatus, error) {
	resp, err := http.Get("http://" + k.Admin + "/status")
	if err != nil {
		return nil, fmt.Errorf("GET /status: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /status: %s", resp.Status)
	}
	var st replStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("decoding /status: %w", err)
	}
	return &st, nil
}

// mustStatus is rstatus that fails the test on error.
func (k *keelProc) mustStatus() *replStatus {
	k.t.Helper()
	st, err := k.rstatus()
	if err != nil {
		k.t.Fatalf("%s: %v", k.cfg.data, err)
	}
	return st
}

// waitStatus polls /status until cond holds, or fails the test after d
// with what and the last status seen.
func (k *keelProc) waitStatus(d time.Duration, what string, cond func(*replStatus) bool) *replStatus {
	k.t.Helper()
	var last *replStatus
	var lastErr error
	if err := waitFor(d, func() bool {
		last, lastErr = k.rstatus()
		return lastErr == nil && cond(last)
	}); err != nil {
		k.t.Fatalf("waiting %v for %s: last status %v (error %v)", d, what, last, lastErr)
	}
	return last
}

// haAddr is the bound HA listener of a node that is master (from /status).
func (k *keelProc) haAddr() string {
	k.t.Helper()
	st := k.waitStatus(10*time.Second, "the HA listener in /status listeners.ha", func(s *replStatus) bool {
		return s.Listeners["ha"] != ""
	})
	return st.Listeners["ha"]
}

// runLines returns the keel log lines of the current run that contain every
// one of subs.
func (k *keelProc) runLines(subs ...string) []string {
	return k.log.grep(append([]string{fmt.Sprintf("[run %d] ", k.run)}, subs...)...)
}

// startMaster starts `keel serve` with a master profile (sync-master.toml
// or async-master.toml) on data ("" for a fresh temp dir). The profile's
// namesrv_addrs (the slave's name server at a fixed port) is cleared so
// routes name only this node; node_id names the node in its peers' logs.
func startMaster(t *testing.T, profile, data, id string, extra ...string) *keelProc {
	t.Helper()
	sets := []string{`server.namesrv_addrs=[]`, "replication.config.node_id=" + id}
	return startKeel(t, keelConfig{profile: profile, data: data, extra: append(sets, extra...)})
}

// startSlave starts `keel serve` with a slave profile (sync-slave.toml or
// async-slave.toml) that follows the master HA address masterHA. Its
// profile's namesrv_addrs (the master's name server at a fixed port) is
// cleared.
func startSlave(t *testing.T, profile, data, id, masterHA string, extra ...string) *keelProc {
	t.Helper()
	sets := []string{`server.namesrv_addrs=[]`, "replication.role=slave", "replication.master_addr=" + masterHA, "server.broker_id=1",
		"replication.config.node_id=" + id, "replication.config.reconnect_backoff_max=500ms"}
	return startKeel(t, keelConfig{profile: profile, data: data, extra: append(sets, extra...)})
}

// waitWritable waits until the node accepts writes (not fenced) and has
// at least inSync replicas in sync.
func (k *keelProc) waitWritable(inSync int) *replStatus {
	k.t.Helper()
	return k.waitStatus(15*time.Second, fmt.Sprintf("writable with %d replica(s) in sync", inSync), func(s *replStatus) bool {
		return s.Writable == "yes" && !s.Replication.Fenced && s.Replication.InSync >= inSync
	})
}

// waitSameCommitted waits until the slave's committed offset equals the
// master's (and the master's is at least min) and returns it.
func waitSameCommitted(t *testing.T, master, slave *keelProc, min int64, d time.Duration) int64 {
	t.Helper()
	var ms, ss *replStatus
	var err1, err2 error
	if err := waitFor(d, func() bool {
		ms, err1 = master.rstatus()
		ss, err2 = slave.rstatus()
		return err1 == nil && err2 == nil && ms.committed() >= min && ms.committed() == ss.committed() &&
			ss.Offsets["dispatched"] == ss.committed()
	}); err != nil {
		t.Fatalf("the slave did not reach the master's committed offset (>= %d) within %v:\n  master: %v (%v)\n  slave:  %v (%v)",
			min, d, ms, err1, ss, err2)
	}
	return ms.committed()
}

// adminCLI runs `keel admin CMD --admin ADDR` and returns its output.
func adminCLI(t *testing.T, cmd, addr string) (string, error) {
	t.Helper()
	c := exec.Command(keelBin, "admin", cmd, "--admin", addr)
	out, err := c.CombinedOutput()
	return string(out), err
}

// storeLog is a stopped node's log as `keel store inspect` reads it.
type storeLog struct {
	rep  *core.Report
	recs []record.Record
}

// inspectStore reads every record of the (stopped or idle) store in dir.
func inspectStore(t *testing.T, dir string) *storeLog {
	t.Helper()
	rep, err := core.Inspect(dir, core.InspectOptions{DumpRecords: 1 << 30})
	if err != nil {
		t.Fatalf("inspecting %s: %v", dir, err)
	}
	if rep.FirstBad >= 0 {
		t.Errorf("store %s: first bad record at %d: %s", dir, rep.FirstBad, rep.FirstBadError)
	}
	return &storeLog{rep: rep, recs: rep.Records}
}

// bodies returns the set of record bodies.
func (l *storeLog) bodies() map[string]int {
	m := make(map[string]int, len(l.recs))
	for _, r := range l.recs {
		m[string(r.Body)]++
	}
	return m
}

// withPrefix returns the bodies starting with prefix, sorted.
func (l *storeLog) withPrefix(prefix string) []string {
	var out []string
	for _, r := range l.recs {
		if strings.HasPrefix(string(r.Body), prefix) {
			out = append(out, string(r.Body))
		}
	}
	sort.Strings(out)
	return out
}

// describe gives a record for failure messages.
func describeRecord(r record.Record) string {
	return fmt.Sprintf("phys=%d size=%d topic=%s queue=%d qoff=%d stored=%d body=%q",
		r.PhysOffset, r.TotalSize, r.Topic, r.QueueID, r.QueueOffset, r.StoreTimestamp, abbrevBody(r.Body))
}

func abbrevBody(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// compareLogs reports (as test errors) every difference between two
// stores' logs: end offset, record count, and each record's offsets,
// topic, queue, store timestamp, properties and body. It returns whether
// they are identical.
func compareLogs(t *testing.T, nameA string, a *storeLog, nameB string, b *storeLog) bool {
	t.Helper()
	same := true
	if a.rep.End != b.rep.End || len(a.recs) != len(b.recs) {
		t.Errorf("logs differ: %s ends at %d with %d records, %s at %d with %d records",
			nameA, a.rep.End, len(a.recs), nameB, b.rep.End, len(b.recs))
		same = false
	}
	diffs := 0
	for i := 0; i < min(len(a.recs), len(b.recs)); i++ {
		ra, rb := a.recs[i], b.recs[i]
		if ra.PhysOffset != rb.PhysOffset || ra.TotalSize != rb.TotalSize || ra.Topic != rb.Topic ||
			ra.QueueID != rb.QueueID || ra.QueueOffset != rb.QueueOffset || ra.StoreTimestamp != rb.StoreTimestamp ||
			!bytes.Equal(ra.Properties, rb.Properties) || !bytes.Equal(ra.Body, rb.Body) {
			same = false
			if diffs++; diffs <= 5 {
				t.Errorf("record %d differs:\n  %s: %s\n  %s: %s", i, nameA, describeRecord(ra), nameB, describeRecord(rb))
			}
		}
	}
	if diffs > 5 {
		t.Errorf("... %d differing records in all", diffs)
	}
	return same
}

// sendOne sends one message with body as its key and returns the result
// (err is the client's error; a non-nil result has a status).
func sendOne(p sender, topic, body string, timeout time.Duration) (*primitive.SendResult, error) {
	m := primitive.NewMessage(topic, []byte(body))
	m.WithKeys([]string{body})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return p.SendSync(ctx, m)
}

// physOffset is the commit log offset a send result's offset message id
// names, or -1.
func physOffset(res *primitive.SendResult) int64 {
	if res == nil || res.OffsetMsgID == "" {
		return -1
	}
	_, off, err := record.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		return -1
	}
	return off
}

var sendStatusNames = map[primitive.SendStatus]string{
	primitive.SendOK:                "SEND_OK",
	primitive.SendFlushDiskTimeout:  "FLUSH_DISK_TIMEOUT",
	primitive.SendFlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT",
	primitive.SendSlaveNotAvailable: "SLAVE_NOT_AVAILABLE",
}

func statusName(s primitive.SendStatus) string {
	if n, ok := sendStatusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("status(%d)", s)
}

// wipeDir removes everything in dir and leaves it empty.
func wipeDir(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatalf("wiping %s: %v", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("recreating %s: %v", dir, err)
	}
}

// Proxy modes.
const (
	proxyUp     = iota // forward both ways
	proxyPaused        // keep connections open, forward nothing
	proxyCut           // close every connection and refuse new ones
)

// haProxy is an in-test TCP proxy on 127.0.0.1 between a slave and its
// master's HA listener. It can pause the link (bytes stop flowing, the
// connections stay open), cut it (every connection closed, new ones
// refused), and delay the master-to-slave direction.
type haProxy struct {
	t        *testing.T
	ln       net.Listener
	upstream string
	delay    time.Duration // master-to-slave latency

	mu    sync.Mutex
	cond  *sync.Cond
	mode  int
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// startProxy listens on 127.0.0.1:0 and forwards to upstream.
func startProxy(t *testing.T, upstream string, delay time.Duration) *haProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &haProxy{t: t, ln: ln, upstream: upstream, delay: delay, conns: map[net.Conn]struct{}{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the address slaves should dial.
func (p *haProxy) Addr() string { return p.ln.Addr().String() }

func (p *haProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		mode := p.mode
		p.mu.Unlock()
		if mode == proxyCut {
			c.Close()
			continue
		}
		u, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.mode == proxyCut {
			p.mu.Unlock()
			c.Close()
			u.Close()
			continue
		}
		p.conns[c], p.conns[u] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(c, u, 0)       // slave -> master
		go p.pump(u, c, p.delay) // master -> slave
	}
}

// pump copies src to dst, holding data while paused and delaying each
// chunk by delay.
func (p *haProxy) pump(src, dst net.Conn, delay time.Duration) {
	defer p.wg.Done()
	defer func() {
		src.Close()
		dst.Close()
	}()
	type chunk struct {
		at time.Time
		b  []byte
	}
	queue := make(chan chunk, 4096)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for ch := range queue {
			if d := time.Until(ch.at.Add(delay)); d > 0 {
				time.Sleep(d)
			}
			if !p.waitUp() {
				return
			}
			if _, err := dst.Write(ch.b); err != nil {
				return
			}
		}
	}()
	defer func() { <-writerDone }()
	defer close(queue)
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b := append([]byte(nil), buf[:n]...)
			select {
			case queue <- chunk{time.Now(), b}:
			case <-writerDone:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitUp blocks while the proxy is paused; false means cut.
func (p *haProxy) waitUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.mode == proxyPaused {
		p.cond.Wait()
	}
	return p.mode == proxyUp
}

func (p *haProxy) setMode(mode int) {
	p.mu.Lock()
	p.mode = mode
	var toClose []net.Conn
	if mode == proxyCut {
		for c := range p.conns {
			toClose = append(toClose, c)
		}
		p.conns = map[net.Conn]struct{}{}
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	for _, c := range toClose {
		c.Close()
	}
}

func (p *haProxy) pause()   { p.setMode(proxyPaused) }
func (p *haProxy) resume()  { p.setMode(proxyUp) }
func (p *haProxy) cut()     { p.setMode(proxyCut) }
func (p *haProxy) restore() { p.setMode(proxyUp) }

func (p *haProxy) close() {
	p.ln.Close()
	p.cut()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.t.Logf("HA proxy: connections did not close within 5s")
	}
}

// rawPeer dials addr, writes junk and reports whether the server closed
// the connection within d (true) rather than keeping it open.
func rawPeer(addr string, junk []byte, d time.Duration) (closed bool, got []byte, err error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return false, nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer c.Close()
	if _, err := c.Write(junk); err != nil {
		return true, nil, nil // reset already
	}
	c.SetReadDeadline(time.Now().Add(d))
	got, err = io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, got, nil
	}
	return true, got, nil
}

// lyingReplica is an in-test HA peer that knows the secret, follows the
// protocol honestly until told to lie, then acknowledges beyond what the
// master sent it.
type lyingReplica struct {
	c        *replication.Conn
	received int64         // log end received so far (reader goroutine only)
	caughtUp chan struct{} // closed once it acknowledged the master's end honestly
	lie      chan struct{} // close to make the next acknowledgement a lie
	closed   chan error    // the error that ended the session
}

// startLyingReplica authenticates to the master at addr as an empty
// replica, receives its log and acknowledges it honestly up to end; after
// lie is closed it answers the next DATA frame with an acknowledgement
// 1 MiB beyond it.
func startLyingReplica(t *testing.T, addr, secret string, end int64) *lyingReplica {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("lying replica: dial %s: %v", addr, err)
	}
	c := replication.NewConn(nc, replication.DefaultMaxFrame, 30*time.Second)
	t.Cleanup(func() { c.Close() })
	if _, err := replication.ClientAuth(c, secret, "liar"); err != nil {
		t.Fatalf("lying replica: authentication with the right secret failed: %v", err)
	}
	if err := c.WriteFrame(true, replication.FrameState, replication.State{}.Marshal()); err != nil {
		t.Fatalf("lying replica: send state: %v", err)
	}
	f, err := c.ExpectFrame(replication.FramePlan)
	if err != nil {
		t.Fatalf("lying replica: read plan: %v", err)
	}
	plan, err := replication.DecodePlan(f.Payload)
	if err != nil {
		t.Fatalf("lying replica: decode plan: %v", err)
	}
	if err := c.WriteFrame(true, replication.FrameAck, replication.Ack{Received: plan.From, Flushed: plan.From}.Marshal()); err != nil {
		t.Fatalf("lying replica: first ack: %v", err)
	}
	r := &lyingReplica{c: c, received: plan.From, caughtUp: make(chan struct{}), lie: make(chan struct{}), closed: make(chan error, 1)}
	go func() {
		caught := false
		for {
			f, err := c.ReadFrame()
			if err != nil {
				r.closed <- err
				return
			}
			switch f.Type {
			case replication.FrameError:
				m, _ := replication.DecodeErrorMsg(f.Payload)
				r.closed <- &replication.PeerError{Code: m.Code, Reason: m.Reason}
				return
			case replication.FrameData:
				h, data, err := replication.DecodeData(f.Payload)
				if err != nil {
					r.closed <- err
					return
				}
				r.received = h.Offset + int64(len(data))
				ack := r.received
				select {
				case <-r.lie:
					ack += 1 << 20
				default:
				}
				if err := c.WriteFrame(true, replication.FrameAck, replication.Ack{Received: ack, Flushed: ack}.Marshal()); err != nil {
					r.closed <- err
					return
				}
				if !caught && r.received >= end {
					caught = true
					close(r.caughtUp)
				}
			}
		}
	}()
	return r
}
