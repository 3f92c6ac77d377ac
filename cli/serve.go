package cli

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/host/profile"
)

// startError is a failure of `keel serve` before it served. Main prints
// it as the last line on stderr, one line naming the cause, and exits 1.
type startError struct{ err error }

func (e startError) Error() string { return "cannot start: " + oneLine(e.err.Error()) }
func (e startError) Unwrap() error { return e.err }

// serve is `keel serve`: it starts a node on the profile with the app's
// catalog and stops it at the first SIGTERM or SIGINT; a second one exits
// at once with status 2.
func (a *app) serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	prof := fs.String("profile", "configs/profiles/default.toml", "profile `file`")
	data := fs.String("data", "", "data `dir` (overrides store.dir)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var sets setFlags
	fs.Var(&sets, "set", "override a profile key: `key=value` (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	slog.SetDefault(log)
	p, err := profile.Load(*prof, sets)
	if err != nil {
		return startError{err}
	}
	if *data != "" {
		p.Store.Dir = *data
	}
	for _, w := range p.Warnings {
		log.Warn("profile", "warning", w)
	}
	ctx := context.Background()
	// Signals are caught before the node starts: one that arrives while it
	// is starting stops it as soon as it has, instead of killing the
	// process mid-start (the next start would recover as after a crash).
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	log.Info("starting keel", "version", a.version, "profile", *prof, "data", p.Store.Dir, "pid", os.Getpid())
	n, err := host.Start(ctx, p, host.Options{Logger: log, Catalog: a.catalog})
	if err != nil {
		return startError{err}
	}
	s := <-sig
	log.Info("shutting down (a second signal forces exit)", "signal", s.String())
	done := make(chan error, 1)
	go func() { done <- n.Stop(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		return nil
	case s := <-sig:
		log.Error("forced exit: the store was not closed cleanly; the next start recovers", "signal", s.String())
		os.Exit(2)
	}
	return nil
}
