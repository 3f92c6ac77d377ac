package sdk

import (
	"io"
	"log/slog"
	"time"
)

// NewPluginLogHandler returns a slog.Handler writing hclog's JSON line
// format (@level, @message, @timestamp, then the attributes), which the
// host's go-plugin client parses from a plugin's stderr and forwards into
// the host's slog logger at the same level. Serve installs one as the
// default logger; it is exported for plugins that build their own loggers.
func NewPluginLogHandler(w io.Writer, level slog.Leveler) slog.Handler {
	return slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				if t, ok := a.Value.Any().(time.Time); ok {
					return slog.String("@timestamp", t.Format("2006-01-02T15:04:05.000000Z07:00"))
				}
			case slog.LevelKey:
				if l, ok := a.Value.Any().(slog.Level); ok {
					return slog.String("@level", hclogLevelName(l))
				}
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			}
			return a
		},
	})
}

func hclogLevelName(l slog.Level) string {
	switch {
	case l < slog.LevelDebug:
		return "trace"
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}
