package host

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/sdk"
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
//	     /debug/pprof/       Go profiling
func startAdmin(n *Node, addr string) (*adminServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("admin listener on %s: %w", addr, err)
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
		if err != nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
			return
		}
		m, _ := toMessageJSON(b)
		writeJSON(w, http.StatusOK, m)
	})
	mux.HandleFunc("POST /admin/promote", func(w http.ResponseWriter, r *http.Request) {
		ep, err := n.Promote(r.Context())
		if err != nil {
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"role": roleMaster, "epoch": ep})
	})
	mux.HandleFunc("POST /admin/force-writes", func(w http.ResponseWriter, r *http.Request) {
		if err := n.ForceWrites(r.Context()); err != nil {
			writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"result": "fence lifted"})
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	return &adminServer{l: l, srv: srv}, nil
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
	r, err := record.Decode(b)
	if err != nil {
		return messageJSON{}, false
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
	return m, true
}

// StatusReport is /status.
type StatusReport struct {
	Role        string             `json:"role"`
	Epoch       int32              `json:"epoch"`
	Uptime      string             `json:"uptime"`
	Listeners   map[string]string  `json:"listeners"`
	Offsets     map[string]int64   `json:"offsets"`
	DiskUsed    float64            `json:"disk_used_ratio"`
	Writable    string             `json:"writable"`
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
		Writable:    "yes",
		Listeners:   map[string]string{},
		Replication: n.host.Replication(),
		FlushPolicy: n.flushPolicy,
		ReplPolicy:  n.replicationPolicy(),
	}
	if e, ok := n.store.Epochs().Last(); ok {
		st.Epoch = e.Epoch
	}
	if err := n.store.Writable(); err != nil {
		st.Writable = err.Error()
	} else if f, why := n.host.Fenced(); f {
		st.Writable = "fenced: " + why
	} else if d := n.pluginsDegraded(); d != "" {
		st.Writable = d
	}
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
	n.mu.Lock()
	n.replPolicy = n.repl.AckPolicy()
	if n.replPolicy.WaitReplicas > 0 && n.replPolicy.Timeout <= 0 {
		n.replPolicy.Timeout = 3 * time.Second
	}
	n.mu.Unlock()
	n.slave.Store(false)
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

// replicationPolicy is the ack policy in force (it changes on Promote).
func (n *Node) replicationPolicy() sdk.ReplicationPolicy {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.replPolicy
}
