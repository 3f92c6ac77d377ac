package host

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/storehost"
)

type adminServer struct {
	l   net.Listener
	srv *http.Server
}

// startAdmin serves the admin HTTP API:
//
//	GET  /metrics            Prometheus text (node, replicas, plugins)
//	GET  /status             JSON: role, epoch, offsets, plugins, replicas
//	GET  /query?topic=&key=[&begin=&end=&max=]   messages by key (needs an index)
//	GET  /message?id=<offset msg id>             one message by id
//	POST /admin/promote      make this slave the master with a new epoch
//	POST /admin/force-writes lift a replication write fence
//	     /debug/pprof/       Go profiling (cmdline with secrets redacted)
//
// The API has no authentication yet, so the mutating endpoints (POST
// /admin/*) refuse what a web page in the operator's browser could send:
// a request whose Origin is not this listener's own host:port, or whose
// Sec-Fetch-Site is not same-origin or none, gets 403; one whose
// Content-Type is not application/json gets 415 (a page can send
// text/plain or a form cross-origin without a CORS preflight, never JSON).
// Every refusal is a JSON {"error": ...}. Nothing served contains a
// profile secret (profile.IsSecretKey).
func startAdmin(n *Node, addr string) (*adminServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener on %s: %w", addr, err)
	}
	registerAdminMetrics(n)
	self := addrPortOf(l.Addr())
	mutating := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if code, msg := refuseMutation(r, self); code != 0 {
				writeJSON(w, code, map[string]string{"error": msg})
				return
			}
			h(w, r)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		n.metrics.write(w, n)
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, n.Status())
	})
	mux.HandleFunc("GET /query", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		begin, _ := strconv.ParseInt(q.Get("begin"), 10, 64)
		end, _ := strconv.ParseInt(q.Get("end"), 10, 64)
		max, _ := strconv.Atoi(q.Get("max"))
		recs, err := n.QueryByKey(r.Context(), q.Get("topic"), q.Get("key"), max, begin, end)
		if err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, remoting.ErrNotSupported) {
				code = http.StatusNotImplemented
			}
			writeJSON(w, code, map[string]string{"error": err.Error()})
			return
		}
		out := make([]messageJSON, 0, len(recs))
		for _, b := range recs {
			if m, ok := toMessageJSON(b); ok {
				out = append(out, m)
			}
		}
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("GET /message", func(w http.ResponseWriter, r *http.Request) {
		_, off, err := record.ParseOffsetMsgID(r.URL.Query().Get("id"))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		b, err := n.cache.readRecord(n.store, off)
		if err == nil {
			var m messageJSON
			if m, err = decodeMessageJSON(b); err == nil {
				writeJSON(w, http.StatusOK, m)
				return
			}
		}
		if errors.Is(err, record.ErrCorrupt) {
			// The id names a record, but the bytes there are damaged: an
			// error of the store, not of the request.
			writeJSON(w, http.StatusInternalServerError, map[string]any{
				"error":  fmt.Sprintf("damaged record at offset %d: %v", off, err),
				"offset": off,
			})
			return
		}
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	})
	mux.HandleFunc("POST /admin/promote", mutating(func(w http.ResponseWriter, r *http.Request) {
		ep, err := n.Promote(r.Context())
		if err != nil {
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"role": roleMaster, "epoch": ep})
	}))
	mux.HandleFunc("POST /admin/force-writes", mutating(func(w http.ResponseWriter, r *http.Request) {
		if err := n.ForceWrites(r.Context()); err != nil {
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"result": "fence lifted"})
	}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, r *http.Request) {
		// pprof.Cmdline with the values of secret --set keys redacted.
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, strings.Join(redactArgs(os.Args), "\x00"))
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	return &adminServer{l: l, srv: srv}, nil
}

// addrPortOf is a listener's address, IPv4-mapped addresses unmapped.
func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// refuseMutation says why a mutating admin request must be refused (an
// HTTP status and a message), or 0 when it may proceed. self is the admin
// listener's own address.
func refuseMutation(r *http.Request, self netip.AddrPort) (int, string) {
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, self) {
		return http.StatusForbidden, fmt.Sprintf("cross-origin request refused: Origin %q is not this admin listener (%s); the admin API takes no requests from web pages", o, self)
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return http.StatusForbidden, fmt.Sprintf("cross-origin request refused: Sec-Fetch-Site is %q; the admin API takes no requests from web pages", site)
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q refused: mutating admin requests must be application/json", ct)
	}
	return 0, ""
}

// sameOrigin reports whether the Origin header value o names the admin
// listener self: an http origin whose host is self's address and port. A
// listener on a wildcard address also accepts any IP address with its
// port, and a loopback one "localhost" with its port; a host name never
// matches otherwise (so a DNS-rebound name is refused).
func sameOrigin(o string, self netip.AddrPort) bool {
	u, err := url.Parse(o)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.Path != "" {
		return false
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if port != strconv.Itoa(int(self.Port())) {
		return false
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		return ip == self.Addr() || self.Addr().IsUnspecified()
	}
	return strings.EqualFold(host, "localhost") && (self.Addr().IsLoopback() || self.Addr().IsUnspecified())
}

// redactArgs returns args with the value of every --set KEY=VALUE whose
// key holds a secret (profile.IsSecretKey) replaced by "(redacted)".
func redactArgs(args []string) []string {
	out := append([]string(nil), args...)
	redact := func(kv string) string {
		k, _, ok := strings.Cut(kv, "=")
		if ok && profile.IsSecretKey(strings.TrimSpace(k)) {
			return k + "=(redacted)"
		}
		return kv
	}
	for i := 0; i < len(out); i++ {
		a := out[i]
		switch {
		case (a == "--set" || a == "-set") && i+1 < len(out):
			out[i+1] = redact(out[i+1])
			i++
		case strings.HasPrefix(a, "--set="):
			out[i] = "--set=" + redact(a[len("--set="):])
		case strings.HasPrefix(a, "-set="):
			out[i] = "-set=" + redact(a[len("-set="):])
		}
	}
	return out
}

func (a *adminServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a.srv.Shutdown(ctx)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

type messageJSON struct {
	MsgID          string            `json:"msg_id"`
	Topic          string            `json:"topic"`
	QueueID        int32             `json:"queue_id"`
	QueueOffset    int64             `json:"queue_offset"`
	PhysOffset     int64             `json:"phys_offset"`
	StoreTimestamp int64             `json:"store_timestamp"`
	Properties     map[string]string `json:"properties"`
	Body           string            `json:"body"`
	BodyHex        string            `json:"body_hex,omitempty"`
}

func toMessageJSON(b []byte) (messageJSON, bool) {
	m, err := decodeMessageJSON(b)
	return m, err == nil
}

// decodeMessageJSON decodes a stored record (checking its body CRC) for
// the admin API; the error wraps record.ErrCorrupt when the bytes are
// damaged.
func decodeMessageJSON(b []byte) (messageJSON, error) {
	r, err := record.Decode(b)
	if err != nil {
		return messageJSON{}, fmt.Errorf("decoding record: %w", err)
	}
	props, _ := record.ParseProperties(r.Properties)
	m := messageJSON{
		MsgID: record.OffsetMsgID(r.StoreHost, r.PhysOffset), Topic: r.Topic, QueueID: r.QueueID,
		QueueOffset: r.QueueOffset, PhysOffset: r.PhysOffset, StoreTimestamp: r.StoreTimestamp,
		Properties: props, Body: string(r.Body),
	}
	if r.SysFlag&record.SysFlagCompressed != 0 {
		m.Body, m.BodyHex = "", hex.EncodeToString(r.Body)
	}
	return m, nil
}

// StatusReport is /status.
type StatusReport struct {
	Role      string            `json:"role"`
	Epoch     int32             `json:"epoch"`
	Uptime    string            `json:"uptime"`
	Listeners map[string]string `json:"listeners"`
	Offsets   map[string]int64  `json:"offsets"`
	DiskUsed  float64           `json:"disk_used_ratio"`
	// Writable is "yes", or why appends are refused: the store's own
	// Writable error first (disk full, read-only, closed), then a
	// replication fence, then a degraded plugin.
	Writable string `json:"writable"`
	// DispatchLag is committed minus dispatched: log bytes not yet in the
	// consume queues and indexes.
	DispatchLag int64              `json:"dispatch_lag_bytes"`
	Plugins     []pluginStatusJSON `json:"plugins"`
	Replication sdk.ReplicationState
	FlushPolicy sdk.FlushPolicy       `json:"flush_policy"`
	ReplPolicy  sdk.ReplicationPolicy `json:"replication_policy"`
}

type pluginStatusJSON struct {
	Kind     sdk.Kind       `json:"kind"`
	Name     string         `json:"name"`
	External bool           `json:"external"`
	State    string         `json:"state"`
	Reason   string         `json:"reason,omitempty"`
	Status   map[string]any `json:"status,omitempty"`
	// External plugins only.
	Pid         int        `json:"pid,omitempty"`
	Restarts    int        `json:"restarts,omitempty"`
	LastCrash   *time.Time `json:"last_crash,omitempty"`
	LastRestart *time.Time `json:"last_restart,omitempty"`
}

// Status reports the node's state.
func (n *Node) Status() StatusReport {
	p := n.store.Positions()
	st := StatusReport{
		Role:   n.currentRole(),
		Uptime: time.Since(n.started).Round(time.Second).String(),
		Offsets: map[string]int64{"min": p.Min, "dispatched": p.Dispatched, "confirm": p.Confirm,
			"flushed": p.Flushed, "committed": p.Committed},
		DiskUsed:    n.store.DiskUsedRatio(),
		DispatchLag: p.Committed - p.Dispatched,
		Listeners:   map[string]string{},
		Replication: n.host.Replication(),
		FlushPolicy: n.flushPolicy,
		ReplPolicy:  n.replicationPolicy(),
	}
	if e, ok := n.store.Epochs().Last(); ok {
		st.Epoch = e.Epoch
	}
	st.Writable = refusalText(n.WriteRefusal())
	for _, role := range []string{"namesrv", "broker", "admin"} {
		if a := n.Addr(role); a != "" {
			st.Listeners[role] = a
		}
	}
	if a := n.haAddr(); a != "" {
		st.Listeners["ha"] = a
	}
	for _, lp := range n.plugins {
		s, why := lp.getState()
		ps := pluginStatusJSON{Kind: lp.kind, Name: lp.name, External: lp.external, State: s, Reason: why}
		if s == stateRunning {
			ps.Status = n.pluginStatus(lp.p)
		}
		if sv := supervisorOf(lp.p); sv != nil {
			var crash, restart time.Time
			ps.Pid, ps.Restarts, crash, restart = sv.processInfo()
			if !crash.IsZero() {
				ps.LastCrash = &crash
			}
			if !restart.IsZero() {
				ps.LastRestart = &restart
			}
		}
		st.Plugins = append(st.Plugins, ps)
	}
	return st
}

// Promote makes this slave the master (the replication plugin must
// implement sdk.Promoter).
func (n *Node) Promote(ctx context.Context) (int32, error) {
	if n.repl == nil {
		return 0, errors.New("no replication plugin is loaded")
	}
	pr, ok := n.repl.(sdk.Promoter)
	if !ok {
		return 0, fmt.Errorf("replication plugin cannot promote: %w", sdk.ErrNotSupported)
	}
	ep, err := pr.Promote(ctx)
	if err != nil {
		return 0, fmt.Errorf("promote: %w", err)
	}
	// Acks now follow the replicator's policy (a slave's was empty).
	n.setReplicationPolicy(n.repl.AckPolicy())
	n.setSlave(false)
	n.log.Warn("promoted to master", "epoch", ep)
	return ep, nil
}

// ForceWrites lifts a replication write fence.
func (n *Node) ForceWrites(ctx context.Context) error {
	if n.repl == nil {
		return errors.New("no replication plugin is loaded")
	}
	fw, ok := n.repl.(sdk.ForceWriter)
	if !ok {
		return fmt.Errorf("replication plugin cannot lift fences: %w", sdk.ErrNotSupported)
	}
	return fw.ForceWrites(ctx)
}

func (n *Node) currentRole() string {
	if n.slave.Load() {
		return roleSlave
	}
	return roleMaster
}

// replicationPolicy is the replication half of the ack policy in force
// (it changes on Promote).
func (n *Node) replicationPolicy() sdk.ReplicationPolicy { return n.ackPolicy().Replication }

// ackPolicy is the acknowledgement rule in force, read once per send.
func (n *Node) ackPolicy() storehost.AckPolicy {
	if p := n.ack.Load(); p != nil {
		return *p
	}
	return storehost.AckPolicy{}
}

// setReplicationPolicy makes sends follow the flush policy and r (default
// timeouts filled in by storehost.NewAckPolicy, the rule's one home).
func (n *Node) setReplicationPolicy(r sdk.ReplicationPolicy) {
	p := storehost.NewAckPolicy(n.flushPolicy, r)
	n.mu.Lock()
	n.replPolicy = p.Replication
	n.mu.Unlock()
	n.ack.Store(&p)
}
