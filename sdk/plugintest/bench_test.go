package plugintest_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/keelmq/keel/internal/pluginrpc"
	"github.com/keelmq/keel/sdk"
	"github.com/keelmq/keel/sdk/internal/testplugin"
	"github.com/keelmq/keel/sdk/plugintest"
)

// The same probe indexer in-process (builtin) and as a separate process
// (external), measured on the two paths that cross the boundary: a plugin's
// call into the Host, and one Index batch of 1000 records.

func benchIndexer(b *testing.B, external, noLane bool) sdk.Indexer {
	b.Helper()
	_, h := hostEnv(b, nil)
	var x sdk.Indexer
	if external {
		bin := plugintest.Build(b, testPluginPkg)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := pluginrpc.Dial(ctx, pluginrpc.DialOptions{Path: bin, Args: []string{"probe"}, Logger: slog.New(slog.DiscardHandler), SocketDir: b.TempDir(), NoLane: noLane})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Kill)
		if x, err = c.Indexer(); err != nil {
			b.Fatal(err)
		}
	} else {
		x = testplugin.NewProbe()
	}
	ctx := context.Background()
	if err := x.Configure(ctx, sdk.Config{Name: "probe", Section: "index", Document: []byte("schema = 1\n"), DataDir: b.TempDir()}); err != nil {
		b.Fatal(err)
	}
	if err := x.Start(ctx, h); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { x.Stop(context.Background()) })
	return x
}

// BenchmarkHostCall: one Host.Positions call made by the plugin (external:
// over the lane; external-grpc: over the brokered gRPC connection). The
// plugin makes b.N calls inside one Query; ns/op is the time per call.
func BenchmarkHostCall(b *testing.B) {
	for _, mode := range []string{"builtin", "external", "external-grpc"} {
		b.Run(mode, func(b *testing.B) {
			x := benchIndexer(b, mode != "builtin", mode == "external-grpc")
			b.ResetTimer()
			res, err := x.Query(context.Background(), sdk.Query{Topic: "__host", Key: fmt.Sprintf("positions %d", b.N), Max: 1})
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(res[0])/float64(b.N), "plugin-ns/call")
		})
	}
}

// BenchmarkIndexBatch1000: one Index call with a batch of 1000 records
// (the same batch each time; the indexer treats it as a re-dispatch).
func BenchmarkIndexBatch1000(b *testing.B) {
	batch := make([]sdk.Record, 1000)
	for i := range batch {
		batch[i] = sdk.Record{Topic: "BenchTopic", QueueID: int32(i % 8), QueueOffset: int64(i), PhysOffset: int64(i) * 200, Size: 200,
			TagsCode: 42, StoreTimestamp: 1_700_000_000_000 + int64(i), Keys: fmt.Sprintf("order-%d customer-%d", i, i%97),
			UniqKey: fmt.Sprintf("7F0000010001%020X", i)}
	}
	for _, mode := range []string{"builtin", "external", "external-grpc"} {
		b.Run(mode, func(b *testing.B) {
			x := benchIndexer(b, mode != "builtin", mode == "external-grpc")
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := x.Index(ctx, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/record")
		})
	}
}
