package host

import (
	"context"
	"time"

	"github.com/keelmq/keel/host/namesrv"
	"github.com/keelmq/keel/host/remoting"
)

// The node's side of the name servers: the one it runs (server.roles has
// namesrv) and the registrar that keeps its broker registered with that
// one and with server.namesrv_addrs.

// topicWatchInterval is how often the node looks for a changed topic
// table (created, updated, deleted, or replicated from the master) and
// registers again at once instead of waiting for register_interval.
const topicWatchInterval = 500 * time.Millisecond

// newNameServer builds the name server of a node with the namesrv role.
// With the broker role too, a route lookup that misses asks the broker to
// auto-create the topic (localCreator), as the single node always did.
func (n *Node) newNameServer() *namesrv.Server {
	cfg := namesrv.Config{Logger: n.log.With("component", "namesrv")}
	if n.prof.HasRole(roleBroker) {
		cfg.Creator = localCreator{n}
	}
	return namesrv.New(cfg)
}

// startRegistrar registers the broker with its name servers now, then
// keeps it registered; stopRegistrar unregisters it.
func (n *Node) startRegistrar() {
	p := n.prof
	n.registrar = namesrv.NewRegistrar(namesrv.RegistrarConfig{
		NameServers: p.Server.NamesrvAddrs,
		Local:       n.nsrv,
		Interval:    p.Server.RegisterInterval.D(),
		Logger:      n.log.With("component", "registrar"),
	}, backend{n})
	n.registrar.Start()
	stop := make(chan struct{})
	n.stopWatch = func() { close(stop) }
	go n.watchTopics(stop)
}

// watchTopics triggers a registration whenever the topic table's version
// changes, until stop closes.
func (n *Node) watchTopics(stop <-chan struct{}) {
	t := time.NewTicker(topicWatchInterval)
	defer t.Stop()
	last := n.store.Meta().Topics.Version()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		if v := n.store.Meta().Topics.Version(); !v.Equal(last) {
			last = v
			n.registrar.Trigger()
		}
	}
}

func (n *Node) stopRegistrar(ctx context.Context) {
	if n.registrar == nil {
		return
	}
	n.stopWatch()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := n.registrar.Stop(ctx); err != nil {
		n.log.Warn("unregistering from name servers", "err", err)
	}
}

// Registration implements namesrv.RegistrarSource: the broker as it is
// now (a promoted slave registers as the master, id 0).
func (b backend) Registration() namesrv.Registration {
	n, p := b.n, b.n.prof
	id := int64(p.Server.BrokerID)
	if n.cluster != nil {
		id = n.cluster.brokerID() // the controller's
	}
	if !n.slave.Load() {
		id = namesrv.MasterID
	} else if id == namesrv.MasterID {
		id = 1
	}
	snap := n.store.Meta().Topics.Snapshot()
	return namesrv.Registration{
		Cluster:      p.Server.Cluster,
		BrokerName:   p.Server.BrokerName,
		BrokerAddr:   n.advertised(),
		BrokerID:     id,
		HAServerAddr: n.haAddr(),
		Topics:       snap.Topics,
		DataVersion:  snap.DataVersion,
	}
}

// BrokerName implements remoting.BrokerNamer.
func (b backend) BrokerName() string { return b.n.prof.Server.BrokerName }

// localCreator is the name server's TopicCreator on a node that runs the
// broker too: the broker's auto-creation rule (remoting.EnsureTopic), then
// a registration with the local name server so the lookup finds it.
type localCreator struct{ n *Node }

func (c localCreator) EnsureTopic(name string) (bool, error) {
	n := c.n
	p := n.prof
	_, ok, created, err := remoting.EnsureTopic(backend{n}, name, p.Store.AutoCreateTopics, int32(p.Store.DefaultQueues))
	if err != nil || !ok {
		return false, err
	}
	// Registered now, also when the topic existed already (created by a
	// send since the last registration): the lookup that follows must
	// find it.
	if _, err := n.nsrv.RegisterBroker(backend{n}.Registration()); err != nil {
		return false, err
	}
	if created {
		n.registrar.Trigger()
	}
	return true, nil
}
