package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/keelmq/keel/bench/engine"
	"github.com/keelmq/keel/internal/pluginrpc"
	flushstrategies "github.com/keelmq/keel/plugins/flush-strategies"
	"github.com/keelmq/keel/sdk"
)

// External plugin binaries, as `make build` puts them in bin/.
const (
	FlushBinary = "keel-flush"
	IndexBinary = "keel-index-hash"
	// ReplicationBinaryPrefix + "async" or "sync".
	ReplicationBinaryPrefix = "replication-"
)

// findPlugin looks for an external plugin binary in dirs, then next to the
// running executable, then in ./bin, then on PATH.
func findPlugin(name string, dirs []string) (string, error) {
	cands := append([]string(nil), dirs...)
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Dir(exe))
	}
	cands = append(cands, "bin")
	for _, d := range cands {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return filepath.Abs(p)
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("external plugin %s not found in %v, next to this executable, in ./bin or on PATH (build it with `make build` or `go build -o bin/ ./plugins/...`): %w",
		name, dirs, engine.ErrUnavailable)
}

var quiet = slog.New(slog.DiscardHandler)

// killOnStop stops a remote flush strategy and then its process.
type killOnStop struct {
	engine.Runner
	c *pluginrpc.Client
}

func (k killOnStop) Stop(ctx context.Context) error {
	err := k.Runner.Stop(ctx)
	k.c.Kill()
	return err
}

// killOnClose stops a remote indexer and then its process.
type killOnClose struct {
	engine.Indexer
	c *pluginrpc.Client
}

func (k killOnClose) Close() error {
	err := k.Indexer.Close()
	k.c.Kill()
	return err
}

// registerExternal registers the external (go-plugin) forms of the flush
// strategies, the replicators (master and slave each in their own
// process) and the hash index, found as binaries (see findPlugin). A
// missing binary makes its cells skipped with a note saying how to build
// it.
func registerExternal(dirs []string) {
	for _, name := range flushstrategies.Names() {
		engine.RegisterFlush(name, "external", "plugin", func() (engine.Runner, error) {
			path, err := findPlugin(FlushBinary, dirs)
			if err != nil {
				return nil, err
			}
			ctx := context.Background()
			c, err := pluginrpc.Dial(ctx, pluginrpc.DialOptions{Path: path, Args: []string{"-strategy", name}, Logger: quiet})
			if err != nil {
				return nil, fmt.Errorf("start %s: %w", path, err)
			}
			fs, err := c.FlushStrategy()
			if err != nil {
				c.Kill()
				return nil, err
			}
			r, err := engine.PluginRunner(ctx, fs, sdk.Config{Name: name, Section: string(sdk.KindFlush), Role: "master"})
			if err != nil {
				c.Kill()
				return nil, err
			}
			return killOnStop{r, c}, nil
		})
	}
	for _, name := range []string{"async", "sync"} {
		engine.RegisterReplication(name, "external", "plugin", func(env engine.ReplEnv) (engine.Replication, error) {
			path, err := findPlugin(ReplicationBinaryPrefix+name, dirs)
			if err != nil {
				return nil, err
			}
			return engine.NewPluginPair(name, func() (sdk.Replicator, func(), error) {
				c, err := pluginrpc.Dial(context.Background(), pluginrpc.DialOptions{Path: path, Logger: quiet})
				if err != nil {
					return nil, nil, fmt.Errorf("start %s: %w", path, err)
				}
				r, err := c.Replicator()
				if err != nil {
					c.Kill()
					return nil, nil, err
				}
				return r, c.Kill, nil
			}, env)
		})
	}
	engine.RegisterIndex("hash", "external", "plugin", func(dir string) (engine.Indexer, error) {
		path, err := findPlugin(IndexBinary, dirs)
		if err != nil {
			return nil, err
		}
		ctx := context.Background()
		c, err := pluginrpc.Dial(ctx, pluginrpc.DialOptions{Path: path, Logger: quiet})
		if err != nil {
			return nil, fmt.Errorf("start %s: %w", path, err)
		}
		ix, err := c.Indexer()
		if err == nil {
			err = ix.Configure(ctx, sdk.Config{Name: "hash", Section: string(sdk.KindIndex), Role: "master", DataDir: dir})
		}
		if err != nil {
			c.Kill()
			return nil, errors.Join(fmt.Errorf("external index-hash"), err)
		}
		return killOnClose{engine.PluginIndexer(ix), c}, nil
	})
}
