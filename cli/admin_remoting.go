package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/host/acl"
	"github.com/keelmq/keel/host/remoting"
)

// secretKeyEnv holds the secret key of the account --access-key names (a
// secret on the command line would show in ps and shell history).
const secretKeyEnv = "KEEL_SECRET_KEY"

const adminRemotingHelp = `usage:
  keel admin topic (create|update) --broker ADDR --topic T [--read-queues N] [--write-queues N] [--perm P] [--order]
  keel admin topic delete --broker ADDR --topic T
  keel admin topic list   --broker ADDR
  keel admin topic status --broker ADDR --topic T
  keel admin group create --broker ADDR --group G [--retry-max N] [--from-min]
  keel admin group delete --broker ADDR --group G [--clean-offsets]
  keel admin group list   --broker ADDR
  keel admin topic consumers --broker ADDR (--topic T | T)
  keel admin consumer progress --broker ADDR --group G [--topic T]
  keel admin consumer reset --broker ADDR --group G --topic T --time (RFC3339|unix-ms|-1) [--force=false]
  keel admin cluster list --namesrv ADDR

Every one also takes --access-key AK, with the secret key in the
environment variable KEEL_SECRET_KEY, to sign its requests for a broker
with access control (a keel profile's [acl], or RocketMQ's ACL 1.0).

These speak RocketMQ's remoting protocol to a broker (any keel node, or a
RocketMQ broker) with the admin request codes. consumer reset moves the group's offsets to
the first message stored at or after the time (-1: the end); with
--force=false it only moves them back.
`

// adminRemoting is `keel admin (topic|group|consumer|cluster) ...`
// (adminRemotingHelp).
func (a *app) adminRemoting(noun string, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s", adminRemotingHelp)
	}
	verb := args[0]
	fs := flag.NewFlagSet("admin "+noun+" "+verb, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), adminRemotingHelp); fs.PrintDefaults() }
	broker := fs.String("broker", "", "broker `address` (host:port), required")
	topic := fs.String("topic", "", "topic")
	group := fs.String("group", "", "consumer group")
	readQ := fs.Int("read-queues", 8, "read queue count")
	writeQ := fs.Int("write-queues", 8, "write queue count")
	perm := fs.Int("perm", int(meta.PermRead|meta.PermWrite), "permission bits: 4 read, 2 write")
	order := fs.Bool("order", false, "ordered topic")
	retryMax := fs.Int("retry-max", meta.DefaultRetryMaxTimes, "redeliveries before the dead-letter queue")
	fromMin := fs.Bool("from-min", false, "a new consumer starts from the queue's minimum offset")
	clean := fs.Bool("clean-offsets", false, "also delete the group's consumer offsets")
	at := fs.String("time", "", "reset time: RFC3339, Unix milliseconds, or -1 for the end of each queue")
	force := fs.Bool("force", true, "let a reset move offsets forward too")
	namesrv := fs.String("namesrv", "", "name server `address` (host:port), required by cluster list")
	accessKey := fs.String("access-key", "", "sign requests as this ACL account (secret key: $"+secretKeyEnv+")")
	rest := args[1:]
	if noun == "topic" && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		*topic, rest = rest[0], rest[1:] // keel admin topic VERB T [flags]
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if noun == "cluster" {
		if *namesrv == "" {
			return fmt.Errorf("keel admin %s %s: --namesrv is required", noun, verb)
		}
		broker = namesrv
	} else if *broker == "" {
		return fmt.Errorf("keel admin %s %s: --broker is required", noun, verb)
	}
	need := func(name, v string) error {
		if v == "" {
			return fmt.Errorf("keel admin %s %s: --%s is required", noun, verb, name)
		}
		return nil
	}
	secret := os.Getenv(secretKeyEnv)
	if *accessKey != "" && secret == "" {
		return fmt.Errorf("keel admin %s %s: --access-key needs the account's secret key in $%s", noun, verb, secretKeyEnv)
	}
	call := func(code int16, ext map[string]string, body []byte) (*remoting.Command, error) {
		cmd := &remoting.Command{Code: code, ExtFields: remoting.FieldsOf(ext), Body: body}
		if *accessKey != "" {
			cmd.SetExt(acl.FieldAccessKey, *accessKey)
			cmd.SetExt(acl.FieldSignature, acl.Sign(cmd, secret, true))
		}
		resp, err := remoting.Call(context.Background(), *broker, cmd)
		if err != nil {
			return nil, err
		}
		if resp.Code != remoting.Success {
			return nil, fmt.Errorf("keel admin %s %s: %s answered code %d: %s", noun, verb, *broker, resp.Code, resp.Remark)
		}
		return resp, nil
	}
	switch noun + " " + verb {
	case "topic create", "topic update":
		if err := need("topic", *topic); err != nil {
			return err
		}
		_, err := call(remoting.CodeUpdateAndCreateTopic, map[string]string{
			"topic": *topic, "defaultTopic": remoting.AutoCreateTopicKey,
			"readQueueNums": strconv.Itoa(*readQ), "writeQueueNums": strconv.Itoa(*writeQ), "perm": strconv.Itoa(*perm),
			"topicFilterType": meta.FilterSingleTag, "topicSysFlag": "0", "order": strconv.FormatBool(*order),
		}, nil)
		return err
	case "topic delete":
		if err := need("topic", *topic); err != nil {
			return err
		}
		_, err := call(remoting.CodeDeleteTopicInBroker, map[string]string{"topic": *topic}, nil)
		return err
	case "topic list":
		resp, err := call(remoting.CodeGetAllTopicConfig, nil, nil)
		if err != nil {
			return err
		}
		var s meta.TopicsSnapshot
		if err := json.Unmarshal(resp.Body, &s); err != nil {
			return fmt.Errorf("keel admin topic list: decoding the topic table: %w", err)
		}
		return printTopics(a.stdout, s)
	case "topic status":
		if err := need("topic", *topic); err != nil {
			return err
		}
		resp, err := call(remoting.CodeGetTopicStatsInfo, map[string]string{"topic": *topic}, nil)
		if err != nil {
			return err
		}
		stats, err := remoting.DecodeTopicStats(resp.Body)
		if err != nil {
			return fmt.Errorf("keel admin topic status: %w", err)
		}
		return printTopicStats(a.stdout, stats)
	case "group create":
		if err := need("group", *group); err != nil {
			return err
		}
		c := meta.DefaultSubscriptionGroup(*group)
		c.RetryMaxTimes, c.ConsumeFromMinEnable = int32(*retryMax), *fromMin
		body, err := json.Marshal(c)
		if err != nil {
			return fmt.Errorf("keel admin group create: %w", err)
		}
		_, err = call(remoting.CodeUpdateAndCreateSubscriptionGroup, nil, body)
		return err
	case "group delete":
		if err := need("group", *group); err != nil {
			return err
		}
		_, err := call(remoting.CodeDeleteSubscriptionGroup, map[string]string{"groupName": *group, "cleanOffset": strconv.FormatBool(*clean)}, nil)
		return err
	case "group list":
		resp, err := call(remoting.CodeGetAllSubscriptionGroupConfig, nil, nil)
		if err != nil {
			return err
		}
		var s meta.SubscriptionGroupsSnapshot
		if err := json.Unmarshal(resp.Body, &s); err != nil {
			return fmt.Errorf("keel admin group list: decoding the group table: %w", err)
		}
		return printGroups(a.stdout, s)
	case "consumer progress":
		if err := need("group", *group); err != nil {
			return err
		}
		ext := map[string]string{"consumerGroup": *group}
		if *topic != "" {
			ext["topic"] = *topic
		}
		resp, err := call(remoting.CodeGetConsumeStats, ext, nil)
		if err != nil {
			return err
		}
		stats, err := remoting.DecodeConsumeStats(resp.Body)
		if err != nil {
			return fmt.Errorf("keel admin consumer progress: %w", err)
		}
		if len(stats) == 0 {
			// As mqadmin's examineConsumeStats: an empty table is not
			// "no lag" but no group (or one that never committed).
			return fmt.Errorf("keel admin consumer progress: %s has no consumer offsets for group %q: no such group here, or it has not consumed (committed) anything yet", *broker, *group)
		}
		return printConsumeStats(a.stdout, stats)
	case "consumer reset":
		for _, f := range [][2]string{{"group", *group}, {"topic", *topic}, {"time", *at}} {
			if err := need(f[0], f[1]); err != nil {
				return err
			}
		}
		ms, err := parseResetTime(*at)
		if err != nil {
			return fmt.Errorf("keel admin consumer reset: %w", err)
		}
		resp, err := call(remoting.CodeInvokeBrokerToResetOffset, map[string]string{
			"topic": *topic, "group": *group, "timestamp": strconv.FormatInt(ms, 10), "isForce": strconv.FormatBool(*force),
		}, nil)
		if err != nil {
			return err
		}
		table, err := remoting.DecodeResetOffsetBody(resp.Body)
		if err != nil {
			return fmt.Errorf("keel admin consumer reset: %w", err)
		}
		return printResetOffsets(a.stdout, table)
	case "topic consumers":
		if err := need("topic", *topic); err != nil {
			return err
		}
		resp, err := call(remoting.CodeQueryTopicConsumeByWho, map[string]string{"topic": *topic}, nil)
		if err != nil {
			return err
		}
		var gl remoting.GroupList
		if err := json.Unmarshal(resp.Body, &gl); err != nil {
			return fmt.Errorf("keel admin topic consumers: decoding the group list: %w", err)
		}
		return printLines(a.stdout, "GROUP", gl.GroupList)
	case "cluster list":
		resp, err := call(remoting.CodeGetBrokerClusterInfo, nil, nil)
		if err != nil {
			return err
		}
		ci, err := remoting.DecodeClusterInfo(resp.Body)
		if err != nil {
			return fmt.Errorf("keel admin cluster list: %w", err)
		}
		return printCluster(a.stdout, ci)
	}
	return fmt.Errorf("unknown command keel admin %s %s\n%s", noun, verb, adminRemotingHelp)
}

func printTopics(w io.Writer, s meta.TopicsSnapshot) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tREAD\tWRITE\tPERM\tORDER")
	for _, t := range sortedTopics(s) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%v\n", t.TopicName, t.ReadQueueNums, t.WriteQueueNums, t.Perm, t.Order)
	}
	return tw.Flush()
}

func sortedTopics(s meta.TopicsSnapshot) []meta.TopicConfig {
	out := make([]meta.TopicConfig, 0, len(s.Topics))
	for _, t := range s.Topics {
		out = append(out, t)
	}
	sortBy(out, func(t meta.TopicConfig) string { return t.TopicName })
	return out
}

func printGroups(w io.Writer, s meta.SubscriptionGroupsSnapshot) error {
	out := make([]meta.SubscriptionGroupConfig, 0, len(s.Groups))
	for _, g := range s.Groups {
		out = append(out, g)
	}
	sortBy(out, func(g meta.SubscriptionGroupConfig) string { return g.GroupName })
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCONSUME\tBROADCAST\tFROM_MIN\tRETRY_MAX")
	for _, g := range out {
		fmt.Fprintf(tw, "%s\t%v\t%v\t%v\t%d\n", g.GroupName, g.ConsumeEnable, g.ConsumeBroadcastEnable, g.ConsumeFromMinEnable, g.RetryMaxTimes)
	}
	return tw.Flush()
}

func printTopicStats(w io.Writer, stats []remoting.TopicQueueStats) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tBROKER\tQUEUE\tMIN\tMAX\tLAST_STORED_MS")
	for _, s := range stats {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\n", s.Queue.Topic, s.Queue.BrokerName, s.Queue.QueueID, s.MinOffset, s.MaxOffset, s.LastUpdateTimestamp)
	}
	return tw.Flush()
}

func printConsumeStats(w io.Writer, stats []remoting.ConsumeQueueStats) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tBROKER\tQUEUE\tBROKER_OFFSET\tCONSUMER_OFFSET\tLAG\tLAST_CONSUMED_MS")
	var total int64
	for _, s := range stats {
		total += s.Lag()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", s.Queue.Topic, s.Queue.BrokerName, s.Queue.QueueID, s.BrokerOffset, s.ConsumerOffset, s.Lag(), s.LastTimestamp)
	}
	fmt.Fprintf(tw, "TOTAL LAG\t\t\t\t\t%d\t\n", total)
	return tw.Flush()
}

// sortBy sorts s by the key of each element.
func sortBy[T any](s []T, key func(T) string) {
	slices.SortFunc(s, func(a, b T) int { return strings.Compare(key(a), key(b)) })
}
