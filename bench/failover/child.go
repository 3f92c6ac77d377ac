package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/host/profile"
	"github.com/keelmq/keel/internal/builtins"
)

// ChildEnv is the environment variable that turns a re-executed process
// into a keel node of the failover part; its value is the JSON childSpec.
const ChildEnv = "KEEL_BENCH_FAILOVER_CHILD"

// readyLine is what a child prints on standard output once its node
// serves.
const readyLine = "ready"

// childSpec is a node to run: a keel node from the empty profile plus
// Sets (`keel serve --set` syntax), or with NATS set a nats-server.
type childSpec struct {
	Sets []string   `json:"sets,omitempty"`
	NATS *natsChild `json:"nats,omitempty"`
}

// MaybeChild runs a failover node and exits if this process was started
// as one (ChildEnv is set); otherwise it returns at once. Call it first
// thing in main, and in TestMain of tests that run the part.
func MaybeChild() {
	js := os.Getenv(ChildEnv)
	if js == "" {
		return
	}
	if err := child(js); err != nil {
		fmt.Fprintln(os.Stderr, "failover node:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child starts the node, prints readyLine, and stops the node on SIGTERM
// or when standard input closes (the parent is gone).
func child(js string) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		return fmt.Errorf("decode %s: %w", ChildEnv, err)
	}
	if spec.NATS != nil {
		return natsNode(*spec.NATS)
	}
	prof, err := profile.LoadBytes("failover.toml", []byte("schema = 1\n"), spec.Sets)
	if err != nil {
		return fmt.Errorf("load profile: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	n, err := host.Start(ctx, prof, host.Options{Logger: log, Catalog: builtins.Catalog()})
	cancel()
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	fmt.Println(readyLine)
	waitForStop()
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Stop(sctx); err != nil {
		return fmt.Errorf("stop node: %w", err)
	}
	return nil
}

// waitForStop returns on SIGTERM or interrupt, or when standard input
// closes (the parent is gone).
func waitForStop() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	gone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(gone)
	}()
	select {
	case <-stop:
	case <-gone:
	}
}
