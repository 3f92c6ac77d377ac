package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/internal/builtins"
)

// FindProfile resolves a profile name to its file. A name containing a
// path separator or ending in ".toml" is a path and is returned as is
// (after checking that it exists). Otherwise NAME.toml is looked for in
// dirs, then in configs/profiles under the working directory, then in
// configs/profiles next to and one level above the running executable's
// directory (bin/keel → configs/profiles). The error lists where it
// looked.
func FindProfile(name string, dirs ...string) (string, error) {
	if strings.ContainsRune(name, filepath.Separator) || strings.HasSuffix(name, ".toml") {
		if _, err := os.Stat(name); err != nil {
			return "", fmt.Errorf("wire: profile %q: %w", name, err)
		}
		return name, nil
	}
	cand := slices.Clone(dirs)
	cand = append(cand, filepath.Join("configs", "profiles"))
	if exe, err := os.Executable(); err == nil {
		d := filepath.Dir(exe)
		cand = append(cand, filepath.Join(d, "configs", "profiles"), filepath.Join(d, "..", "configs", "profiles"))
	}
	for _, d := range cand {
		p := filepath.Join(d, name+".toml")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("wire: profile %q not found in %s", name, strings.Join(cand, ", "))
}

// NodeSpec describes an in-process keel node for a benchmark run.
type NodeSpec struct {
	// Profile is the profile file (see FindProfile). Required.
	Profile string
	// Dir is the node's data directory (store.dir). Required.
	Dir string
	// SegmentSize overrides store.segment_size when > 0.
	SegmentSize int64
	// Queues is the queue count of auto-created topics
	// (store.default_queues) when > 0.
	Queues int
	// Overrides are applied after the benchmark's own (`keel serve --set`
	// syntax), so they win.
	Overrides []string
	// Logger receives the node's logs; nil keeps only errors, on stderr.
	Logger *slog.Logger
}

// StartNode starts a keel node in this process with the profile's
// plugins and settings, except: every listener (name server, broker, HA,
// admin) is on 127.0.0.1 with a free port, the store is in Dir, and the
// disk-usage ratios are raised to 0.99 (benchmark stores live on a shared
// scratch disk; nothing is deleted early or refused below 99 % use). The
// broker's address is node.Addr("broker"). The caller must Stop the node.
func StartNode(ctx context.Context, s NodeSpec) (*host.Node, error) {
	if s.Profile == "" || s.Dir == "" {
		return nil, errors.New("wire: NodeSpec.Profile and Dir are required")
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("wire: create node dir: %w", err)
	}
	ov := []string{
		fmt.Sprintf("store.dir=%q", s.Dir),
		`server.namesrv_addr="127.0.0.1:0"`,
		`server.broker_addr="127.0.0.1:0"`,
		`server.ha_addr="127.0.0.1:0"`,
		`admin.addr="127.0.0.1:0"`,
		"store.disk_max_used_ratio=0.99",
		"store.disk_clean_forcibly_ratio=0.99",
		"store.disk_warning_ratio=0.99",
		"store.auto_create_topics=true",
	}
	if s.SegmentSize > 0 {
		ov = append(ov, fmt.Sprintf("store.segment_size=%d", s.SegmentSize))
	}
	if s.Queues > 0 {
		ov = append(ov, fmt.Sprintf("store.default_queues=%d", s.Queues))
	}
	ov = append(ov, s.Overrides...)
	prof, err := profile.Load(s.Profile, ov)
	if err != nil {
		return nil, fmt.Errorf("wire: load profile %s: %w", s.Profile, err)
	}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	n, err := host.Start(ctx, prof, host.Options{Logger: log, Catalog: builtins.Catalog()})
	if err != nil {
		return nil, fmt.Errorf("wire: start keel node (profile %s): %w", s.Profile, err)
	}
	return n, nil
}

// Spec describes one Run: a fresh node and one Load against it.
type Spec struct {
	Node NodeSpec
	// Load is the generator's spec; its Addr is filled in by Run.
	Load LoadSpec
}

// Run starts a node (StartNode), sends one priming message (so the topic
// exists before the clock starts), runs Load against it, stops the node
// and removes Node.Dir (WithNode). A failure to stop the node after a
// successful measurement is returned together with the result.
func Run(ctx context.Context, s Spec) (res *Result, err error) {
	err = WithNode(ctx, s.Node, func(n *host.Node) error {
		ls := s.Load
		ls.Addr = n.Addr("broker")
		if ls.Queues <= 0 && s.Node.Queues > 0 {
			ls.Queues = s.Node.Queues
		}
		if err := prime(ctx, ls); err != nil {
			return err
		}
		r, err := Load(ctx, ls)
		res = r
		return err
	})
	return res, err
}

// WithNode starts a node (StartNode), calls f with it, then stops the
// node (within 30s) and removes s.Dir, whatever f returned. It returns
// f's error, or else the failure to start or to stop the node.
func WithNode(ctx context.Context, s NodeSpec, f func(n *host.Node) error) (err error) {
	defer os.RemoveAll(s.Dir)
	n, err := StartNode(ctx, s)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if serr := n.Stop(sctx); serr != nil && err == nil {
			err = fmt.Errorf("wire: stop keel node: %w", serr)
		}
	}()
	return f(n)
}

// Prime sends one plain message to ls.Topic on its own connection (queue
// 0, body "prime") and checks that it was stored, so that the topic
// exists before a measurement starts.
func Prime(ctx context.Context, ls LoadSpec) error { return prime(ctx, ls) }

func prime(ctx context.Context, ls LoadSpec) error {
	s, err := ls.withDefaults()
	if err != nil {
		return err
	}
	c, err := dial(ctx, s.Addr, 1)
	if err != nil {
		return err
	}
	defer c.close()
	t, err := newTemplate(message(&s, 0, []byte("prime")), s.Code, 0)
	if err != nil {
		return err
	}
	cl := &call{done: make(chan reply, 1)}
	op, err := c.start(cl, t, time.Now().UnixMilli(), 0)
	if err != nil {
		return fmt.Errorf("wire: priming send: %w", err)
	}
	select {
	case r := <-cl.done:
		if r.owed {
			c.settle()
		}
		if r.err != nil {
			return fmt.Errorf("wire: priming send: %w", r.err)
		}
		if st := StatusOf(r.resp.code); !Stored(st) {
			return fmt.Errorf("wire: priming send: response code %d: %s", r.resp.code, r.resp.remark)
		}
		return nil
	case <-time.After(s.Timeout):
		c.abandon(cl, op)
		return fmt.Errorf("wire: priming send: no response within %v", s.Timeout)
	case <-ctx.Done():
		c.abandon(cl, op)
		return ctx.Err()
	}
}
