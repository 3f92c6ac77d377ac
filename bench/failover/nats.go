package failover

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmq/keel/bench/matrix"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSSpec describes one JetStream R3 failover run: three nats-server
// instances (embedded nats-server/v2, each in a child process, as keel's
// nodes) clustered on 127.0.0.1, a file-storage stream with three
// replicas, publishers waiting for each publish ack; the stream leader's
// process is killed with SIGKILL Before into the load. (In process,
// Server.Shutdown first steps its raft leaders down: a graceful handover,
// not a crash; the child process makes it one.)
type NATSSpec struct {
	// Dir holds the servers' stores; removed afterwards. Required.
	Dir string
	// Producers, BodyBytes, Before, After and MaxWait as in KeelSpec
	// (BodyBytes is raised to 16: the body carries the id and born time).
	Producers, BodyBytes int
	// Crash as in KeelSpec: the leader's process is killed, or paused
	// (SIGSTOP) until the measurement is over.
	Crash                  string
	Before, After, MaxWait time.Duration
}

const natsStream = "FAILOVER"

// natsPublishTimeout bounds the wait for one publish ack: a publish sent
// while the stream has no leader gets no answer, so this is the
// resolution of the first ack after the kill (keel's producers see the
// kill at once as a closed connection).
const natsPublishTimeout = 500 * time.Millisecond

// natsChild is one nats-server of the cluster, run as a child process.
type natsChild struct {
	Name        string   `json:"name"`
	Port        int      `json:"port"`
	ClusterPort int      `json:"cluster_port"`
	Routes      []string `json:"routes"`
	StoreDir    string   `json:"store_dir"`
}

// natsNode runs the server n describes until waitForStop returns.
func natsNode(n natsChild) error {
	o := &server.Options{ServerName: n.Name, Host: "127.0.0.1", Port: n.Port, JetStream: true, StoreDir: n.StoreDir, NoLog: true,
		NoSigs: true, JetStreamMaxMemory: 256 << 20, JetStreamMaxStore: 4 << 30,
		Cluster: server.ClusterOpts{Name: "failover", Host: "127.0.0.1", Port: n.ClusterPort},
		Routes:  server.RoutesFromStr(strings.Join(n.Routes, ","))}
	srv, err := server.NewServer(o)
	if err != nil {
		return fmt.Errorf("nats server %s: %w", n.Name, err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("nats server %s not ready", n.Name)
	}
	fmt.Println(readyLine)
	waitForStop()
	srv.Shutdown()
	srv.WaitForShutdown()
	return nil
}

// natsServer is a running child: its name and client URL.
type natsServer struct {
	name, url string
	p         *proc
}

func startNATS(ctx context.Context, dir string) ([]natsServer, error) {
	ad, err := freeAddrs(6)
	if err != nil {
		return nil, err
	}
	port := func(a string) int {
		n, _ := strconv.Atoi(a[strings.LastIndexByte(a, ':')+1:])
		return n
	}
	var routes []string
	for _, a := range ad[3:] {
		routes = append(routes, "nats://"+a)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var srvs []natsServer
	for i := 0; i < 3; i++ {
		n := natsChild{Name: fmt.Sprintf("n%d", i), Port: port(ad[i]), ClusterPort: port(ad[3+i]), Routes: routes,
			StoreDir: filepath.Join(dir, fmt.Sprintf("n%d", i))}
		p, err := startProc(sctx, "nats "+n.Name, childSpec{NATS: &n})
		if err != nil {
			stopNATS(srvs)
			return nil, err
		}
		srvs = append(srvs, natsServer{name: n.Name, url: "nats://" + ad[i], p: p})
	}
	return srvs, nil
}

func stopNATS(srvs []natsServer) {
	for _, s := range srvs {
		s.p.stop()
	}
}

// RunNATS runs one JetStream R3 failover measurement. Result.FirstOKMs
// and FirstStoredMs are both the first publish ack after the kill;
// ConsumerResumeMs is an ordered consumer's first message born after the kill.
func RunNATS(ctx context.Context, s NATSSpec) (*Result, error) {
	if s.Dir == "" || s.Producers < 1 || s.BodyBytes < 1 || s.Before <= 0 || s.After <= 0 || s.MaxWait <= 0 {
		return nil, fmt.Errorf("failover: NATSSpec needs Dir, Producers and BodyBytes >= 1, Before, After and MaxWait > 0: %+v", s)
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("failover: create dir: %w", err)
	}
	defer os.RemoveAll(s.Dir)
	srvs, err := startNATS(ctx, s.Dir)
	if err != nil {
		return nil, err
	}
	defer stopNATS(srvs)
	var urls []string
	for _, srv := range srvs {
		urls = append(urls, srv.url)
	}
	connect := func(i int) (*nats.Conn, jetstream.JetStream, error) {
		// Each client starts on server i and knows all three, so those on
		// the shut-down server reconnect to another.
		list := append([]string{urls[i%3]}, urls...)
		nc, err := nats.Connect(strings.Join(list, ","), nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			return nil, nil, fmt.Errorf("failover: connect to nats: %w", err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			return nil, nil, err
		}
		return nc, js, nil
	}
	var ncs []*nats.Conn
	defer func() {
		for _, nc := range ncs {
			nc.Close()
		}
	}()
	var jss []jetstream.JetStream
	for i := 0; i <= s.Producers; i++ { // the last one is the consumer's
		nc, js, err := connect(i)
		if err != nil {
			return nil, err
		}
		ncs, jss = append(ncs, nc), append(jss, js)
	}
	cfg := jetstream.StreamConfig{Name: natsStream, Subjects: []string{"failover.>"}, Storage: jetstream.FileStorage, Replicas: 3}
	var st jetstream.Stream
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err = jss[0].CreateStream(cctx, cfg)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("failover: create stream (R3): %w", err)
		}
	}

	// kill: the signal; dead: the leader seen gone (as in RunKeel).
	var kill, dead atomic.Int64
	since := func(now time.Time) int64 {
		k := kill.Load()
		if k == 0 || now.UnixNano() <= k {
			return 0
		}
		return now.UnixNano() - k
	}
	var firstOK, resumed, errs atomic.Int64
	var mu sync.Mutex
	var acked []uint64
	var firstErr string
	okCh, resumedCh := make(chan struct{}), make(chan struct{})
	var okOnce, resumeOnce sync.Once

	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	cons, err := jss[s.Producers].OrderedConsumer(ctx, natsStream, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return nil, fmt.Errorf("failover: ordered consumer: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if b := m.Data(); len(b) >= 16 {
			if k := dead.Load(); k != 0 && int64(binary.BigEndian.Uint64(b[8:])) > k {
				resumed.CompareAndSwap(0, since(time.Now()))
				resumeOnce.Do(func() { close(resumedCh) })
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("failover: consume: %w", err)
	}
	defer cc.Stop()

	size := max(s.BodyBytes, 16)
	var wg sync.WaitGroup
	for p := 0; p < s.Producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := make([]byte, size)
			for seq := uint64(1); lctx.Err() == nil; seq++ {
				id := uint64(p)<<40 | seq
				binary.BigEndian.PutUint64(body, id)
				binary.BigEndian.PutUint64(body[8:], uint64(time.Now().UnixNano()))
				sent := time.Now()
				pctx, cancel := context.WithTimeout(lctx, natsPublishTimeout)
				_, err := jss[p].Publish(pctx, "failover.x", body)
				cancel()
				now := time.Now()
				if err != nil {
					if lctx.Err() != nil {
						return
					}
					errs.Add(1)
					if since(now) > 0 {
						mu.Lock()
						if firstErr == "" {
							firstErr = err.Error()
						}
						mu.Unlock()
					}
					sleep(lctx, 5*time.Millisecond)
					continue
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
				// Only a publish sent after the kill shows the new leader.
				if d := dead.Load(); d != 0 && sent.UnixNano() > d {
					firstOK.CompareAndSwap(0, since(now))
					okOnce.Do(func() { close(okCh) })
				}
			}
		}()
	}
	if !sleep(ctx, s.Before) {
		return nil, ctx.Err()
	}
	info, err := st.Info(ctx)
	if err != nil || info.Cluster == nil || info.Cluster.Leader == "" {
		stopLoad()
		wg.Wait()
		return nil, fmt.Errorf("failover: find the stream leader: %v (info %+v)", err, info)
	}
	victim := -1
	for i, srv := range srvs {
		if srv.name == info.Cluster.Leader {
			victim = i
		}
	}
	if victim < 0 {
		stopLoad()
		wg.Wait()
		return nil, fmt.Errorf("failover: stream leader %q is none of the servers", info.Cluster.Leader)
	}
	kill.Store(time.Now().UnixNano())
	if s.Crash == matrix.FailoverPause {
		srvs[victim].p.pause()
	} else {
		srvs[victim].p.kill()
	}
	dead.Store(time.Now().UnixNano())
	awaitRecovery(ctx, time.Unix(0, kill.Load()).Add(s.MaxWait), okCh, resumedCh)
	srvs[victim].p.kill()
	sleep(ctx, s.After)
	stopLoad()
	wg.Wait()
	cc.Stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	at := func(v int64) float64 {
		if v == 0 {
			return -1
		}
		return ms(time.Duration(v))
	}
	mu.Lock()
	r := &Result{FirstOKMs: at(firstOK.Load()), ConsumerResumeMs: at(resumed.Load()), Acked: int64(len(acked)), Errors: errs.Load(), FirstError: firstErr}
	r.FirstStoredMs = r.FirstOKMs
	ids := acked
	mu.Unlock()
	// Read the stream back through a surviving server.
	var reader jetstream.JetStream
	for i := range srvs {
		if i != victim {
			reader = jss[i]
			break
		}
	}
	lost, err := natsLost(ctx, reader, ids)
	if err != nil {
		return nil, fmt.Errorf("%w (after the kill: %+v)", err, *r)
	}
	r.AckedLost = lost
	return r, nil
}

// natsLost reads the whole stream with ordered consumers and counts the
// acked ids it does not hold. Right after a leader change a consumer
// request may find no responder: a failed read is resumed from the next
// sequence with a new consumer, up to 20 times.
func natsLost(ctx context.Context, js jetstream.JetStream, acked []uint64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var st jetstream.Stream
	var info *jetstream.StreamInfo
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, err = js.Stream(ctx, natsStream); err == nil {
			if info, err = st.Info(ctx); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("failover: stream info after the failover: %w", err)
		}
	}
	have := make(map[uint64]bool, len(acked))
	next := info.State.FirstSeq
	for attempt := 0; next <= info.State.LastSeq; attempt++ {
		if attempt == 20 {
			return 0, fmt.Errorf("failover: read back the stream at sequence %d of %d: %w", next, info.State.LastSeq, err)
		}
		if attempt > 0 {
			sleep(ctx, 200*time.Millisecond)
		}
		var c jetstream.Consumer
		if c, err = st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: next}); err != nil {
			continue
		}
		for next <= info.State.LastSeq {
			var batch jetstream.MessageBatch
			if batch, err = c.Fetch(1000, jetstream.FetchMaxWait(2*time.Second)); err != nil {
				break
			}
			got := 0
			for m := range batch.Messages() {
				md, merr := m.Metadata()
				if merr != nil {
					continue
				}
				got++
				next = md.Sequence.Stream + 1
				if b := m.Data(); len(b) >= 16 {
					have[binary.BigEndian.Uint64(b)] = true
				}
			}
			if err = batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
				break
			}
			if got == 0 {
				err = fmt.Errorf("no message at sequence %d within 2s", next)
				break
			}
		}
	}
	var lost int64
	for _, id := range acked {
		if !have[id] {
			lost++
		}
	}
	return lost, nil
}
