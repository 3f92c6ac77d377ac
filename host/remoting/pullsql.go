package remoting

import (
	"fmt"
	"strings"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/filter"
)

// sqlFilters compiles each distinct SQL92 expression once, for heartbeats
// and pulls alike (a compiled selector is immutable, so every broker of
// the process may share it).
var sqlFilters = filter.NewCache(filter.DefaultCacheSize)

// sqlSelector returns the compiled selector of sub, a subscription that is
// not TAG, or the response refusing the pull, with RocketMQ's codes and in
// RocketMQ's order:
//   - an expression type other than TAG and SQL92: SUBSCRIPTION_PARSE_FAILED;
//   - an expression that does not compile: SUBSCRIPTION_PARSE_FAILED when
//     the pull posted it (posted), FILTER_DATA_NOT_EXIST when it came with
//     a heartbeat;
//   - a heartbeat subscription older than the pull's subVersion:
//     FILTER_DATA_NOT_LATEST;
//   - SQL92 filtering not enabled: SYSTEM_ERROR.
//
// (RocketMQ matches everything when a posted SQL92 expression does not
// compile; keel refuses it.) Each remark names the group, topic and
// expression.
func sqlSelector(cmd *Command, group string, sub subscription, posted bool, pullSubVersion int64, enabled bool) (*filter.Selector, *Command) {
	if !strings.EqualFold(sub.ExpressionType, ExpressionSQL92) {
		return nil, NewResponse(cmd, SubscriptionParseFailed, fmt.Sprintf(
			"consumer group %s, topic %s: expression type %q is not supported (TAG or SQL92)", group, sub.Topic, sub.ExpressionType))
	}
	sel, _, err := sqlFilters.Compile(sub.SubString)
	switch {
	case err != nil && posted:
		return nil, NewResponse(cmd, SubscriptionParseFailed, fmt.Sprintf(
			"consumer group %s, topic %s: parsing the pull's subscription: %v", group, sub.Topic, err))
	case err != nil:
		return nil, NewResponse(cmd, FilterDataNotExist, fmt.Sprintf(
			"consumer group %s, topic %s: the consumer filter data does not exist: the heartbeat's subscription is wrong: %v", group, sub.Topic, err))
	case !posted && pullSubVersion > sub.SubVersion:
		return nil, NewResponse(cmd, FilterDataNotLatest, fmt.Sprintf(
			"consumer group %s, topic %s: the consumer filter data is not the latest (subVersion %d, the pull asks for %d); the next heartbeat brings it",
			group, sub.Topic, sub.SubVersion, pullSubVersion))
	case !enabled:
		return nil, NewResponse(cmd, SystemError, "The broker does not support consumer to filter message by SQL92")
	}
	return sel, nil
}

// checkClientSQL answers CHECK_CLIENT_CONFIG for sub, a subscription
// that is not TAG, as RocketMQ does: SYSTEM_ERROR when SQL92 filtering is
// not enabled, SUBSCRIPTION_PARSE_FAILED with the parse error when the
// type is not SQL92 or the expression does not compile, else SUCCESS.
func checkClientSQL(cmd *Command, group string, sub subscription, enabled bool) *Command {
	if !enabled {
		return NewResponse(cmd, SystemError, "The broker does not support consumer to filter message by "+sub.ExpressionType)
	}
	if !strings.EqualFold(sub.ExpressionType, ExpressionSQL92) {
		return NewResponse(cmd, SubscriptionParseFailed, fmt.Sprintf(
			"consumer group %s, topic %s: expression type %q is not supported (TAG or SQL92)", group, sub.Topic, sub.ExpressionType))
	}
	if _, _, err := sqlFilters.Compile(sub.SubString); err != nil {
		return NewResponse(cmd, SubscriptionParseFailed, fmt.Sprintf("consumer group %s, topic %s: %v", group, sub.Topic, err))
	}
	return NewResponse(cmd, Success, "")
}

// compileHeartbeatSQL compiles a heartbeat's SQL92 subscription ahead of
// its pulls and logs, once per distinct expression, one that does not
// compile: the heartbeat itself succeeds (as in RocketMQ), and every pull
// of the subscription is refused with FILTER_DATA_NOT_EXIST.
func (b *Broker) compileHeartbeatSQL(group string, sub subscription) {
	if !strings.EqualFold(sub.ExpressionType, ExpressionSQL92) {
		b.log.Warn("remoting: heartbeat subscription has an unsupported expression type; its pulls will be refused",
			"group", group, "topic", sub.Topic, "type", sub.ExpressionType)
		return
	}
	if _, hit, err := sqlFilters.Compile(sub.SubString); err != nil && !hit {
		b.log.Warn("remoting: heartbeat SQL92 subscription does not compile; its pulls will be refused",
			"group", group, "topic", sub.Topic, "err", err)
	}
}

// filterSQL drops from res the records whose properties sel does not
// match. NextOffset stays past everything read, so the consumer neither
// stalls nor reads a record twice; when nothing is left the status is
// core.NoMatchedMessage (PULL_RETRY_IMMEDIATELY), as in RocketMQ. res.Data
// is not modified: a filtered result has its own buffer. A record whose
// properties cannot be located is kept: the filter does not hide damage.
func filterSQL(res core.GetResult, sel *filter.Selector) core.GetResult {
	if res.Status != core.Found {
		return res
	}
	var ck record.Checker
	var out core.GetResult
	copying := false
	off := 0
	for i, n := range res.Sizes {
		rec := res.Data[off : off+int(n)]
		keep := matchRecord(&ck, sel, rec)
		if !keep && !copying {
			copying = true
			out = res
			out.Data = append([]byte(nil), res.Data[:off]...)
			out.Sizes = append([]int32(nil), res.Sizes[:i]...)
		}
		if keep && copying {
			out.Data = append(out.Data, rec...)
			out.Sizes = append(out.Sizes, n)
		}
		off += int(n)
	}
	if !copying {
		return res
	}
	if len(out.Sizes) == 0 {
		out.Status, out.Data, out.Sizes = core.NoMatchedMessage, nil, nil
	}
	return out
}

// matchRecord reports whether sel matches the stored record rec's
// properties (true when they cannot be located).
func matchRecord(ck *record.Checker, sel *filter.Selector, rec []byte) bool {
	_, info, err := ck.Check(rec, false)
	if err != nil || info.Blank {
		return true
	}
	return sel.Match(func(name string) (string, bool) { return record.GetProperty(info.Properties, name) })
}
