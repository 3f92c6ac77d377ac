package pluginrpc

import (
	"context"
	"io"
	"log"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// NewHCLogAdapter returns an hclog.Logger that writes into l: go-plugin's
// own logs and the JSON log lines a plugin writes to stderr (which go-plugin
// re-emits at their level with their keys and values) land in the host's
// slog logger. name is added as the "logger" attribute.
func NewHCLogAdapter(l *slog.Logger, name string) hclog.Logger {
	return &hcAdapter{l: l, name: name, level: new(atomic.Int32)}
}

type hcAdapter struct {
	l     *slog.Logger
	name  string
	args  []any
	level *atomic.Int32 // an hclog.Level; NoLevel: follow the slog handler
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel, hclog.DefaultLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (a *hcAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || !a.enabled(level) {
		return
	}
	attrs := make([]any, 0, len(a.args)+len(args)+2)
	if a.name != "" {
		attrs = append(attrs, "logger", a.name)
	}
	attrs = append(attrs, a.args...)
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == "timestamp" {
			continue // go-plugin adds the plugin's own timestamp; slog stamps its own
		}
		attrs = append(attrs, args[i], args[i+1])
	}
	if len(args)%2 == 1 {
		attrs = append(attrs, "EXTRA_VALUE", args[len(args)-1])
	}
	a.l.Log(context.Background(), slogLevel(level), msg, attrs...)
}

func (a *hcAdapter) enabled(level hclog.Level) bool {
	if floor := hclog.Level(a.level.Load()); floor != hclog.NoLevel && level < floor {
		return false
	}
	return a.l.Enabled(context.Background(), slogLevel(level))
}

func (a *hcAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hcAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hcAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hcAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hcAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }
func (a *hcAdapter) IsTrace() bool                 { return a.enabled(hclog.Trace) }
func (a *hcAdapter) IsDebug() bool                 { return a.enabled(hclog.Debug) }
func (a *hcAdapter) IsInfo() bool                  { return a.enabled(hclog.Info) }
func (a *hcAdapter) IsWarn() bool                  { return a.enabled(hclog.Warn) }
func (a *hcAdapter) IsError() bool                 { return a.enabled(hclog.Error) }
func (a *hcAdapter) ImpliedArgs() []any            { return a.args }
func (a *hcAdapter) Name() string                  { return a.name }

func (a *hcAdapter) With(args ...any) hclog.Logger {
	b := *a
	b.args = append(slices.Clip(a.args), args...)
	return &b
}

func (a *hcAdapter) Named(name string) hclog.Logger {
	b := *a
	if b.name != "" {
		b.name += "." + name
	} else {
		b.name = name
	}
	return &b
}

func (a *hcAdapter) ResetNamed(name string) hclog.Logger {
	b := *a
	b.name = name
	return &b
}

func (a *hcAdapter) SetLevel(level hclog.Level) { a.level.Store(int32(level)) }

func (a *hcAdapter) GetLevel() hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

func (a *hcAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hcAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return &lineWriter{log: a.l, level: slog.LevelInfo, stream: a.name}
}

// lineWriter turns writes into one log record per line (a plugin's raw
// stdout/stderr output).
type lineWriter struct {
	log    *slog.Logger
	level  slog.Level
	stream string
	mu     sync.Mutex
	buf    []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := strings.IndexByte(string(w.buf), '\n')
		if i < 0 {
			if len(w.buf) > 64<<10 {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = append(w.buf[:0], w.buf[i+1:]...)
	}
}

func (w *lineWriter) emit(line []byte) {
	if len(line) == 0 {
		return
	}
	w.log.Log(context.Background(), w.level, string(line), "stream", w.stream)
}
