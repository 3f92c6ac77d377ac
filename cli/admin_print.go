package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// parseResetTime reads consumer reset's --time: -1 (the end of each
// queue), Unix milliseconds, or an RFC3339 time; it returns Unix
// milliseconds.
func parseResetTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < -1 {
			return 0, fmt.Errorf("--time %d: Unix milliseconds cannot be negative (-1 means the end)", ms)
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("--time %q is neither Unix milliseconds nor an RFC3339 time (2006-01-02T15:04:05Z07:00)", s)
	}
	return t.UnixMilli(), nil
}

func printResetOffsets(w io.Writer, table []remoting.QueueOffset) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tBROKER\tQUEUE\tOFFSET")
	for _, q := range table {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", q.Queue.Topic, q.Queue.BrokerName, q.Queue.QueueID, q.Offset)
	}
	return tw.Flush()
}

// printLines prints a header and one value per line.
func printLines(w io.Writer, header string, values []string) error {
	if _, err := fmt.Fprintln(w, header); err != nil {
		return err
	}
	for _, v := range values {
		if _, err := fmt.Fprintln(w, v); err != nil {
			return err
		}
	}
	return nil
}

// printCluster prints one line per broker address: cluster, broker name,
// broker id (0 the master) and address, sorted.
func printCluster(w io.Writer, ci remoting.ClusterInfo) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tBROKER\tID\tADDR")
	clusterOf := map[string]string{}
	for c, names := range ci.ClusterAddrTable {
		for _, n := range names {
			clusterOf[n] = c
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ci.BrokerAddrTable)) {
		b := ci.BrokerAddrTable[name]
		cluster := b.Cluster
		if cluster == "" {
			cluster = clusterOf[name]
		}
		for _, id := range slices.Sorted(maps.Keys(b.BrokerAddrs)) {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", cluster, name, id, b.BrokerAddrs[id])
		}
	}
	return tw.Flush()
}
