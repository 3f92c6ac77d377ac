package remoting

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
)

// dispatch handles one request that holds nothing of the server's Budget.
func (s *Server) dispatch(c *Conn, cmd *Command) { s.dispatchHeld(c, cmd, 0) }

// dispatchHeld handles one request; it holds budget bytes of the server's
// Budget, which the request releases when done with them.
func (s *Server) dispatchHeld(c *Conn, cmd *Command, budget int64) {
	req := &Request{Cmd: cmd, Conn: c, budget: budget}
	req.refs.Store(1) // the handler's own, dropped when it returns
	defer req.unref()
	if g := s.cfg.Guard; g != nil {
		if err := g(c.RemoteAddr().Addr(), cmd); err != nil {
			s.refused.Add(1)
			s.log.Debug("remoting: request refused", "code", cmd.Code, "conn", c.String(), "err", err)
			if !cmd.IsOneway() {
				c.replyInline(req, NewResponse(cmd, SystemError, err.Error()))
			}
			return
		}
	}
	h := s.handlers[cmd.Code]
	if h == nil {
		c.replyInline(req, NewResponse(cmd, RequestCodeNotSupported, fmt.Sprintf("request code %d not supported", cmd.Code)))
		return
	}
	if resp := s.call(h, req); resp != nil {
		c.replyInline(req, resp)
	}
}

// call runs h. If h panics, the request is answered SYSTEM_ERROR and the
// Async replies it left outstanding are abandoned (see Request.Async).
func (s *Server) call(h Handler, req *Request) (resp *Command) {
	defer func() {
		if r := recover(); r != nil {
			s.panics.Add(1)
			s.log.Error("remoting: handler panicked", "code", req.Cmd.Code, "conn", req.Conn.String(), "panic", r, "stack", string(debug.Stack()))
			resp = NewResponse(req.Cmd, SystemError, fmt.Sprintf("internal error handling code %d", req.Cmd.Code))
			req.abandonAsync()
		}
	}()
	return h(req)
}

// Request is one incoming request and the means to answer it.
type Request struct {
	// Cmd is the decoded request.
	Cmd *Command
	// Conn is the connection it arrived on.
	Conn *Conn

	replied atomic.Bool
	// budget is the Budget bytes the request's frame holds; refs counts
	// what may still use the frame (the handler until it returns, each
	// Go and Async until it finishes). The last unref releases budget.
	budget int64
	refs   atomic.Int32

	// asyncs are the reply functions Async returned that were not called
	// yet when the request's handler (or a Go function) panicked; see
	// abandonAsync.
	amu    sync.Mutex
	asyncs []*asyncReply
}

// asyncReply is one Async's hold on its request: a MaxInflight slot and a
// reference. done is set by whichever ends it first, the reply function or
// abandonAsync; the other then does nothing.
type asyncReply struct{ done atomic.Bool }

// abandonAsync ends every outstanding Async reply of r: its slot and
// reference are given back as its reply function would, and a later call
// of that function does nothing. Called when a handler or a Go function
// panicked: the request has been answered SYSTEM_ERROR, and whatever was
// to call the reply may never do so.
func (r *Request) abandonAsync() {
	r.amu.Lock()
	as := r.asyncs
	r.asyncs = nil
	r.amu.Unlock()
	for _, a := range as {
		if a.done.CompareAndSwap(false, true) {
			<-r.Conn.sem
			r.unref()
		}
	}
}

// ref notes one more user of the request's frame; unref drops one and
// releases the frame's budget when it was the last.
func (r *Request) ref() { r.refs.Add(1) }

func (r *Request) unref() {
	if r.refs.Add(-1) == 0 && r.budget > 0 {
		r.Conn.srv.cfg.Budget.Release(r.budget)
	}
}

// Context is cancelled when the request's connection closes (including at
// server Close). Long waits must end when it does.
func (r *Request) Context() context.Context { return r.Conn.ctx }

// Reply queues resp as the response to r: it sets resp's opaque, the
// response bit and the request's serialize type. It does nothing for a
// oneway request, after an earlier Reply, or when the connection is closed.
// It blocks only while the connection's write queue is full.
func (r *Request) Reply(resp *Command) {
	if !r.claim(resp) {
		return
	}
	_ = r.Conn.enqueue(resp)
}

// claim reports whether resp is to be sent as r's answer (Reply
// semantics: not nil, r not oneway, no answer sent before) and, if so,
// makes it the answer to r.
func (r *Request) claim(resp *Command) bool {
	if resp == nil || r.Cmd.IsOneway() || !r.replied.CompareAndSwap(false, true) {
		return false
	}
	r.prepare(resp)
	return true
}

// prepare makes resp the answer to r.
func (r *Request) prepare(resp *Command) {
	resp.Opaque = r.Cmd.Opaque
	resp.Flag |= FlagResponse
	resp.SerializeType = r.Cmd.SerializeType
	if resp.Language == "" {
		resp.Language = ServerLanguage
	}
	if resp.Version == 0 {
		resp.Version = ServerVersion
	}
}

// Async lets a handler answer later without a goroutine of its own. It
// takes one of the connection's MaxInflight slots, waiting for one like
// Go does, and a reference on the request (its frame's budget stays
// reserved), and returns the function that answers (Reply semantics; nil
// sends nothing) and gives both back; ok is false, and nothing was taken,
// when the connection closed meanwhile. The returned function must be
// called once, from any goroutine; it never blocks (when the
// connection's write queue is full, the answer is queued from a new
// goroutine), so callers may call it from a flusher's or a replicator's
// release path. Calls after the first do nothing.
//
// If the handler panics (or the Go function that called Async does), the
// request is answered SYSTEM_ERROR and every reply function of it not
// called by then is ended at once: its slot and the budget are given
// back, and calling it later does nothing.
func (r *Request) Async() (reply func(*Command), ok bool) {
	c := r.Conn
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx.Done():
		return nil, false
	}
	r.ref()
	a := &asyncReply{}
	r.amu.Lock()
	r.asyncs = append(r.asyncs, a)
	r.amu.Unlock()
	return func(resp *Command) {
		if !a.done.CompareAndSwap(false, true) {
			return
		}
		r.amu.Lock()
		for i, x := range r.asyncs {
			if x == a {
				r.asyncs = slices.Delete(r.asyncs, i, i+1)
				break
			}
		}
		r.amu.Unlock()
		defer r.unref()
		defer func() { <-c.sem }()
		if !r.claim(resp) {
			return
		}
		select {
		case c.out <- resp:
		default:
			go func() { _ = c.enqueue(resp) }()
		}
	}, true
}

// Go runs f on a new goroutine and replies with its result (Reply
// semantics; nil sends nothing). The ctx given to f is the connection's
// context. The server's Close waits for f to return. When the connection
// already has MaxInflight such goroutines, Go waits for one to finish
// (back-pressure on this connection only); if the connection closes
// meanwhile, f is not run.
func (r *Request) Go(f func(ctx context.Context) *Command) {
	c := r.Conn
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx.Done():
		return
	}
	c.srv.wg.Add(1)
	r.ref()
	go func() {
		defer c.srv.wg.Done()
		defer r.unref()
		defer func() { <-c.sem }()
		var resp *Command
		func() {
			defer func() {
				if p := recover(); p != nil {
					c.srv.panics.Add(1)
					c.srv.log.Error("remoting: async handler panicked", "code", r.Cmd.Code, "conn", c.String(), "panic", p, "stack", string(debug.Stack()))
					resp = NewResponse(r.Cmd, SystemError, fmt.Sprintf("internal error handling code %d", r.Cmd.Code))
					r.abandonAsync()
				}
			}()
			resp = f(c.ctx)
		}()
		r.Reply(resp)
	}()
}
