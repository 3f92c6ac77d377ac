package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/host/remoting"
)

// namesrvGroups returns the groups a name server's cluster info lists,
// sorted by cluster and broker name; a group whose entry names no
// cluster takes it from clusterAddrTable.
func namesrvGroups(ci remoting.ClusterInfo) []controller.GroupKey {
	clusterOf := map[string]string{}
	for c, names := range ci.ClusterAddrTable {
		for _, n := range names {
			clusterOf[n] = c
		}
	}
	var out []controller.GroupKey
	for name, b := range ci.BrokerAddrTable {
		c := b.Cluster
		if c == "" {
			c = clusterOf[name]
		}
		out = append(out, controller.GroupKey{Cluster: c, BrokerName: name})
	}
	slices.SortFunc(out, func(a, b controller.GroupKey) int {
		return strings.Compare(a.String(), b.String())
	})
	return out
}

// printClusterStatus prints the controller leader, then the groups.
func printClusterStatus(w io.Writer, r clusterStatusReport) error {
	leader := "none (election in progress?)"
	if r.Meta.LeaderID != "" {
		leader = r.Meta.LeaderID + " at " + orDash(r.Meta.LeaderAddr)
	}
	if _, err := fmt.Fprintf(w, "CONTROLLER LEADER: %s (peers: %s)\n\n", leader, orDash(r.Meta.Peers)); err != nil {
		return err
	}
	if len(r.Groups) == 0 {
		_, err := fmt.Fprintln(w, "no broker groups: give --namesrv or --group")
		return err
	}
	return printClusterGroups(w, r.Groups, r.Listed)
}

// printClusterGroups prints one line per group (master, epochs,
// SyncStateSet), a blank line, and one line per member (addresses, role,
// whether it is in the SyncStateSet and, with listed, as which id the
// name server lists it; addresses the name server lists that are no
// member follow as "not a member").
func printClusterGroups(w io.Writer, groups []clusterGroupStatus, listed *remoting.ClusterInfo) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tMASTER_ID\tMASTER_ADDR\tMASTER_EPOCH\tSYNC_STATE_SET\tSYNC_STATE_SET_EPOCH")
	for _, s := range groups {
		if !s.Known {
			fmt.Fprintf(tw, "%s\tunknown to the controller\t\t\t\t\n", groupName(s.Key))
			continue
		}
		g := s.Group
		master, addr := "none", "-"
		if m, ok := g.Master(); ok {
			master, addr = strconv.FormatInt(m.ID, 10), m.Addr
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\n", groupName(s.Key), master, addr, g.MasterEpoch, idList(g.SyncStateSet), g.SyncStateSetEpoch)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	head := "GROUP\tID\tADDR\tHA_ADDR\tROLE\tIN_SYNC"
	if listed != nil {
		head += "\tNAMESRV_ID"
	}
	fmt.Fprintln(tw, head)
	for _, s := range groups {
		name := s.Key.BrokerName
		members := map[string]bool{}
		for _, m := range s.Group.Members {
			members[m.Addr] = true
			role := "slave"
			if m.ID == s.Group.MasterID {
				role = "master"
			}
			line := fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s", groupName(s.Key), m.ID, m.Addr, orDash(m.HAAddr), role, yesNo(s.Group.InSyncStateSet(m.ID)))
			if listed != nil {
				line += "\t" + namesrvID(listed, name, m.Addr)
			}
			fmt.Fprintln(tw, line)
		}
		if listed == nil {
			continue
		}
		b := listed.BrokerAddrTable[name]
		for _, id := range slices.Sorted(maps.Keys(b.BrokerAddrs)) {
			if a := b.BrokerAddrs[id]; !members[a] {
				fmt.Fprintf(tw, "%s\t-\t%s\t-\tnot a member\t-\t%d\n", groupName(s.Key), a, id)
			}
		}
	}
	return tw.Flush()
}

// groupName is CLUSTER/NAME, or NAME when the cluster is not known.
func groupName(k controller.GroupKey) string {
	if k.Cluster == "" {
		return k.BrokerName
	}
	return k.String()
}

func idList(ids []int64) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
