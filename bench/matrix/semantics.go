package matrix

import (
	"strings"
	"time"
)

// SemanticsConfig configures the message-semantics part (package
// bench/semantics): timer messages and transactional sends, each beside
// plain sends to a fresh node of the same profile, driven over the
// RocketMQ remoting protocol on 127.0.0.1.
//
//	[semantics]
//	profile      = "default"   # empty: part disabled
//	producers    = 64
//	connections  = 8
//	depth        = 32
//	body_bytes   = 128
//	timers       = 1000000     # per run; 0: no timer entry
//	timer_window = "60s"       # delays uniform over [1s, timer_window]
//	tx_duration  = "10s"       # per run; 0s: no transaction entry
//	repeats      = 1
type SemanticsConfig struct {
	// Profile is a keel profile name (configs/profiles/NAME.toml) or a
	// path. Empty disables the part.
	Profile string `toml:"profile"`
	// Producers are messages in flight. Default 64.
	Producers int `toml:"producers"`
	// Connections and Depth as in WireConfig. Defaults 8 and 32.
	Connections int `toml:"connections"`
	Depth       int `toml:"depth"`
	// BodyBytes is the body size. Default 128.
	BodyBytes int `toml:"body_bytes"`
	// Timers is the number of timer messages per run, and of the plain
	// messages they are compared with; 0 leaves the timer entry out.
	Timers int64 `toml:"timers"`
	// TimerWindow bounds the delays, spread uniformly over [1s,
	// TimerWindow]. Default 60s.
	TimerWindow Duration `toml:"timer_window"`
	// TxDuration is the length of each transactional and plain run of the
	// transaction entry; 0 leaves the entry out. Default: none.
	TxDuration Duration `toml:"tx_duration"`
	// Repeats of both entries. Default 1.
	Repeats int `toml:"repeats"`
}

// Bounds of the semantics part.
const (
	MaxSemanticsTimers = 100_000_000
	// MinTimerWindow is the shortest timer window: the smallest delay is
	// one second, and the wheel's precision is at most that.
	MinTimerWindow = 2 * time.Second
	MaxTimerWindow = 24 * time.Hour
)

// Enabled reports whether the part runs.
func (s SemanticsConfig) Enabled() bool { return s.Profile != "" }

// fill sets the part's defaults.
func (s *SemanticsConfig) fill() {
	for _, d := range []struct {
		p *int
		v int
	}{{&s.Producers, 64}, {&s.Connections, 8}, {&s.Depth, 32}, {&s.BodyBytes, 128}, {&s.Repeats, 1}} {
		if *d.p == 0 {
			*d.p = d.v
		}
	}
	if s.TimerWindow == 0 {
		s.TimerWindow = Duration(time.Minute)
	}
}

// validate reports every bad value of the part through bad.
func (s SemanticsConfig) validate(bad func(string, ...any)) {
	if s.Profile != "" && strings.TrimSpace(s.Profile) == "" {
		bad("semantics.profile: a blank profile name")
	}
	check := func(key string, v, lo, hi int64) {
		if v < lo || v > hi {
			bad("semantics.%s: %d, want %d to %d", key, v, lo, hi)
		}
	}
	check("producers", int64(s.Producers), 1, MaxProducers)
	check("connections", int64(s.Connections), 1, 1024)
	check("depth", int64(s.Depth), 1, 1<<16)
	check("body_bytes", int64(s.BodyBytes), 1, 1<<20)
	check("timers", s.Timers, 0, MaxSemanticsTimers)
	check("repeats", int64(s.Repeats), 1, 100)
	if w := s.TimerWindow.D(); w < MinTimerWindow || w > MaxTimerWindow {
		bad("semantics.timer_window: %v, want %v to %v", w, MinTimerWindow, MaxTimerWindow)
	}
	if d := s.TxDuration.D(); d < 0 || d > time.Hour {
		bad("semantics.tx_duration: %v, want 0s to 1h", d)
	}
	if s.Enabled() && s.Timers == 0 && s.TxDuration == 0 {
		bad("semantics: profile %q is set but neither timers nor tx_duration is: nothing to run", s.Profile)
	}
}

// quick trims the part for --quick (about a minute on two cores): at
// most 50 000 timers over at most 5s, transaction runs of at most 1s,
// exactly 3 repeats (medians, as the wire part's).
func (s SemanticsConfig) quick() SemanticsConfig {
	s.Timers = min(s.Timers, 50_000)
	s.TimerWindow = Duration(min(s.TimerWindow.D(), 5*time.Second))
	s.TxDuration = Duration(min(s.TxDuration.D(), time.Second))
	s.Repeats = 3
	return s
}

// SemanticsRuns is the number of progress steps of the part: per repeat,
// one for the timer entry (timer and plain run) and one for the
// transaction entry (transactional and plain run), each when configured.
func (c *Config) SemanticsRuns() int {
	s := c.Semantics
	if !s.Enabled() {
		return 0
	}
	n := 0
	if s.Timers > 0 {
		n++
	}
	if s.TxDuration > 0 {
		n++
	}
	return n * s.Repeats
}

// semanticsEstimate is a lower bound of the part's time: per repeat, the
// timer window (the last timer falls due after it) and two transaction
// runs.
func (s SemanticsConfig) estimate() time.Duration {
	if !s.Enabled() {
		return 0
	}
	var t time.Duration
	if s.Timers > 0 {
		t += s.TimerWindow.D()
	}
	t += 2 * s.TxDuration.D()
	return t * time.Duration(s.Repeats)
}
