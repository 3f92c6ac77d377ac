// Package echo is a custom replication plugin of the kind a keel user
// could write, built only on keel's sdk package: the master streams its
// committed log to each slave over a small TCP protocol of its own
// (protocol.go); the slave appends the bytes at the same offsets with
// Host.AppendLog and acknowledges them; the master reports the
// acknowledged offset with Host.ReportReplication, which releases
// producers' acks when the policy waits for replicas.
//
// Each slave names itself with an id kept in its DataDir (identity.go);
// the master keeps one replica per id, and a slave that reconnects
// replaces its previous connection, so it never counts twice towards
// wait_replicas.
//
// It runs in-process (echo.New() handed to the host) or as an external
// plugin binary (cmd/replication-echo, which calls sdk.Serve).
//
// Configuration, in the profile's [replication.config] table:
//
//	wait_replicas = 1      # acks wait for this many slaves (0: async)
//	timeout = "3s"         # how long an ack may wait for them
//	batch_bytes = 262144   # log bytes per frame, about
//
// What it leaves out, on purpose, to stay small: epoch histories and
// divergence repair (a slave whose log does not extend the master's is
// refused, not truncated), promotion, metadata replication, fencing.
package echo

import (
	"bufio"
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/replication"
)

// Config is the plugin's [replication.config] table.
type Config struct {
	WaitReplicas int    `toml:"wait_replicas"`
	Timeout      string `toml:"timeout"`
	BatchBytes   int    `toml:"batch_bytes"`
}

// A master sends a heartbeat when it has had nothing to send for
// heartbeatEvery; the slave answers each with an ack. Either side gives
// the connection up after readTimeout without hearing from the other (a
// slave whose disk stalls a few seconds is given the benefit of the doubt).
const (
	heartbeatEvery = 500 * time.Millisecond
	readTimeout    = 10 * heartbeatEvery
)

// Plugin is the echo replicator. Use New; the zero value is not ready.
type Plugin struct {
	cfg     sdk.Config
	conf    Config
	timeout time.Duration
	policy  replication.Policy // nil: replication.InSyncReplicas{N: wait_replicas}

	host   sdk.Host
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	id string // slave: its identity (loadOrCreateID), sent in every hello

	// committed is the highest committed offset the master has seen
	// (from Host.Positions at start and handshakes, Host.WaitCommitted
	// and Host.ReadLog in the streams): what state passes the policy, so
	// that reporting costs no Host call of its own.
	committed atomic.Int64

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]struct{}
	replicas map[string]*replica // master: the connected slaves by id, one connection each
	acked    int64               // last AckedOffset reported (never decreases)
	kick     chan struct{}
}

// replica is one connected slave, on the master: the newest connection
// from the slave with this id.
type replica struct {
	id      string
	addr    string   // the connection's remote address
	conn    net.Conn // closed when a newer connection with the same id replaces it
	ack     int64
	sent    atomic.Int64  // the stream has sent the log up to here: an ack beyond it is a lie
	acked   chan struct{} // capacity 1: an acknowledgement arrived (wakes a gathering stream)
	contact time.Time
	// replaced: a newer connection took this one's place (set under
	// Plugin.mu), so its end is expected and not worth a warning.
	replaced bool
}

var (
	_ sdk.Replicator     = (*Plugin)(nil)
	_ sdk.StatusReporter = (*Plugin)(nil)
)

// New returns an unconfigured echo replicator whose master acknowledges
// what wait_replicas slaves hold (replication.InSyncReplicas).
func New() *Plugin { return &Plugin{} }

// NewWithPolicy returns an unconfigured echo replicator whose master
// acknowledges by pol (see replication.Policy); wait_replicas remains
// what the host waits for.
func NewWithPolicy(pol replication.Policy) *Plugin { return &Plugin{policy: pol} }

// Configure implements sdk.Plugin. It decodes [replication.config]
// strictly: unknown keys and invalid values fail with sdk.ErrInvalidConfig.
func (p *Plugin) Configure(ctx context.Context, cfg sdk.Config) error {
	c := Config{WaitReplicas: 1, Timeout: "3s", BatchBytes: 256 << 10}
	if err := decodeConfig(cfg, &c); err != nil {
		return err
	}
	d, err := time.ParseDuration(c.Timeout)
	switch {
	case err != nil || d <= 0:
		return fmt.Errorf("%s: replication.config.timeout = %q: want a positive duration such as \"3s\": %w", cfg.File, c.Timeout, sdk.ErrInvalidConfig)
	case c.WaitReplicas < 0:
		return fmt.Errorf("%s: replication.config.wait_replicas = %d: want 0 or more: %w", cfg.File, c.WaitReplicas, sdk.ErrInvalidConfig)
	case c.BatchBytes < 4096 || c.BatchBytes > 64<<20:
		return fmt.Errorf("%s: replication.config.batch_bytes = %d: want 4096 to 67108864: %w", cfg.File, c.BatchBytes, sdk.ErrInvalidConfig)
	}
	switch cfg.Role {
	case "master", "":
		if cfg.Addr == "" {
			return fmt.Errorf("%s: a master needs a listen address (server.ha_addr): %w", cfg.File, sdk.ErrInvalidConfig)
		}
	case "slave":
		if cfg.PeerAddr == "" {
			return fmt.Errorf("%s: a slave needs the master's address (replication.master_addr): %w", cfg.File, sdk.ErrInvalidConfig)
		}
	default:
		return fmt.Errorf("%s: replication.role = %q: want master or slave: %w", cfg.File, cfg.Role, sdk.ErrInvalidConfig)
	}
	p.cfg, p.conf, p.timeout = cfg, c, d
	if p.policy == nil {
		p.policy = replication.InSyncReplicas{N: c.WaitReplicas}
	}
	return nil
}

// decodeConfig decodes the [<section>.config] table of the profile into v,
// rejecting unknown keys.
func decodeConfig(cfg sdk.Config, v any) error {
	var doc map[string]any
	if err := toml.Unmarshal(cfg.Document, &doc); err != nil {
		return fmt.Errorf("%s: %w: %w", cfg.File, sdk.ErrInvalidConfig, err)
	}
	sec, _ := doc[cfg.Section].(map[string]any)
	sub, _ := sec["config"].(map[string]any)
	if len(sub) == 0 {
		return nil
	}
	raw, err := toml.Marshal(sub)
	if err != nil {
		return fmt.Errorf("%s: %s.config: %w: %w", cfg.File, cfg.Section, sdk.ErrInvalidConfig, err)
	}
	err = toml.NewDecoder(bytes.NewReader(raw)).DisallowUnknownFields().Decode(v)
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		var keys []string
		for _, de := range strict.Errors {
			keys = append(keys, cfg.Section+".config."+strings.Join(de.Key(), "."))
		}
		return fmt.Errorf("%s: unknown key %s (allowed: wait_replicas, timeout, batch_bytes): %w", cfg.File, strings.Join(keys, ", "), sdk.ErrInvalidConfig)
	}
	if err != nil {
		return fmt.Errorf("%s: %s.config: %w: %w", cfg.File, cfg.Section, sdk.ErrInvalidConfig, err)
	}
	return nil
}

// AckPolicy implements sdk.Replicator.
func (p *Plugin) AckPolicy() sdk.ReplicationPolicy {
	if p.cfg.Role == "slave" {
		return sdk.ReplicationPolicy{}
	}
	return sdk.ReplicationPolicy{WaitReplicas: p.conf.WaitReplicas, Timeout: p.timeout}
}

// Start implements sdk.Plugin: a master listens on Config.Addr, a slave
// reads (at its first start, creates) its identity in Config.DataDir and
// connects to Config.PeerAddr (and reconnects, with backoff, whenever the
// connection breaks).
func (p *Plugin) Start(ctx context.Context, host sdk.Host) error {
	p.host = host
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.conns = map[net.Conn]struct{}{}
	p.replicas = map[string]*replica{}
	p.kick = make(chan struct{}, 1)
	if p.cfg.Role == "slave" {
		id, err := loadOrCreateID(p.cfg.DataDir)
		if err != nil {
			p.cancel()
			return err
		}
		p.id = id
		p.wg.Add(1)
		go p.slaveLoop()
		return nil
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", p.cfg.Addr)
	if err != nil {
		p.cancel()
		return fmt.Errorf("echo master: listen on %s: %w", p.cfg.Addr, err)
	}
	p.ln = ln
	if pos, err := host.Positions(ctx); err == nil {
		p.noteCommitted(pos.Committed)
	}
	p.wg.Add(2)
	go p.acceptLoop()
	go p.reportLoop()
	return nil
}

// Stop implements sdk.Plugin: it closes the listener and every connection
// and waits for its goroutines.
func (p *Plugin) Stop(ctx context.Context) error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
	}
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("echo: stop: %w", ctx.Err())
	}
}

// Status implements sdk.StatusReporter.
func (p *Plugin) Status(ctx context.Context) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	type rs struct {
		ID   string `json:"id"`
		Addr string `json:"addr"`
		Ack  int64  `json:"ack"`
	}
	st := struct {
		Role     string `json:"role"`
		ID       string `json:"id,omitempty"` // a slave's own id
		Acked    int64  `json:"acked"`
		Replicas []rs   `json:"replicas"`
	}{Role: p.cfg.Role, ID: p.id, Acked: p.acked, Replicas: []rs{}}
	for _, r := range p.replicas {
		st.Replicas = append(st.Replicas, rs{r.id, r.addr, r.ack})
	}
	slices.SortFunc(st.Replicas, func(a, b rs) int { return strings.Compare(a.ID, b.ID) })
	return json.Marshal(st)
}

func (p *Plugin) logf(level slog.Level, msg string, kv ...string) {
	attrs := map[string]string{"plugin": "echo", "role": p.cfg.Role}
	for i := 0; i+1 < len(kv); i += 2 {
		attrs[kv[i]] = kv[i+1]
	}
	p.host.Log(p.ctx, int(level), msg, attrs)
}

func (p *Plugin) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Plugin) untrack(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// ---------------------------------------------------------------- master

func (p *Plugin) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if p.ctx.Err() == nil {
				p.logf(slog.LevelError, "accept failed; no more slaves", "err", err.Error())
			}
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			if err := p.serveSlave(c); err != nil && p.ctx.Err() == nil {
				p.logf(slog.LevelWarn, "slave connection ended", "slave", c.RemoteAddr().String(), "err", err.Error())
			}
		}()
	}
}

func (p *Plugin) serveSlave(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, err := readHello(c)
	var ve *versionError
	if errors.As(err, &ve) {
		writeReply(c, statusBadVersion, protoVersion)
		drainAndClose(c)
	}
	if err != nil {
		return err
	}
	if p.cfg.Secret != "" && subtle.ConstantTimeCompare([]byte(h.secret), []byte(p.cfg.Secret)) != 1 {
		writeReply(c, statusBadSecret, 0)
		return fmt.Errorf("slave %s: wrong secret", c.RemoteAddr())
	}
	pos, err := p.host.Positions(p.ctx)
	if err != nil {
		return err
	}
	p.noteCommitted(pos.Committed)
	from := h.from
	switch {
	case from == -1:
		from = pos.Min
	case from > pos.Committed:
		writeReply(c, statusSlaveAhead, pos.Committed)
		return fmt.Errorf("slave %s is at %d, beyond this master's log end %d", c.RemoteAddr(), from, pos.Committed)
	case from < pos.Min:
		writeReply(c, statusSlaveBehind, pos.Min)
		return fmt.Errorf("slave %s is at %d, below this master's oldest offset %d", c.RemoteAddr(), from, pos.Min)
	}
	if err := writeReply(c, statusOK, from); err != nil {
		return err
	}
	r := &replica{id: h.id, addr: c.RemoteAddr().String(), conn: c, ack: from, acked: make(chan struct{}, 1), contact: time.Now()}
	r.sent.Store(from)
	p.mu.Lock()
	old := p.replicas[r.id]
	if old != nil {
		old.replaced = true
	}
	p.replicas[r.id] = r
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.replicas[r.id] == r { // not replaced by a newer connection
			delete(p.replicas, r.id)
		}
		p.mu.Unlock()
		p.kickReport()
	}()
	if old != nil {
		// The slave reconnected before its old connection ended (a
		// partition, a restart): the old one no longer counts, and
		// closing it ends its goroutines.
		old.conn.Close()
		p.logf(slog.LevelInfo, "slave reconnected; its previous connection is closed", "id", r.id, "slave", r.addr, "previous", old.addr)
	}
	p.kickReport()
	p.logf(slog.LevelInfo, "slave connected", "id", r.id, "slave", r.addr, "from", fmt.Sprint(from))

	errc := make(chan error, 2)
	go func() { errc <- p.readAcks(c, r) }()
	go func() { errc <- p.stream(c, r, from) }()
	err = <-errc
	c.Close()
	<-errc
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.replaced {
		return nil
	}
	return err
}

// drainAndClose ends a connection whose peer may still be sending (the
// rest of a hello this master did not read): it half-closes, then reads
// and drops what arrives for up to a second, so that the reply already
// written reaches the peer rather than being lost to a reset.
func drainAndClose(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	c.Close()
}

// stream sends the log from offset from, then new bytes as they are
// committed, and heartbeats while idle. It asks the host for bytes only
// below the committed offset it last learnt: once caught up it waits
// (Host.WaitCommitted: one wake-up covers many appends), so each batch
// costs one wait and one read, never a read that comes back empty.
//
// While a frame is in flight, a batch smaller than half of batch_bytes
// first waits for the slave's next acknowledgement (at most
// heartbeatEvery), then goes out with everything committed meanwhile: so
// under load each round trip carries all that is pending, instead of
// one small frame per commit, each with its own acknowledgement and its
// own report. It costs at most the round trip already in progress, which
// the producers of this batch would wait for anyway.
func (p *Plugin) stream(c net.Conn, r *replica, from int64) error {
	off, committed := from, from
	gather := time.NewTimer(heartbeatEvery)
	defer gather.Stop()
	for {
		if off < committed && committed-off < int64(p.conf.BatchBytes/2) && p.inFlight(r) {
			gather.Reset(heartbeatEvery)
			select {
			case <-r.acked:
			case <-gather.C:
			case <-p.ctx.Done():
				return p.ctx.Err()
			}
			gather.Stop()
			// What was committed meanwhile: at once, the log grew past off.
			if next, err := p.host.WaitCommitted(p.ctx, off); err == nil {
				committed = max(committed, next)
				p.noteCommitted(next)
			}
		}
		if off >= committed {
			ctx, cancel := context.WithTimeout(p.ctx, heartbeatEvery)
			next, err := p.host.WaitCommitted(ctx, off)
			cancel()
			switch {
			case err == nil:
				committed = next
				p.noteCommitted(next)
			case p.ctx.Err() != nil:
				return p.ctx.Err()
			case errors.Is(err, context.DeadlineExceeded):
				if err := writeFrame(c, frame{kind: frameHeartbeat, offset: off}); err != nil {
					return err
				}
			default:
				return err
			}
			continue
		}
		data, err := p.host.ReadLog(p.ctx, off, p.conf.BatchBytes)
		if err != nil {
			return err
		}
		if len(data) == 0 {
			return fmt.Errorf("read the log at %d: nothing, though %d is committed", off, committed)
		}
		end := off + int64(len(data))
		r.sent.Store(end) // before the slave can have it
		if err := writeFrame(c, frame{kind: frameData, offset: off, data: data}); err != nil {
			return err
		}
		off = end
	}
}

// noteCommitted raises Plugin.committed to off.
func (p *Plugin) noteCommitted(off int64) {
	for {
		cur := p.committed.Load()
		if off <= cur || p.committed.CompareAndSwap(cur, off) {
			return
		}
	}
}

// readAcks reads the slave's acknowledgements. An ack beyond what the
// stream sent, or going backwards, ends the connection.
func (p *Plugin) readAcks(c net.Conn, r *replica) error {
	br := bufio.NewReader(c)
	for {
		c.SetReadDeadline(time.Now().Add(readTimeout))
		ack, err := readAck(br)
		if err != nil {
			return err
		}
		sent := r.sent.Load()
		p.mu.Lock()
		prev := r.ack
		if ack >= prev && ack <= sent {
			r.ack, r.contact = ack, time.Now()
		}
		p.mu.Unlock()
		if ack > sent {
			return fmt.Errorf("slave %s acknowledged %d, beyond the %d bytes sent", r.addr, ack, sent)
		}
		if ack < prev {
			return fmt.Errorf("slave %s acknowledged %d after %d", r.addr, ack, prev)
		}
		p.kickReport()
		select {
		case r.acked <- struct{}{}:
		default:
		}
	}
}

// inFlight reports whether r has been sent bytes it has not acknowledged.
func (p *Plugin) inFlight(r *replica) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return r.sent.Load() > r.ack
}

func (p *Plugin) kickReport() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// reportLoop sends ReportReplication whenever an acknowledgement (or a
// slave's arrival or departure) kicked it. Reports coalesce without a
// timer: one report is in flight at a time, and the kicks that arrive
// meanwhile leave one wake-up, whose report carries everything since.
func (p *Plugin) reportLoop() {
	defer p.wg.Done()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		}
		st := p.state()
		if err := p.host.ReportReplication(p.ctx, st); err != nil && p.ctx.Err() == nil {
			p.logf(slog.LevelWarn, "report replication failed", "err", err.Error())
		}
	}
}

// state computes the replication state: the policy says how far the
// connected slaves' acknowledgements reach (by default, the offset
// wait_replicas of them acknowledged; each slave counts once, by its
// newest connection), and AckedOffset is never lower than what was
// reported before.
func (p *Plugin) state() sdk.ReplicationState {
	committed := p.committed.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	st := sdk.ReplicationState{}
	var rs []replication.Replica
	for _, r := range p.replicas {
		rs = append(rs, replication.Replica{ID: r.id, Addr: r.addr, Acked: r.ack, Received: r.ack, InSync: true})
		st.Replicas = append(st.Replicas, sdk.ReplicaState{
			ID: r.id, Addr: r.addr, AckOffset: r.ack, LagBytes: max(committed-r.ack, 0),
			InSync: true, Connected: true, LastContact: r.contact,
		})
	}
	slices.SortFunc(rs, func(a, b replication.Replica) int { return strings.Compare(a.ID, b.ID) }) // as Policy's contract says
	v := p.policy.Acknowledge(committed, rs)
	p.acked = max(p.acked, v.Acked)
	st.AckedOffset, st.InSync = p.acked, v.InSync
	return st
}

// ---------------------------------------------------------------- slave

func (p *Plugin) slaveLoop() {
	defer p.wg.Done()
	backoff := 20 * time.Millisecond
	for p.ctx.Err() == nil {
		err := p.followOnce()
		if p.ctx.Err() != nil {
			return
		}
		p.logf(slog.LevelWarn, "replication from master interrupted; reconnecting", "master", p.cfg.PeerAddr, "err", errString(err), "backoff", backoff.String())
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// followOnce connects to the master and appends what it streams until
// the connection breaks.
func (p *Plugin) followOnce() error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
	c, err := d.DialContext(ctx, "tcp", p.cfg.PeerAddr)
	cancel()
	if err != nil {
		return err
	}
	if !p.track(c) {
		return p.ctx.Err()
	}
	defer p.untrack(c)
	pos, err := p.host.Positions(p.ctx)
	if err != nil {
		return err
	}
	from := pos.Committed
	if pos.Min == 0 && pos.Committed == 0 {
		from = -1 // empty: start wherever the master's log starts
	}
	if err := writeHello(c, hello{secret: p.cfg.Secret, id: p.id, from: from}); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(readTimeout))
	status, start, err := readReply(c)
	if err != nil {
		return err
	}
	switch status {
	case statusOK:
	case statusBadVersion:
		return fmt.Errorf("master refused: it speaks echo protocol version %d, this slave version %d (run the same plugin version on both)", start, protoVersion)
	default:
		return fmt.Errorf("master refused (status %d, its offset %d)", status, start)
	}
	acked := start
	br := bufio.NewReaderSize(c, 64<<10)
	maxFrame := 2*p.conf.BatchBytes + (4 << 20)
	for {
		c.SetReadDeadline(time.Now().Add(readTimeout))
		f, err := readFrame(br, maxFrame)
		if err != nil {
			return err
		}
		if f.kind == frameData {
			// Frames that follow this one and have already arrived go
			// into the same append, up to batch_bytes: under load one
			// Host call covers a burst (a round trip, run external).
			data := f.data
			for {
				n, ok := bufferedData(br, f.offset+int64(len(data)))
				if !ok || len(data)+n > p.conf.BatchBytes {
					break
				}
				g, err := readFrame(br, maxFrame)
				if err != nil {
					return err
				}
				data = append(data, g.data...)
			}
			if err := p.host.AppendLog(p.ctx, f.offset, data); err != nil {
				return fmt.Errorf("append %d bytes at %d: %w", len(data), f.offset, err)
			}
			acked = f.offset + int64(len(data))
		}
		// Acknowledge what is appended (on a heartbeat too, so the master
		// knows this slave is alive), unless more has already arrived:
		// then the ack after it covers both.
		if br.Buffered() == 0 {
			if err := writeAck(c, acked); err != nil {
				return err
			}
		}
	}
}
