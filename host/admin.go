package host

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

type adminServer struct {
	l   net.Listener
	srv *http.Server
}

// startAdmin serves the admin HTTP API on addr:
//
//	GET  /metrics            Prometheus text (node, replicas, plugins)
//	GET  /status             JSON: role, epoch, offsets, plugins, replicas
//	GET  /admin/cluster      JSON: the controller's view, or this broker's in cluster mode
//	GET  /query?topic=&key=[&begin=&end=&max=]   messages by key (needs an index; broker only, as the rest below)
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
	api := &adminAPI{n: n, self: addrPortOf(l.Addr())}
	srv := &http.Server{Handler: api.routes(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	return &adminServer{l: l, srv: srv}, nil
}

// adminAPI holds what the admin handlers need: the node and the admin
// listener's own address, which mutating requests must come from.
type adminAPI struct {
	n    *Node
	self netip.AddrPort
}

// routes maps the endpoints listed on startAdmin to their handlers.
func (a *adminAPI) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", a.metrics)
	mux.HandleFunc("GET /status", a.status)
	mux.HandleFunc("GET /admin/cluster", a.cluster)
	if a.n.prof.HasRole(roleBroker) { // the store's endpoints
		mux.HandleFunc("GET /query", a.query)
		mux.HandleFunc("GET /message", a.message)
		mux.HandleFunc("POST /admin/promote", a.mutating(a.promote))
		mux.HandleFunc("POST /admin/force-writes", a.mutating(a.forceWrites))
	}
	routeDebug(mux)
	return mux
}

// mutating wraps the handler of a mutating endpoint with the refusals
// startAdmin describes (refuseMutation).
func (a *adminAPI) mutating(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if code, msg := refuseMutation(r, a.self); code != 0 {
			writeError(w, code, msg)
			return
		}
		h(w, r)
	}
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

// writeError writes the admin API's error document, {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
