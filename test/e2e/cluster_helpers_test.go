package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/host/remoting"
)

// This file holds the cluster-mode tests' helpers: a cluster of keel
// processes started from the shipped profiles in configs/profiles/cluster
// (three name servers with raft controllers, broker groups of two) with
// every listener moved to a 127.0.0.1 port the test picked, and a view of
// the controllers' state through controller.Client.

// clusterName is the cluster the shipped profiles' brokers join (the
// default of server.cluster).
const clusterName = "DefaultCluster"

// freeAddrs returns n distinct 127.0.0.1 addresses nothing listens on now
// (all held open until every one is picked, so none repeats).
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("picking a free port: %v", err)
		}
		ls = append(ls, l)
		out[i] = l.Addr().String()
	}
	return out
}

// clusterNode is one keel process of a test cluster. Its keelProc gives
// kill, stop and the /status helpers; launch and waitReady replace
// keelProc.start, which expects the all-in-one node's listeners.
type clusterNode struct {
	*keelProc
	name    string   // e.g. "controller-2", "broker-a-1"
	profile string   // file under configs/profiles/cluster
	sets    []string // --set overrides: every address, plus the test's
	roles   []string // listeners to wait for ("listening role=...")

	// Addresses (all fixed at creation: restarts keep them).
	NamesrvAddr, CtlAddr, RaftAddr string // controller nodes
	HA                             string // brokers
	Group                          string // brokers: broker_name

	listening chan string // roles from "listening" lines of the current run
}

// newClusterNode prepares (does not start) a node; data "" is a new temp
// dir.
func newClusterNode(t *testing.T, name, profile, data string, roles []string, sets []string) *clusterNode {
	if data == "" {
		data = t.TempDir()
	}
	k := &keelProc{t: t, cfg: keelConfig{profile: filepath.Join("cluster", profile), data: data}, log: &keelLog{}}
	n := &clusterNode{keelProc: k, name: name, profile: profile, sets: sets, roles: roles}
	t.Cleanup(func() {
		k.stopQuietly()
		if t.Failed() {
			t.Logf("%s stderr (last 150 lines, all runs):\n%s", name, strings.Join(k.log.tail(150), "\n"))
		}
	})
	return n
}

// launch starts the process (run k.run+1) without waiting for it.
func (n *clusterNode) launch() {
	t := n.t
	t.Helper()
	if n.cmd != nil {
		select {
		case <-n.done:
		default:
			t.Fatalf("launch %s: still running (run %d)", n.name, n.run)
		}
	}
	n.run++
	args := []string{"serve",
		"--profile", filepath.Join(repoRoot, "configs", "profiles", n.cfg.profile),
		"--data", n.cfg.data,
		// Not about disk pressure (as startKeel).
		"--set", "store.disk_max_used_ratio=0.97",
		"--set", "store.disk_clean_forcibly_ratio=0.98",
		"--set", "store.disk_warning_ratio=0.99",
	}
	for _, s := range n.sets {
		args = append(args, "--set", s)
	}
	cmd := exec.Command(keelBin, args...)
	cmd.Dir = n.cfg.data
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatalf("%s: stderr pipe: %v", n.name, err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", n.name, err)
	}
	n.cmd, n.done, n.err = cmd, make(chan struct{}), nil
	n.listening = make(chan string, 8)
	run, listening, done := n.run, n.listening, n.done
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			n.log.add(fmt.Sprintf("[run %d] %s", run, line))
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				select {
				case listening <- m[1]:
				default:
				}
			}
		}
		n.err = cmd.Wait()
		close(done)
	}()
}

// waitReady waits until the current run logged a listener for each of
// n.roles (a broker does so once the controller named its group's master
// and it joined in that role).
func (n *clusterNode) waitReady(d time.Duration) {
	t := n.t
	t.Helper()
	missing := slices.Clone(n.roles)
	deadline := time.After(d)
	for len(missing) > 0 {
		select {
		case r := <-n.listening:
			missing = slices.DeleteFunc(missing, func(s string) bool { return s == r })
		case <-n.done:
			t.Fatalf("%s (run %d) exited before listening: %v\n%s", n.name, n.run, n.err, strings.Join(n.log.tail(40), "\n"))
		case <-deadline:
			t.Fatalf("%s (run %d): no listener for %v within %v\n%s", n.name, n.run, missing, d, strings.Join(n.log.tail(40), "\n"))
		}
	}
}

// start is launch and waitReady.
func (n *clusterNode) start() {
	n.t.Helper()
	n.launch()
	n.waitReady(30 * time.Second)
}

// running reports whether the process runs.
func (n *clusterNode) running() bool {
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// testCluster is three name servers with controllers and broker groups of
// two brokers each, on ports the test picked.
type testCluster struct {
	t       *testing.T
	ctls    []*clusterNode
	groups  map[string][]*clusterNode // broker_name -> its two brokers
	nsAddrs []string                  // the name servers
	ctlAddr []string                  // the controllers' remoting addresses
	client  *controller.Client
}

// brokerTuning are the overrides every test broker gets: smaller segments
// (the tests write a few MiB), and a slave that reconnects quickly after a
// failover (the shipped 5 s backoff maximum would add to every round).
var brokerTuning = []string{"store.segment_size=64MiB", "replication.config.reconnect_backoff_max=500ms"}

// startCluster starts three name server + controller processes and then,
// for each group name ("broker-a", "broker-b"), its first broker (which
// the controller makes master) and its second. ctlSets are extra
// overrides of the controllers (e.g. a shorter heartbeat timeout);
// brokerSets(c, group, i) returns extra overrides of broker i (1 or 2),
// called once the controllers run.
func startCluster(t *testing.T, groups []string, ctlSets []string, brokerSets func(c *testCluster, group string, i int) []string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, groups: map[string][]*clusterNode{}}
	addrs := freeAddrs(t, 3*4+len(groups)*2*3)
	take := func() string { a := addrs[0]; addrs = addrs[1:]; return a }
	var peers []string
	for i := 1; i <= 3; i++ {
		n := &clusterNode{NamesrvAddr: take(), CtlAddr: take(), RaftAddr: take()}
		admin := take()
		peers = append(peers, fmt.Sprintf("c%d=%s", i, n.RaftAddr))
		c.nsAddrs = append(c.nsAddrs, n.NamesrvAddr)
		c.ctlAddr = append(c.ctlAddr, n.CtlAddr)
		cn := newClusterNode(t, fmt.Sprintf("controller-%d", i), fmt.Sprintf("controller-%d.toml", i), "",
			[]string{"namesrv", "controller", "admin"}, nil)
		cn.NamesrvAddr, cn.CtlAddr, cn.RaftAddr, cn.Admin = n.NamesrvAddr, n.CtlAddr, n.RaftAddr, admin
		c.ctls = append(c.ctls, cn)
	}
	for _, cn := range c.ctls {
		cn.sets = append([]string{"server.namesrv_addr=" + cn.NamesrvAddr, "controller.addr=" + cn.CtlAddr,
			"controller.raft_addr=" + cn.RaftAddr, "controller.peers=" + tomlList(peers), "admin.addr=" + cn.Admin}, ctlSets...)
		cn.launch() // all three at once: raft needs a quorum
	}
	for _, cn := range c.ctls {
		cn.waitReady(30 * time.Second)
	}
	client, err := controller.NewClient(c.ctlAddr, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c.client = client
	for _, g := range groups {
		for i := 1; i <= 2; i++ {
			b := newClusterNode(t, fmt.Sprintf("%s-%d", g, i), fmt.Sprintf("%s-%d.toml", g, i), "",
				[]string{"broker", "admin"}, nil)
			b.Broker, b.HA, b.Admin, b.Group = take(), take(), take(), g
			b.sets = []string{"server.broker_addr=" + b.Broker, "server.ha_addr=" + b.HA, "admin.addr=" + b.Admin,
				"server.namesrv_addrs=" + tomlList(c.nsAddrs), "controller.addrs=" + tomlList(c.ctlAddr)}
			b.sets = append(append(b.sets, brokerTuning...), brokerSets(c, g, i)...)
			c.groups[g] = append(c.groups[g], b)
		}
	}
	// The first broker of each group first, so that it is the master.
	for i := 0; i < 2; i++ {
		for _, g := range groups {
			c.groups[g][i].launch()
		}
		for _, g := range groups {
			c.groups[g][i].waitReady(30 * time.Second)
		}
	}
	for _, g := range groups {
		m := c.groups[g][0]
		m.waitStatus(20*time.Second, g+": the first broker master with its slave in sync", func(s *replStatus) bool {
			return s.Role == "master" && s.Writable == "yes" && s.Replication.InSync >= 1
		})
		c.waitGroup(g, "both brokers in the SyncStateSet", 20*time.Second, func(gr controller.Group) bool {
			return len(gr.SyncStateSet) == 2
		})
	}
	return c
}

// noSets is a brokerSets that adds nothing.
func noSets(*testCluster, string, int) []string { return nil }

// tomlList renders ss as a TOML array of strings for --set.
func tomlList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ",") + "]"
}

// group asks the controller leader for a group's state.
func (c *testCluster) group(name string) (controller.Group, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return c.client.GetReplicaInfo(ctx, controller.GroupKey{Cluster: clusterName, BrokerName: name})
}

// waitGroup polls the group's state until cond holds, or fails the test.
func (c *testCluster) waitGroup(name, what string, d time.Duration, cond func(controller.Group) bool) controller.Group {
	c.t.Helper()
	var g controller.Group
	var err error
	if werr := waitFor(d, func() bool {
		g, err = c.group(name)
		return err == nil && cond(g)
	}); werr != nil {
		c.t.Fatalf("%s: waiting %v for %s: last state %+v (error %v)", name, d, what, g, err)
	}
	return g
}

// memberOf is the group member registered at the node's broker address
// with the highest id (a wiped node registers again as a new member).
func memberOf(g controller.Group, n *clusterNode) (controller.Member, bool) {
	var best controller.Member
	for _, m := range g.Members {
		if m.Addr == n.Broker && m.ID > best.ID {
			best = m
		}
	}
	return best, best.ID != 0
}

// masterOf returns the group's master as the controller names it and the
// other broker of the group.
func (c *testCluster) masterOf(name string) (master, other *clusterNode, g controller.Group) {
	c.t.Helper()
	g = c.waitGroup(name, "a master", 10*time.Second, func(g controller.Group) bool { return g.MasterID != 0 })
	m, _ := g.Master()
	for _, n := range c.groups[name] {
		if n.Broker == m.Addr {
			master = n
		} else {
			other = n
		}
	}
	if master == nil || other == nil {
		c.t.Fatalf("%s: master %+v is none of the test's brokers", name, m)
	}
	return master, other, g
}

// leader returns the controller node that leads raft now.
func (c *testCluster) leader() *clusterNode {
	c.t.Helper()
	var md controller.Metadata
	var err error
	if werr := waitFor(15*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		md, err = c.client.Metadata(ctx)
		return err == nil && md.LeaderAddr != ""
	}); werr != nil {
		c.t.Fatalf("no controller leader within 15s: %+v (%v)", md, err)
	}
	for _, n := range c.ctls {
		if n.CtlAddr == md.LeaderAddr || n.RaftAddr == md.LeaderAddr || n.name == "controller-"+strings.TrimPrefix(md.LeaderID, "c") {
			return n
		}
	}
	c.t.Fatalf("the controller leader %+v is none of the test's controllers", md)
	return nil
}

// newClusterProducer starts a producer that knows all name servers.
func newClusterProducer(t *testing.T, c *testCluster, instance string) sender {
	t.Helper()
	return newProducerOf(t, c.nsAddrs, instance)
}

// newProducerOf starts a producer of the name servers ns.
func newProducerOf(t *testing.T, ns []string, instance string) sender {
	t.Helper()
	p, err := producer.NewDefaultProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver(ns)),
		producer.WithGroupName("PG_"+instance),
		producer.WithInstanceName(instance),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(3*time.Second),
	)
	if err != nil {
		t.Fatalf("NewDefaultProducer: %v", err)
	}
	if err := p.Start(); err != nil {
		t.Fatalf("producer Start: %v", err)
	}
	o := &onceShutdown{sender: p, once: new(sync.Once)}
	t.Cleanup(func() { o.Shutdown() })
	return o
}

// startClusterConsumer starts a clustering push consumer of group on
// topic that knows all name servers.
func startClusterConsumer(t *testing.T, c *testCluster, group, topic string, d *deliveryLog) pushConsumer {
	t.Helper()
	return startConsumer(t, consumerConfig{namesrv: c.nsAddrs[0], group: group, instance: group, topic: topic,
		extra: []consumer.Option{consumer.WithNsResolver(primitive.NewPassthroughResolver(c.nsAddrs))}}, d.handler)
}

// createTopic creates topic with 4 queues on the master of each group and
// waits until every name server routes it to all of them.
func (c *testCluster) createTopic(topic string, groups ...string) {
	t := c.t
	t.Helper()
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver(c.nsAddrs)))
	if err != nil {
		t.Fatalf("NewAdmin: %v", err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, g := range groups {
		m, _, _ := c.masterOf(g)
		if err := adm.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(m.Broker),
			admin.WithReadQueueNums(wipedQueues), admin.WithWriteQueueNums(wipedQueues)); err != nil {
			t.Fatalf("CreateTopic %s on %s: %v", topic, m.name, err)
		}
	}
	for _, ns := range c.nsAddrs {
		var n int
		var err error
		if werr := waitFor(15*time.Second, func() bool {
			n, err = routeQueues(ns, topic)
			return err == nil && n == wipedQueues*len(groups)
		}); werr != nil {
			t.Fatalf("name server %s routes %s to %d write queues, want %d (%v)", ns, topic, n, wipedQueues*len(groups), err)
		}
	}
}

// topicRoute is the part of a GET_ROUTEINFO_BY_TOPIC answer the tests read.
type topicRoute struct {
	QueueDatas []struct {
		BrokerName     string `json:"brokerName"`
		WriteQueueNums int    `json:"writeQueueNums"`
	} `json:"queueDatas"`
	BrokerDatas []struct {
		BrokerName  string            `json:"brokerName"`
		BrokerAddrs map[string]string `json:"brokerAddrs"`
	} `json:"brokerDatas"`
}

// routeOf asks the name server at ns for topic's route. The client
// libraries cache routes, so the tests ask by hand.
func routeOf(ns, topic string) (*topicRoute, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := remoting.Call(ctx, ns, &remoting.Command{Code: remoting.CodeGetRouteInfoByTopic,
		ExtFields: remoting.FieldsOf(map[string]string{"topic": topic})})
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("route of %s from %s: code %d %s", topic, ns, resp.Code, resp.Remark)
	}
	var r topicRoute
	if err := json.Unmarshal(resp.Body, &r); err != nil {
		return nil, fmt.Errorf("route of %s from %s: %w", topic, ns, err)
	}
	return &r, nil
}

// routeQueues is the number of write queues of topic's route on ns.
func routeQueues(ns, topic string) (int, error) {
	r, err := routeOf(ns, topic)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, q := range r.QueueDatas {
		n += q.WriteQueueNums
	}
	return n, nil
}

// waitRouteMaster waits until every name server of ns routes topic's
// group to master (broker id 0). A client that looks the route up while
// a group has no master caches a route without its queues until its next
// route poll (30 s), so tests that start a producer after a failover
// wait for this first.
func waitRouteMaster(t *testing.T, ns []string, topic, group string, master *clusterNode) {
	t.Helper()
	for _, a := range ns {
		var last *topicRoute
		var err error
		if werr := waitFor(15*time.Second, func() bool {
			last, err = routeOf(a, topic)
			if err != nil {
				return false
			}
			for _, b := range last.BrokerDatas {
				if b.BrokerName == group && b.BrokerAddrs["0"] == master.Broker {
					return true
				}
			}
			return false
		}); werr != nil {
			t.Fatalf("name server %s does not route %s of %s to the master %s (%s) within 15s: %+v (%v)", a, group, topic, master.name, master.Broker, last, err)
		}
	}
}
