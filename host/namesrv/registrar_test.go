package namesrv

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// source is a RegistrarSource whose registration the test changes.
type source struct {
	mu sync.Mutex
	r  Registration
}

func (s *source) Registration() Registration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r
}

func (s *source) set(f func(*Registration)) {
	s.mu.Lock()
	f(&s.r)
	s.mu.Unlock()
}

// serveOn serves s on addr ("127.0.0.1:0" for any port) and returns the
// remoting server and the bound address.
func serveOn(t *testing.T, s *Server, addr string) (*remoting.Server, string) {
	t.Helper()
	rs := remoting.NewServer(remoting.ServerConfig{Logger: quietLogger()})
	s.Register(rs)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go rs.Serve(l)
	t.Cleanup(func() { rs.Close() })
	return rs, l.Addr().String()
}

func routed(t *testing.T, s *Server, topic string) (topicRouteData, bool) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reg.route(topic)
}

func TestRegistrarRegistersTriggersAndUnregisters(t *testing.T) {
	s1, s2, local := New(Config{Logger: quietLogger()}), New(Config{Logger: quietLogger()}), New(Config{Logger: quietLogger()})
	_, a1 := serveOn(t, s1, "127.0.0.1:0")
	_, a2 := serveOn(t, s2, "127.0.0.1:0")
	src := &source{r: reg("C1", "broker-a", aSlave, 1, topic("T", 4))}
	var mu sync.Mutex
	answers := map[string]RegisterResult{}
	r := NewRegistrar(RegistrarConfig{NameServers: []string{a1, a2}, Local: local, Interval: time.Hour, Logger: quietLogger(),
		OnRegistered: func(ns string, res RegisterResult) { mu.Lock(); answers[ns] = res; mu.Unlock() }}, src)
	r.Start()
	all := []*Server{s1, s2, local}
	waitFor(t, "first round on every name server", func() bool {
		for _, s := range all {
			if _, ok := routed(t, s, "T"); !ok {
				return false
			}
		}
		return true
	})
	// The registration connection stays open: a connection per call
	// would have been closed, and the broker dropped, by now.
	time.Sleep(50 * time.Millisecond)
	for _, s := range all[:2] {
		if _, ok := routed(t, s, "T"); !ok {
			t.Fatal("broker dropped after its registration: the connection did not persist")
		}
	}
	// A master appears; the slave is promoted and gets a new topic.
	mustRegister(t, s1, reg("C1", "broker-a", aMaster, 0, topic("T", 4)))
	if err := r.Register(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if answers[a1].MasterAddr != aMaster || answers[a2].MasterAddr != "" || answers[""].MasterAddr != "" {
		t.Fatalf("answers %+v", answers)
	}
	mu.Unlock()
	// On s1 the promoted slave displaces the old master at id 0.
	src.set(func(r *Registration) { r.BrokerID = 0; r.Topics = topics(topic("T", 4), topic("U", 2)) })
	r.Trigger()
	r.Trigger()
	waitFor(t, "the triggered round", func() bool {
		for _, s := range all {
			rd, ok := routed(t, s, "U")
			if !ok || rd.BrokerDatas[0].BrokerAddrs["0"] != aSlave || len(rd.BrokerDatas[0].BrokerAddrs) != 1 {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for i, s := range all {
		if _, ok := routed(t, s, "T"); ok {
			t.Fatalf("name server %d still routes T after Stop", i)
		}
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := r.Register(ctx); !errors.Is(err, ErrRegistrarStopped) {
		t.Fatalf("Register after Stop: %v", err)
	}
	if _, ok := routed(t, local, "T"); ok {
		t.Fatal("Register after Stop registered again")
	}
}

func TestRegistrarStuckNameServerDoesNotDelayOthers(t *testing.T) {
	stuck, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	go func() { // accept and never answer
		for {
			c, err := stuck.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close()
	s1 := New(Config{Logger: quietLogger()})
	_, a1 := serveOn(t, s1, "127.0.0.1:0")
	src := &source{r: reg("C1", "broker-a", aMaster, 0, topic("T", 4))}
	r := NewRegistrar(RegistrarConfig{NameServers: []string{stuck.Addr().String(), deadAddr, a1}, Timeout: 20 * time.Second, Logger: quietLogger()}, src)
	r.Start()
	waitFor(t, "the live name server registered while another hangs", func() bool { _, ok := routed(t, s1, "T"); return ok })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := r.Stop(ctx); err == nil {
		t.Fatal("Stop waited for nothing: the round with the hung name server should still be running")
	}
}

func TestRegistrarRedialsARestartedNameServer(t *testing.T) {
	s1 := New(Config{Logger: quietLogger()})
	rs, addr := serveOn(t, s1, "127.0.0.1:0")
	src := &source{r: reg("C1", "broker-a", aMaster, 0, topic("T", 4))}
	r := NewRegistrar(RegistrarConfig{NameServers: []string{addr}, Logger: quietLogger()}, src)
	ctx := context.Background()
	if err := r.Register(ctx); err != nil {
		t.Fatal(err)
	}
	rs.Close()
	s2 := New(Config{Logger: quietLogger()})
	serveOn(t, s2, addr)
	if err := r.Register(ctx); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	if _, ok := routed(t, s2, "T"); !ok {
		t.Fatal("restarted name server has no route")
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRegistrarReportsRefusals(t *testing.T) {
	s1 := New(Config{Logger: quietLogger()})
	_, addr := serveOn(t, s1, "127.0.0.1:0")
	src := &source{r: reg("C1", "", aMaster, 0)}
	r := NewRegistrar(RegistrarConfig{NameServers: []string{addr}, Logger: quietLogger()}, src)
	err := r.Register(context.Background())
	if err == nil || !strings.Contains(err.Error(), "header field brokerName is missing") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("refused registration: %v", err)
	}
}

func TestTargetFailureLogIsRateLimited(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	tg := &target{addr: "ns:1"}
	for range 5 {
		if err := tg.note(log, "registering", net.ErrClosed); err == nil || !strings.Contains(err.Error(), "ns:1") {
			t.Fatalf("note: %v", err)
		}
	}
	if n := strings.Count(buf.String(), "registration failed"); n != 1 {
		t.Fatalf("%d failure lines for 5 failures in a row:\n%s", n, buf.String())
	}
	tg.note(log, "registering", nil)
	tg.note(log, "registering", nil)
	if n := strings.Count(buf.String(), "reachable again"); n != 1 {
		t.Fatalf("%d recovery lines:\n%s", n, buf.String())
	}
	tg.note(log, "registering", net.ErrClosed)
	if n := strings.Count(buf.String(), "registration failed"); n != 2 {
		t.Fatalf("a new failure after recovery not logged:\n%s", buf.String())
	}
}
