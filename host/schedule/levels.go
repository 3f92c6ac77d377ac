package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultLevels is RocketMQ's default messageDelayLevel, the default of
// the profile key store.message_delay_level: 18 levels, level 1 = 1s.
const DefaultLevels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

// MaxLevels bounds the length of a level table: each level is a queue of
// the schedule topic and a goroutine of the delivery service.
const MaxLevels = 256

// maxDelay bounds one level's delay (far beyond any use, and far from
// time.Duration's overflow).
const maxDelay = 365 * 24 * time.Hour

// Levels is a delay level table: Levels[i] is the delay of level i+1.
// A valid table (ParseLevels) has 1 to MaxLevels positive entries.
type Levels []time.Duration

// ParseLevels parses a level table in RocketMQ's messageDelayLevel form:
// entries separated by spaces, each a positive integer and one unit letter,
// s, m, h or d ("1s 5s 10s 30s 1m"). The error names the bad entry by its
// position (level) and text.
func ParseLevels(s string) (Levels, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, fmt.Errorf("no delay levels (want entries such as %q)", "1s 5s 10s")
	}
	if len(fields) > MaxLevels {
		return nil, fmt.Errorf("%d delay levels, more than %d", len(fields), MaxLevels)
	}
	out := make(Levels, len(fields))
	for i, f := range fields {
		d, err := parseLevel(f)
		if err != nil {
			return nil, fmt.Errorf("delay level %d %q: %v", i+1, f, err)
		}
		out[i] = d
	}
	return out, nil
}

func parseLevel(f string) (time.Duration, error) {
	units := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}
	unit, ok := units[f[len(f)-1]]
	if !ok {
		return 0, fmt.Errorf("the unit must be s, m, h or d (as in \"10s\")")
	}
	n, err := strconv.ParseUint(f[:len(f)-1], 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("want a positive whole number before the unit (as in \"10s\")")
	}
	d := time.Duration(n) * unit
	if d > maxDelay {
		return 0, fmt.Errorf("longer than %s", maxDelay)
	}
	return d, nil
}

// String returns the table in the form ParseLevels reads, each delay in
// its largest whole unit.
func (l Levels) String() string {
	parts := make([]string, len(l))
	for i, d := range l {
		parts[i] = formatLevel(d)
	}
	return strings.Join(parts, " ")
}

func formatLevel(d time.Duration) string {
	for _, u := range []struct {
		d time.Duration
		c string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.c
		}
	}
	return strconv.FormatInt(int64(d/time.Second), 10) + "s"
}

// Max is the highest level, the table's length.
func (l Levels) Max() int32 { return int32(len(l)) }

// Clamp returns the level a DELAY value n > 0 is stored under: n itself,
// or the highest level when n is above it (RocketMQ clamps the same way).
func (l Levels) Clamp(n int32) int32 { return min(n, l.Max()) }

// Delay is the delay of level (1 to Max).
func (l Levels) Delay(level int32) time.Duration { return l[level-1] }
