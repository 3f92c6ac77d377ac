// Package wire measures keel end to end over its client protocol: a load
// generator speaking the RocketMQ remoting protocol (package host/remoting)
// sends SEND_MESSAGE requests to a real keel node over TCP on 127.0.0.1 and
// times each acknowledgement.
//
// The generator opens Conns TCP connections. P logical producers are spread
// over them (producer p uses connection p mod Conns); each producer sends
// one message, waits for its response and then sends the next, like
// rocketmq-client-go's SendSync, so P is the number of messages in flight.
// A connection carries up to Depth outstanding requests at once (a
// producer waits for a free slot first); responses are matched to requests
// by opaque, in whatever order they arrive. Requests of one connection are
// coalesced into as few writes as the producers' timing allows.
//
// Run starts a keel node in this process (host.Start with a profile from
// configs/profiles, every listener on 127.0.0.1:0, the store in a scratch
// directory), drives it with Load, and stops it. The node runs in the
// benchmark's own process on purpose: bench/peers embeds NATS JetStream the
// same way (server and client sharing one Go runtime and the same cores),
// so the two are compared under the same conditions, and no separately
// built binary is needed.
package wire

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/remoting"
)

// Producer statuses, named as RocketMQ's SendStatus names them (the
// same names as bench/engine's cells), plus ERROR for every other response
// code and for transport failures and timeouts.
const (
	StatusOK                = "SEND_OK"
	StatusFlushDiskTimeout  = "FLUSH_DISK_TIMEOUT"
	StatusFlushSlaveTimeout = "FLUSH_SLAVE_TIMEOUT"
	StatusSlaveNotAvailable = "SLAVE_NOT_AVAILABLE"
	StatusError             = "ERROR"
)

// StatusOf names the producer status of a SEND_MESSAGE response code:
// 0 is SEND_OK; 10, 12 and 11 are FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT
// and SLAVE_NOT_AVAILABLE (the message was stored, its durability
// promise was not kept); every other code is ERROR.
func StatusOf(code int16) string {
	switch code {
	case remoting.Success:
		return StatusOK
	case remoting.FlushDiskTimeout:
		return StatusFlushDiskTimeout
	case remoting.FlushSlaveTimeout:
		return StatusFlushSlaveTimeout
	case remoting.SlaveNotAvailable:
		return StatusSlaveNotAvailable
	}
	return StatusError
}

// Stored reports whether a status means the broker stored the message.
func Stored(status string) bool { return status != StatusError }

// DefaultTopic is the topic the generator sends to.
const DefaultTopic = "BenchTopic"

// Defaults of LoadSpec.
const (
	DefaultConns   = 8
	DefaultDepth   = 32
	DefaultQueues  = 8
	DefaultTimeout = 10 * time.Second
	// opaqueBase starts every connection's opaque counter so that opaques
	// never collide with 0, stay positive for over a billion requests and
	// always have 10 decimal digits (patched into a fixed-width field).
	opaqueBase = 1_000_000_000
)

// LoadSpec describes one run of the load generator against a broker.
type LoadSpec struct {
	// Addr is the broker's host:port. Required.
	Addr string
	// Topic defaults to DefaultTopic; the broker must auto-create it or
	// already have it.
	Topic string
	// Queues: producer p sends to queue p mod Queues. Default
	// DefaultQueues; the topic must have at least this many.
	Queues int
	// Producers is the number of messages in flight (each producer waits
	// for its ack before sending again). Required, >= 1.
	Producers int
	// Conns is the number of TCP connections. Default DefaultConns, and
	// never more than Producers.
	Conns int
	// Depth caps the outstanding requests of one connection. Default
	// DefaultDepth.
	Depth int
	// BodyBytes is the message body size. Required, >= 1.
	BodyBytes int
	// Warmup runs unmeasured before Duration, the measured window.
	// Duration is required (> 0).
	Warmup, Duration time.Duration
	// Code is remoting.CodeSendMessage (default; long header field names,
	// what rocketmq-client-go sends) or remoting.CodeSendMessageV2 (short
	// names, what the Java client sends).
	Code int16
	// Timeout bounds the wait for one response. Default DefaultTimeout.
	Timeout time.Duration
	// Group is the producerGroup header field. Default "bench_producer".
	Group string
	// Count, when > 0, ends the measured window once Count requests were
	// sent in it (Duration still bounds the window); Result.Elapsed is
	// then the window's real length.
	Count int64
	// TimerDelay, when set, makes every message a timer message: it
	// carries TIMER_DELIVER_MS, and PropertyDue with the same value, of
	// its born time plus TimerDelay(id) in epoch milliseconds, where id is
	// the message's KEYS value (MessageID). A delay not after the born
	// time makes the broker store the message as a plain one.
	TimerDelay func(id uint64) time.Duration
}

// PropertyDue is the user property a timer message of the generator
// carries beside TIMER_DELIVER_MS, with the same value: the broker keeps
// user properties on the delivered copy, so a reader of the real topic
// can tell how late each copy was stored.
const PropertyDue = "KEEL_BENCH_DUE_MS"

// Body is producer p's message body of n bytes (letters, shifted by p).
func Body(p, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + (i+p)%26)
	}
	return b
}

// MessageID is the id of producer p's seq-th message: the value of its
// KEYS property (16 hex digits) and the second half of its UNIQ_KEY.
func MessageID(p int, seq uint64) uint64 { return uint64(p)<<40 | seq }

func (s *LoadSpec) withDefaults() (LoadSpec, error) {
	o := *s
	if o.Addr == "" {
		return o, errors.New("wire: LoadSpec.Addr is required")
	}
	if o.Producers < 1 || o.BodyBytes < 1 || o.Duration <= 0 {
		return o, fmt.Errorf("wire: need Producers >= 1, BodyBytes >= 1 and Duration > 0 (got %d, %d, %v)", o.Producers, o.BodyBytes, o.Duration)
	}
	if o.Topic == "" {
		o.Topic = DefaultTopic
	}
	if o.Queues <= 0 {
		o.Queues = DefaultQueues
	}
	if o.Conns <= 0 {
		o.Conns = DefaultConns
	}
	o.Conns = min(o.Conns, o.Producers)
	if o.Depth <= 0 {
		o.Depth = DefaultDepth
	}
	if o.Code == 0 {
		o.Code = remoting.CodeSendMessage
	}
	if o.Code != remoting.CodeSendMessage && o.Code != remoting.CodeSendMessageV2 {
		return o, fmt.Errorf("wire: LoadSpec.Code %d: want %d (SEND_MESSAGE) or %d (SEND_MESSAGE_V2)", o.Code, remoting.CodeSendMessage, remoting.CodeSendMessageV2)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Count < 0 {
		return o, fmt.Errorf("wire: LoadSpec.Count %d is negative", o.Count)
	}
	if o.Group == "" {
		o.Group = "bench_producer"
	}
	return o, nil
}

// Result is one run of the generator. Counts cover only requests sent
// inside the measured window.
type Result struct {
	// Msgs is the number of messages the broker stored (every status but
	// ERROR); MsgsPerSec is Msgs over the window.
	Msgs       int64
	MsgsPerSec float64
	// Latency is the producer-observed ack latency in ns, from the moment
	// the producer wants to send (before waiting for a connection slot) to
	// the response, for every request in the window, errors included.
	Latency hist.Histogram
	// Statuses counts requests by producer status (StatusOK, ...).
	Statuses map[string]int64
	// Errors counts ERROR statuses: other response codes, timeouts and
	// connection failures.
	Errors int64
	// Unmatched counts responses whose opaque matched no outstanding
	// request (over the whole run, warmup included); a correct broker
	// sends none.
	Unmatched int64
	// FirstError describes the first error seen (a response code with its
	// remark, or a transport error), "" if none.
	FirstError string
	// Elapsed is the measured window's length: Duration, or with
	// LoadSpec.Count the time from its start to the last response of it.
	Elapsed time.Duration
}

// call is one producer's request slot: the reader delivers the matching
// response (or a connection error) on done, which has room for one.
type call struct {
	done chan reply
}

type reply struct {
	resp response
	err  error
	// owed: the reader delivered it and counted it in conn.awaiting; the
	// producer that takes it must call settle once.
	owed bool
}

// conn is one pipelined connection.
type conn struct {
	nc     net.Conn
	slots  chan struct{} // Depth tokens
	opaque atomic.Int32

	mu      sync.Mutex
	pending map[int32]*call
	err     error // set once the connection failed; pending is then empty

	wmu    sync.Mutex
	wbuf   []byte
	wake   chan struct{}
	closed chan struct{}
	// readBusy: the reader holds more whole responses than it delivered;
	// the producers it releases will queue requests, so the writer waits
	// for the end of the batch (batchDone) before writing.
	readBusy  atomic.Bool
	batchDone chan struct{}
	// awaiting counts responses the reader delivered whose producers have
	// not yet queued their next request (or given up sending on this
	// connection): the writer waits for it to reach zero, so that one
	// write carries every request a batch of responses released.
	awaiting atomic.Int32

	unmatched atomic.Int64
}

func dial(ctx context.Context, addr string, depth int) (*conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial broker %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := &conn{nc: nc, slots: make(chan struct{}, depth), pending: map[int32]*call{},
		wake: make(chan struct{}, 1), closed: make(chan struct{}), batchDone: make(chan struct{}, 1)}
	c.opaque.Store(opaqueBase - 1)
	go c.readLoop()
	go c.writeLoop()
	return c, nil
}

// close shuts the connection; outstanding calls get an error.
func (c *conn) close() {
	c.fail(net.ErrClosed)
	_ = c.nc.Close()
}

// fail marks the connection failed and delivers err to every pending call.
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	p := c.pending
	c.pending = map[int32]*call{}
	c.mu.Unlock()
	close(c.closed)
	for _, cl := range p {
		cl.done <- reply{err: err}
	}
}

func (c *conn) readLoop() {
	fr := &frameReader{br: bufio.NewReaderSize(c.nc, 64<<10)}
	for {
		r, err := fr.next()
		if err != nil {
			c.fail(fmt.Errorf("read response: %w", err))
			return
		}
		// A broker-initiated request is not answered (the generator
		// answers none) and an unmatched response is counted, but either
		// can end a batch: the batch bookkeeping below runs for every
		// frame, or the writer would wait for a batchDone that never
		// comes.
		if r.isResp {
			c.deliver(r)
		}
		if more := remoting.FrameBuffered(fr.br); more != c.readBusy.Load() {
			c.readBusy.Store(more)
			if !more {
				select {
				case c.batchDone <- struct{}{}:
				default:
				}
			}
		}
	}
}

// deliver hands response r to the call waiting for its opaque, or counts
// it as unmatched.
func (c *conn) deliver(r response) {
	c.mu.Lock()
	cl, ok := c.pending[r.opaque]
	if ok {
		delete(c.pending, r.opaque)
	}
	c.mu.Unlock()
	if !ok {
		c.unmatched.Add(1)
		return
	}
	c.awaiting.Add(1)
	cl.done <- reply{resp: r, owed: true}
}

// writeLoop writes whatever frames were queued since the last write, in
// one write call.
func (c *conn) writeLoop() {
	var spare []byte
	for {
		select {
		case <-c.wake:
		case <-c.batchDone:
		case <-c.closed:
			return
		}
		if c.readBusy.Load() {
			continue // batchDone comes at the end of the reader's batch
		}
		if c.awaiting.Load() > 0 {
			continue // the last producer released by the batch kicks wake
		}
		c.wmu.Lock()
		buf := c.wbuf
		c.wbuf = spare[:0]
		c.wmu.Unlock()
		if len(buf) == 0 {
			spare = buf
			continue
		}
		if _, err := c.nc.Write(buf); err != nil {
			c.fail(fmt.Errorf("write requests: %w", err))
			return
		}
		spare = buf
	}
}

// settle records that a producer which took an owed reply has queued its
// next request or will not send one now; the last to settle wakes the
// writer.
func (c *conn) settle() {
	if c.awaiting.Add(-1) == 0 {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// start registers cl under a fresh opaque, patches the opaque, bornMs and
// id into t and queues its frame. It fails when the connection has failed.
func (c *conn) start(cl *call, t *frameTemplate, bornMs int64, id uint64) (int32, error) {
	op := c.opaque.Add(1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return op, err
	}
	c.pending[op] = cl
	c.mu.Unlock()
	t.patch(op, bornMs, id)
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, t.buf...)
	c.wmu.Unlock()
	// A producer a batch of responses released (awaiting > 0) leaves
	// the wake-up to the last of them (settle): one wake-up per batch
	// instead of one per request.
	if c.awaiting.Load() == 0 {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	return op, nil
}

// abandon forgets the outstanding request op of cl (after a timeout or
// cancellation). If the reader or a connection failure already took it
// from pending, exactly one reply is on its way to cl.done; it is drained
// so that cl can be reused.
func (c *conn) abandon(cl *call, op int32) {
	c.mu.Lock()
	_, ok := c.pending[op]
	delete(c.pending, op)
	c.mu.Unlock()
	if !ok {
		if r := <-cl.done; r.owed {
			c.settle()
		}
	}
}

// message builds producer p's request template.
func message(s *LoadSpec, p int, body []byte) *remoting.Command {
	cmd := &remoting.Command{Code: s.Code, Language: "GO", Version: 317, Body: body}
	q := strconv.Itoa(p % s.Queues)
	if s.Code == remoting.CodeSendMessageV2 {
		for k, v := range map[string]string{"a": s.Group, "b": s.Topic, "c": "TBW102", "d": "4", "e": q, "f": "0", "h": "0",
			"j": "0", "k": "false", "l": "16", "m": "false", "n": "broker-a"} {
			cmd.SetExt(k, v)
		}
	} else {
		// The fields rocketmq-client-go sends with every SendSync.
		for k, v := range map[string]string{"producerGroup": s.Group, "topic": s.Topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
			"queueId": q, "sysFlag": "0", "flag": "0", "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "16",
			"batch": "false", "bname": "broker-a"} {
			cmd.SetExt(k, v)
		}
	}
	return cmd
}

// fieldNames returns the header names of the fields rewritten per message.
func fieldNames(code int16) (born, props string) {
	if code == remoting.CodeSendMessageV2 {
		return "g", "i"
	}
	return "bornTimestamp", "properties"
}

// properties is the client's properties string for one message: KEYS and
// UNIQ_KEY (32 hex digits, like the client's), and WAIT=true.
func properties(dst []byte, runID, id uint64) []byte {
	dst = append(dst, "KEYS\x01"...)
	dst = appendHex(dst, id)
	dst = append(dst, "\x02UNIQ_KEY\x01"...)
	dst = appendHex(dst, runID)
	dst = appendHex(dst, id)
	dst = append(dst, "\x02WAIT\x01true\x02"...)
	return dst
}

func appendHex(dst []byte, v uint64) []byte {
	const digits = "0123456789ABCDEF"
	for i := 60; i >= 0; i -= 4 {
		dst = append(dst, digits[(v>>uint(i))&0xF])
	}
	return dst
}

// Load connects to s.Addr and runs the producers for Warmup + Duration,
// measuring the requests sent inside the Duration window. It returns an
// error when it cannot connect, when ctx ends, or when no message at all
// was stored (the error then says why).
func Load(ctx context.Context, spec LoadSpec) (*Result, error) {
	s, err := spec.withDefaults()
	if err != nil {
		return nil, err
	}
	conns := make([]*conn, 0, s.Conns)
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	for i := 0; i < s.Conns; i++ {
		c, err := dial(ctx, s.Addr, s.Depth)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	runID := uint64(time.Now().UnixNano())

	type pstats struct {
		h        hist.Histogram
		msgs     int64
		statuses map[string]int64
		first    string
	}
	ps := make([]pstats, s.Producers)
	start := time.Now()
	mStart, mEnd := start.Add(s.Warmup), start.Add(s.Warmup+s.Duration)
	var counted atomic.Int64 // requests started in the window (LoadSpec.Count)
	var lastEnd atomic.Int64 // UnixNano of the window's last response
	var wg sync.WaitGroup
	for p := 0; p < s.Producers; p++ {
		ps[p].statuses = map[string]int64{}
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			st := &ps[p]
			c := conns[p%len(conns)]
			body := Body(p, s.BodyBytes)
			tmpl, err := newTemplate(message(&s, p, body), s.Code, runID)
			var dueAt [2]int
			if err == nil && s.TimerDelay != nil {
				dueAt, err = tmpl.insertDue()
			}
			if err != nil {
				st.first = err.Error()
				return
			}
			cl := &call{done: make(chan reply, 1)}
			timer := time.NewTimer(s.Timeout)
			defer timer.Stop()
			var seq uint64
			owed := false // the last reply was counted in c.awaiting
			settle := func() {
				if owed {
					owed = false
					c.settle()
				}
			}
			defer settle()
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(mEnd) {
					return
				}
				if s.Count > 0 && !t0.Before(mStart) && counted.Add(1) > s.Count {
					return
				}
				seq++
				if s.TimerDelay != nil {
					due := t0.Add(s.TimerDelay(MessageID(p, seq))).UnixMilli()
					for _, at := range dueAt {
						putDigits(tmpl.buf[at:at+bornDigits], uint64(max(due, 0)))
					}
				}
				status, detail := StatusError, ""
				acquired := false
				select {
				case c.slots <- struct{}{}:
					acquired = true
				default:
					settle() // cannot queue now: do not hold the writer
					select {
					case c.slots <- struct{}{}:
						acquired = true
					case <-c.closed:
					case <-ctx.Done():
						return
					}
				}
				op, err := c.start(cl, tmpl, t0.UnixMilli(), MessageID(p, seq))
				settle()
				if err != nil {
					detail = err.Error()
				} else {
					timer.Reset(s.Timeout)
					select {
					case r := <-cl.done:
						owed = r.owed
						switch {
						case r.err != nil:
							detail = r.err.Error()
						case r.resp.opaque != op:
							detail = fmt.Sprintf("response opaque %d for request %d", r.resp.opaque, op)
						default:
							status = StatusOf(r.resp.code)
							if status == StatusError {
								detail = fmt.Sprintf("response code %d: %s", r.resp.code, r.resp.remark)
							}
						}
					case <-timer.C:
						c.abandon(cl, op)
						detail = fmt.Sprintf("no response within %v", s.Timeout)
					case <-ctx.Done():
						c.abandon(cl, op)
					}
				}
				if acquired {
					<-c.slots
				}
				t1 := time.Now()
				if !t0.Before(mStart) {
					storeMax(&lastEnd, t1.UnixNano())
					st.h.Record(int64(t1.Sub(t0)))
					st.statuses[status]++
					if Stored(status) {
						st.msgs++
					}
				}
				if status == StatusError {
					if st.first == "" {
						st.first = detail
					}
					settle()
					time.Sleep(time.Millisecond) // do not spin on a failing broker

				}
			}
		}(p)
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &Result{Statuses: map[string]int64{}}
	for i := range ps {
		r.Latency.Merge(&ps[i].h)
		r.Msgs += ps[i].msgs
		for k, v := range ps[i].statuses {
			r.Statuses[k] += v
		}
		if r.FirstError == "" {
			r.FirstError = ps[i].first
		}
	}
	r.Errors = r.Statuses[StatusError]
	for _, c := range conns {
		r.Unmatched += c.unmatched.Load()
	}
	if r.Msgs == 0 {
		if r.FirstError != "" {
			return nil, fmt.Errorf("wire: no message was stored: %s", r.FirstError)
		}
		return nil, errors.New("wire: no message was stored in the window")
	}
	r.Elapsed = s.Duration
	if s.Count > 0 {
		r.Elapsed = min(time.Duration(lastEnd.Load()-mStart.UnixNano()), s.Duration)
	}
	r.MsgsPerSec = float64(r.Msgs) / r.Elapsed.Seconds()
	return r, nil
}

// storeMax raises v to n if it is below.
func storeMax(v *atomic.Int64, n int64) {
	for e := v.Load(); e < n && !v.CompareAndSwap(e, n); e = v.Load() {
	}
}

// dueSentinel fills the due-time digits of a timer template until the
// first patch; it is 13 digits wide, like a born timestamp.
const dueSentinel = "0000000000000"

// insertDue adds TIMER_DELIVER_MS and PropertyDue, each with a 13-digit
// placeholder, to the properties of t (a template from newTemplate with
// a JSON header), fixes the frame's lengths and the patch offsets behind
// the insertion, and returns where the two placeholders are.
func (t *frameTemplate) insertDue() (at [2]int, err error) {
	const sep1, sep2 = `\u0001`, `\u0002`
	anchor := []byte("WAIT" + sep1 + "true" + sep2)
	if t.buf[4] != remoting.SerializeJSON || bytes.Count(t.buf, anchor) != 1 {
		return at, errors.New("wire: timer template: the properties' WAIT entry is not found once in a JSON header")
	}
	pos := bytes.Index(t.buf, anchor)
	var ins []byte
	for i, name := range []string{record.PropertyTimerDeliverMS, PropertyDue} {
		ins = append(ins, name+sep1...)
		at[i] = pos + len(ins)
		ins = append(ins, dueSentinel+sep2...)
	}
	buf := make([]byte, 0, len(t.buf)+len(ins))
	buf = append(append(append(buf, t.buf[:pos]...), ins...), t.buf[pos:]...)
	binary.BigEndian.PutUint32(buf[0:4], binary.BigEndian.Uint32(buf[0:4])+uint32(len(ins)))
	info := binary.BigEndian.Uint32(buf[4:8])
	binary.BigEndian.PutUint32(buf[4:8], info&0xFF000000|(info&0xFFFFFF+uint32(len(ins))))
	shift := func(off *int) {
		if *off >= pos {
			*off += len(ins)
		}
	}
	shift(&t.opaqueAt)
	shift(&t.bornAt)
	shift(&t.idAt[0])
	shift(&t.idAt[1])
	t.buf = buf
	return at, nil
}
