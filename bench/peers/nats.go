package peers

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func natsServers(s Spec) ([]*server.Server, error) {
	n, sync := 1, false
	switch s.Config {
	case "r1-default", "r1-default-tcp":
	case "r1-sync":
		sync = true
	case "r3-sync":
		n, sync = 3, true
	default:
		return nil, fmt.Errorf("unknown NATS configuration %q", s.Config)
	}
	var routes []string
	var ports []int
	if n > 1 {
		for i := 0; i < n; i++ {
			p, err := freePort()
			if err != nil {
				return nil, err
			}
			ports = append(ports, p)
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
		}
	}
	var srvs []*server.Server
	for i := 0; i < n; i++ {
		o := &server.Options{ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: -1, DontListen: n == 1 && !overTCP(s.Config),
			JetStream: true, StoreDir: filepath.Join(s.Dir, fmt.Sprintf("n%d", i)), NoLog: true, NoSigs: true,
			SyncAlways: sync, JetStreamMaxMemory: 256 << 20, JetStreamMaxStore: 16 << 30}
		if n > 1 {
			o.Cluster = server.ClusterOpts{Name: "bench", Host: "127.0.0.1", Port: ports[i]}
			o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		}
		srv, err := server.NewServer(o)
		if err != nil {
			shutdown(srvs)
			return nil, fmt.Errorf("nats server %d: %w", i, err)
		}
		go srv.Start()
		srvs = append(srvs, srv)
	}
	for _, srv := range srvs {
		if !srv.ReadyForConnections(30 * time.Second) {
			shutdown(srvs)
			return nil, fmt.Errorf("nats server %s not ready", srv.Name())
		}
	}
	return srvs, nil
}

// overTCP: the clients connect over TCP on 127.0.0.1 instead of in
// process (net.Pipe), as keel's load generator connects to keel.
func overTCP(config string) bool { return strings.HasSuffix(config, "-tcp") }

func shutdown(srvs []*server.Server) {
	for _, s := range srvs {
		s.Shutdown()
	}
	for _, s := range srvs {
		s.WaitForShutdown()
	}
}

func runNATS(ctx context.Context, s Spec) (*Result, error) {
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(s.Dir)
	srvs, err := natsServers(s)
	if err != nil {
		return nil, err
	}
	defer shutdown(srvs)
	replicas := len(srvs)
	conns := min(s.Producers, 8)
	var jss []jetstream.JetStream
	var ncs []*nats.Conn
	defer func() {
		for _, nc := range ncs {
			nc.Close()
		}
	}()
	for i := 0; i < conns; i++ {
		srv := srvs[i%len(srvs)]
		url, opts := "", []nats.Option{nats.InProcessServer(srv)}
		if overTCP(s.Config) {
			url, opts = srv.ClientURL(), nil
		}
		nc, err := nats.Connect(url, opts...)
		if err != nil {
			return nil, fmt.Errorf("connect to nats: %w", err)
		}
		ncs = append(ncs, nc)
		js, err := jetstream.New(nc)
		if err != nil {
			return nil, err
		}
		jss = append(jss, js)
	}
	cfg := jetstream.StreamConfig{Name: "BENCH", Subjects: []string{"bench.>"}, Storage: jetstream.FileStorage, Replicas: replicas}
	// A cluster needs a meta leader first: retry with short attempts.
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := jss[0].CreateStream(cctx, cfg)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("create stream (R%d): %w", replicas, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	body := payload(s.BodyBytes)
	res, err := load(ctx, s.Producers, s.Warmup, s.Duration, func(p int, seq uint64) error {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := jss[p%len(jss)].Publish(pctx, "bench.x", body)
		return err
	})
	if err != nil {
		return nil, err
	}
	how := "in-process"
	if overTCP(s.Config) {
		how = "over TCP on 127.0.0.1"
	}
	res.Note = fmt.Sprintf("nats-server v2.15.2 embedded, file storage, R%d, sync_always=%v, %d client conns %s", replicas, strings.Contains(s.Config, "sync"), conns, how)
	return res, nil
}
