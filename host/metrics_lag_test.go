package host

import (
	"bufio"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// promSample is one parsed sample of the Prometheus text format.
type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	promName  = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promLabel = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"`)
)

// parsePrometheusText parses the text exposition format strictly enough to
// catch what breaks scrapers: a bad metric or label name, an unquoted or
// badly escaped label value, a value that is not a float, a TYPE line for
// a family after its samples or twice, or an unknown comment kind.
func parsePrometheusText(text string) ([]promSample, error) {
	var out []promSample
	typed := map[string]bool{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			f := strings.Fields(line)
			if len(f) >= 2 && (f[1] == "HELP" || f[1] == "TYPE") {
				if len(f) < 3 || !promName.MatchString(f[2]) {
					return nil, fmt.Errorf("line %d: bad %s line %q", ln, f[1], line)
				}
				if f[1] == "TYPE" {
					if typed[f[2]] || seen[f[2]] {
						return nil, fmt.Errorf("line %d: TYPE of %s after its samples or twice", ln, f[2])
					}
					typed[f[2]] = true
				}
			}
			continue
		}
		name := promName.FindString(line)
		if name == "" {
			return nil, fmt.Errorf("line %d: bad metric name in %q", ln, line)
		}
		rest := line[len(name):]
		labels := map[string]string{}
		if strings.HasPrefix(rest, "{") {
			rest = rest[1:]
			for !strings.HasPrefix(rest, "}") {
				m := promLabel.FindStringSubmatch(rest)
				if m == nil {
					return nil, fmt.Errorf("line %d: bad label in %q", ln, line)
				}
				labels[m[1]] = m[2]
				// Blanks may follow a comma, as expfmt's parser
				// allows (VictoriaMetrics writes go_info_ext so).
				rest = strings.TrimLeft(strings.TrimPrefix(rest[len(m[0]):], ","), " \t")
			}
			rest = rest[1:]
		}
		f := strings.Fields(rest)
		if len(f) < 1 || len(f) > 2 || !strings.HasPrefix(rest, " ") {
			return nil, fmt.Errorf("line %d: bad value part %q", ln, rest)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil && f[0] != "+Inf" && f[0] != "-Inf" && f[0] != "NaN" {
			return nil, fmt.Errorf("line %d: value %q: %v", ln, f[0], err)
		}
		if math.IsNaN(v) && f[0] != "NaN" {
			return nil, fmt.Errorf("line %d: value %q", ln, f[0])
		}
		seen[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")] = true
		seen[name] = true
		out = append(out, promSample{name, labels, v})
	}
	return out, sc.Err()
}

// TestMetricsConsumerLagParses scrapes /metrics after messages and a
// commit, parses it as Prometheus text, and finds the per-topic and
// per-group series; /status shows the same lag.
func TestMetricsConsumerLagParses(t *testing.T) {
	n := startTestNode(t)
	seedTopicT(t, n, 5, map[string]int64{"G": 2})
	samples := scrape(t, n)
	if v, ok := sampleOf(samples, "keel_topic_messages_total", map[string]string{"topic": "T"}); !ok || v != 5 {
		t.Errorf("keel_topic_messages_total{topic=T} = %v %v, want 5", v, ok)
	}
	q := map[string]string{"group": "G", "topic": "T", "queue": "0"}
	if v, ok := sampleOf(samples, "keel_consumer_lag_messages", q); !ok || v != 3 {
		t.Errorf("keel_consumer_lag_messages = %v %v, want 3", v, ok)
	}
	if v, ok := sampleOf(samples, "keel_consumer_offset", q); !ok || v != 2 {
		t.Errorf("keel_consumer_offset = %v %v, want 2", v, ok)
	}
	lag, _ := statusOf(t, n)["consumer_lag"].([]any)
	if len(lag) != 1 || lag[0].(map[string]any)["lag"] != float64(3) {
		t.Errorf("/status consumer_lag = %v, want one queue 3 behind", lag)
	}
}

func TestParsePrometheusTextRejects(t *testing.T) {
	if s, err := parsePrometheusText("m{a=\"x\", b=\"y\"} 1\n"); err != nil || len(s) != 1 || s[0].labels["b"] != "y" {
		t.Errorf("blank after a label comma: %v %v", s, err)
	}
	for _, bad := range []string{"1bad 1\n", "m{a=b} 1\n", "m{a=\"x\"}1\n", "m one\n", "m 1\n# TYPE m gauge\n", "m{a=\"\\q\"} 1\n"} {
		if _, err := parsePrometheusText(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
