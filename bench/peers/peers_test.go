package peers

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

func TestPeers(t *testing.T) {
	for _, tc := range []struct{ system, config string }{
		{"nats", "r1-default"},
		{"nats", "r1-sync"},
		{"nats", "r3-sync"},
		{"redis", "always"},
		{"redis", "everysec-wait"},
	} {
		t.Run(tc.system+"/"+tc.config, func(t *testing.T) {
			if testing.Short() && tc.config == "r3-sync" {
				t.Skip("cluster formation takes seconds")
			}
			res, err := Run(context.Background(), Spec{System: tc.system, Config: tc.config, Dir: filepath.Join(t.TempDir(), "p"),
				Producers: 4, BodyBytes: 128, Warmup: 200 * time.Millisecond, Duration: time.Second})
			if errors.Is(err, ErrSkipped) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Msgs == 0 || res.Latency.Count() != uint64(res.Msgs) || res.Note == "" {
				t.Fatalf("msgs %d, latencies %d, errors %d, note %q", res.Msgs, res.Latency.Count(), res.Errors, res.Note)
			}
			t.Logf("%.0f msgs/s p99 %v (%s)", res.MsgsPerSec, time.Duration(res.Latency.Quantile(0.99)), res.Note)
		})
	}
}

func TestUnknown(t *testing.T) {
	for _, s := range []Spec{{System: "kafka"}, {System: "nats", Config: "r9", Dir: t.TempDir()}, {System: "redis", Config: "never", Dir: t.TempDir()}} {
		if _, err := Run(context.Background(), s); err == nil || errors.Is(err, ErrSkipped) {
			t.Errorf("%+v: err %v", s, err)
		}
	}
}
