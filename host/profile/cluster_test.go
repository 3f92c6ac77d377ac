package profile

import (
	"slices"
	"strings"
	"testing"

	"github.com/keelmq/keel/host/controller"
)

func TestClusterRoles(t *testing.T) {
	// A name server alone: no broker listeners are checked, so they may
	// collide with nothing; a controller alone likewise.
	p := mustLoad(t, "schema = 1\n[server]\nroles = [\"namesrv\"]\nbroker_addr = \"127.0.0.1:9876\"\n")
	if !p.HasRole(RoleNamesrv) || p.HasRole(RoleBroker) || p.ClusterMode() {
		t.Fatalf("roles %v: HasRole/ClusterMode wrong", p.Server.Roles)
	}
	p = mustLoad(t, `schema = 1
[server]
roles = ["namesrv", "controller"]
[controller]
node_id = "c1"
raft_addr = "127.0.0.1:9881"
peers = ["c1=127.0.0.1:9881", "c2=127.0.0.1:9882", "c3=127.0.0.1:9883"]
`)
	peers, err := ParsePeers(p.Controller.Peers)
	if err != nil || !slices.Equal(peers, []controller.Peer{{ID: "c1", Addr: "127.0.0.1:9881"}, {ID: "c2", Addr: "127.0.0.1:9882"}, {ID: "c3", Addr: "127.0.0.1:9883"}}) {
		t.Fatalf("peers %v, %v", peers, err)
	}
	p = mustLoad(t, `schema = 1
[server]
roles = ["broker"]
namesrv_addrs = ["127.0.0.1:9876", "127.0.0.1:9877"]
[replication]
plugin = "sync"
[controller]
addrs = ["127.0.0.1:9878"]
`)
	if !p.ClusterMode() {
		t.Fatal("a broker with controller.addrs is in cluster mode")
	}
}

func TestClusterErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown role", "[server]\nroles = [\"broker\", \"proxy\"]", `server.roles: unknown role "proxy"`},
		{"role twice", "[server]\nroles = [\"broker\", \"namesrv\", \"broker\"]", `role "broker" is listed twice`},
		{"no role", "[server]\nroles = []", "must name at least one"},
		{"broker alone needs name servers", "[server]\nroles = [\"broker\"]", "server.namesrv_addrs: a broker without its own name server"},
		{"bad name server address", "[server]\nnamesrv_addrs = [\"nowhere\"]", "server.namesrv_addrs"},
		{"register interval", "[server]\nregister_interval = \"2m\"", "server.register_interval: 2m is out of range"},
		{"cluster mode sets role", "[replication]\nplugin = \"sync\"\nrole = \"master\"\n[controller]\naddrs = [\"127.0.0.1:9878\"]", "replication.role: in cluster mode"},
		{"cluster mode needs replication", "[controller]\naddrs = [\"127.0.0.1:9878\"]", `cluster mode (controller.addrs is set) needs a replication plugin`},
		{"controller addrs without broker", "[server]\nroles = [\"namesrv\"]\n[controller]\naddrs = [\"127.0.0.1:9878\"]", "only a broker follows controllers"},
		{"peer not self", "[server]\nroles = [\"controller\"]\n[controller]\nnode_id = \"c9\"\npeers = [\"c1=127.0.0.1:9881\"]", `node_id "c9" is not among the peers`},
		{"peer address differs", "[server]\nroles = [\"controller\"]\n[controller]\nnode_id = \"c1\"\nraft_addr = \"127.0.0.1:9880\"\npeers = [\"c1=127.0.0.1:9881\"]", "peer c1 has address 127.0.0.1:9881, but controller.raft_addr is 127.0.0.1:9880"},
		{"peer syntax", "[server]\nroles = [\"controller\"]\n[controller]\npeers = [\"127.0.0.1:9881\"]", "want id=host:port"},
		{"peer repeated", "[server]\nroles = [\"controller\"]\n[controller]\nnode_id = \"c1\"\nraft_addr = \"127.0.0.1:9881\"\npeers = [\"c1=127.0.0.1:9881\", \"c1=127.0.0.1:9882\"]", "repeats the id"},
		{"controller listener collides", "[server]\nroles = [\"namesrv\", \"controller\"]\n[controller]\naddr = \"127.0.0.1:9876\"", "controller.addr: 127.0.0.1:9876 is already used by server.namesrv_addr"},
		{"slave_broker_addr is gone", "[server]\nslave_broker_addr = \"127.0.0.1:10921\"", "server.slave_broker_addr: is no longer used"},
		{"heartbeat timeout", "[server]\nroles = [\"controller\"]\n[controller]\nheartbeat_timeout = \"10ms\"", "controller.heartbeat_timeout: 10ms is too short"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadBytes("profiles/x.toml", []byte("schema = 1\n"+tc.doc+"\n"), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
