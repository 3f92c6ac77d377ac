package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/host/remoting"
)

// adminClusterHelp documents the controller half of `keel admin cluster`
// (list, the name server half, is adminRemoting's).
const adminClusterHelp = `usage:
  keel admin cluster list   --namesrv ADDR
  keel admin cluster status --controller ADDR[,ADDR...] [--namesrv ADDR] [--group [CLUSTER/]NAME[,...]] [--timeout D]
  keel admin cluster elect  --controller ADDR[,ADDR...] --group [CLUSTER/]NAME --broker-id N [--timeout D]

status asks the controllers (any of them; calls follow the leader) who
leads, then shows each broker group's master, master epoch, SyncStateSet
and members: the groups the name server's cluster info names (--namesrv),
and those given with --group. With --namesrv each member's row also says
as which broker id that name server lists it (0 the master, - not listed).
elect asks the controller leader to make broker N its group's master (a
designated election: N must be alive and, unless the controllers allow
unclean elections, in the SyncStateSet).
`

// adminClusterTimeout bounds each controller call, redirects included.
const adminClusterTimeout = 5 * time.Second

// adminCluster is `keel admin cluster (list|status|elect)`
// (adminClusterHelp); list goes to adminRemoting.
func (a *app) adminCluster(args []string) error {
	if len(args) == 0 {
		return errors.New(adminClusterHelp)
	}
	verb := args[0]
	switch verb {
	case "status", "elect":
	default:
		return a.adminRemoting("cluster", args)
	}
	fs := flag.NewFlagSet("admin cluster "+verb, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), adminClusterHelp); fs.PrintDefaults() }
	ctls := fs.String("controller", "", "controller remoting `addresses`, comma-separated, required")
	namesrv := fs.String("namesrv", "", "name server `address` whose cluster info names the groups (status)")
	groups := fs.String("group", "", "broker `groups`, [CLUSTER/]NAME, comma-separated (elect: exactly one)")
	brokerID := fs.Int64("broker-id", 0, "broker `id` to elect (elect)")
	timeout := fs.Duration("timeout", adminClusterTimeout, "bound of each controller call")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	fail := func(format string, v ...any) error {
		return fmt.Errorf("keel admin cluster %s: %s", verb, fmt.Sprintf(format, v...))
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	addrs := splitList(*ctls)
	if len(addrs) == 0 {
		return fail("--controller is required")
	}
	keys, err := parseGroupKeys(*groups)
	if err != nil {
		return fail("%v", err)
	}
	cl, err := controller.NewClient(addrs, *timeout)
	if err != nil {
		return fail("%v", err)
	}
	defer cl.Close()
	ctx := context.Background()
	if verb == "elect" {
		if len(keys) != 1 {
			return fail("--group names one group (got %d)", len(keys))
		}
		if *brokerID <= 0 {
			return fail("--broker-id N (a member's id, from 1) is required")
		}
		g, err := cl.ElectMaster(ctx, keys[0], *brokerID, true)
		if err != nil {
			return fail("%v", err)
		}
		return printClusterGroups(a.stdout, []clusterGroupStatus{{Key: g.GroupKey, Group: g, Known: true}}, nil)
	}
	if *brokerID != 0 {
		return fail("--broker-id is elect's")
	}
	st, err := clusterStatus(ctx, cl, *namesrv, keys)
	if err != nil {
		return fail("%v", err)
	}
	return printClusterStatus(a.stdout, st)
}

// clusterStatusReport is what `cluster status` prints.
type clusterStatusReport struct {
	Meta controller.Metadata
	// Groups in the order to print: the name server's (sorted), then
	// --group's not among them.
	Groups []clusterGroupStatus
	// Listed is the name server's cluster info, nil without --namesrv.
	Listed *remoting.ClusterInfo
}

// clusterGroupStatus is one group: the controller's state, or Known false
// when the controller has no such group (a name server lists it).
type clusterGroupStatus struct {
	Key   controller.GroupKey
	Group controller.Group
	Known bool
}

// clusterStatus asks the controllers who leads and each group's state.
// A group named with --group that the controller does not hold is an
// error; one only the name server lists is shown as unknown.
func clusterStatus(ctx context.Context, cl *controller.Client, namesrv string, keys []controller.GroupKey) (clusterStatusReport, error) {
	var r clusterStatusReport
	md, err := cl.Metadata(ctx)
	if err != nil {
		return r, err
	}
	r.Meta = md
	var listed []controller.GroupKey
	if namesrv != "" {
		ci, err := clusterInfoOf(ctx, namesrv)
		if err != nil {
			return r, err
		}
		r.Listed = &ci
		listed = namesrvGroups(ci)
	}
	seen := map[controller.GroupKey]bool{}
	for _, k := range listed {
		seen[k] = true
		g, err := cl.GetReplicaInfo(ctx, k)
		if errors.Is(err, controller.ErrInvalidRequest) {
			r.Groups = append(r.Groups, clusterGroupStatus{Key: k})
			continue
		}
		if err != nil {
			return r, err
		}
		r.Groups = append(r.Groups, clusterGroupStatus{Key: k, Group: g, Known: true})
	}
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		g, err := cl.GetReplicaInfo(ctx, k)
		if err != nil {
			return r, err
		}
		r.Groups = append(r.Groups, clusterGroupStatus{Key: k, Group: g, Known: true})
	}
	return r, nil
}

// clusterInfoOf asks the name server at addr for GET_BROKER_CLUSTER_INFO.
func clusterInfoOf(ctx context.Context, addr string) (remoting.ClusterInfo, error) {
	resp, err := remoting.Call(ctx, addr, &remoting.Command{Code: remoting.CodeGetBrokerClusterInfo})
	if err != nil {
		return remoting.ClusterInfo{}, fmt.Errorf("cluster info from name server %s: %w", addr, err)
	}
	if resp.Code != remoting.Success {
		return remoting.ClusterInfo{}, fmt.Errorf("cluster info from name server %s: answered code %d: %s", addr, resp.Code, resp.Remark)
	}
	ci, err := remoting.DecodeClusterInfo(resp.Body)
	if err != nil {
		return remoting.ClusterInfo{}, fmt.Errorf("cluster info from name server %s: %w", addr, err)
	}
	return ci, nil
}

// parseGroupKeys reads --group: comma-separated [CLUSTER/]NAME. A bare
// NAME leaves the cluster empty: the controller finds the group by
// broker name (and refuses a name two clusters share).
func parseGroupKeys(s string) ([]controller.GroupKey, error) {
	var out []controller.GroupKey
	for _, g := range splitList(s) {
		cluster, name, ok := strings.Cut(g, "/")
		if !ok {
			cluster, name = "", g
		}
		if name == "" || (ok && cluster == "") {
			return nil, fmt.Errorf("--group %q: want [CLUSTER/]NAME", g)
		}
		out = append(out, controller.GroupKey{Cluster: cluster, BrokerName: name})
	}
	return out, nil
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// namesrvID returns the broker id under which ci lists addr in group
// name, as text: "-" when it does not list it.
func namesrvID(ci *remoting.ClusterInfo, name, addr string) string {
	for id, a := range ci.BrokerAddrTable[name].BrokerAddrs {
		if a == addr {
			return strconv.FormatInt(id, 10)
		}
	}
	return "-"
}
