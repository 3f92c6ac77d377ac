package failover

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/remoting"
)

// clientTimeout bounds the wait for one response: rocketmq-client-go's
// default send timeout. It matters when the master hangs (crash "pause"):
// a killed master's connections close at once.
const clientTimeout = 3 * time.Second

// rconn is one remoting connection with one request in flight at a time.
type rconn struct {
	addr   string
	nc     net.Conn
	br     *bufio.Reader
	opaque int32
}

func dialRemoting(ctx context.Context, addr string) (*rconn, error) {
	d := net.Dialer{Timeout: time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &rconn{addr: addr, nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}, nil
}

func (c *rconn) close() { c.nc.Close() }

// call sends cmd and returns its response, within timeout.
func (c *rconn) call(cmd *remoting.Command, timeout time.Duration) (*remoting.Command, error) {
	c.opaque++
	cmd.Opaque, cmd.Flag, cmd.Language, cmd.Version = c.opaque, 0, "GO", remoting.ServerVersion
	c.nc.SetDeadline(time.Now().Add(timeout))
	if _, err := c.nc.Write(cmd.AppendFrame(nil)); err != nil {
		return nil, fmt.Errorf("send code %d to %s: %w", cmd.Code, c.addr, err)
	}
	for {
		resp, err := remoting.ReadCommand(c.br, remoting.DefaultMaxFrame)
		if err != nil {
			return nil, fmt.Errorf("read the answer to code %d from %s: %w", cmd.Code, c.addr, err)
		}
		if resp.IsResponse() && resp.Opaque == cmd.Opaque {
			return resp, nil
		}
	}
}

// route is what the name server says about the topic's one group.
type route struct {
	master string // broker id 0; "" when the route lists none
	slave  string // the lowest other id; "" when none
}

// lookupRoute asks the name server at nsrv for topic's route.
func lookupRoute(ctx context.Context, nsrv, topic string) (route, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cmd := &remoting.Command{Code: remoting.CodeGetRouteInfoByTopic}
	cmd.SetExt("topic", topic)
	resp, err := remoting.Call(ctx, nsrv, cmd)
	if err != nil {
		return route{}, err
	}
	if resp.Code != remoting.Success {
		return route{}, fmt.Errorf("route of %s: code %d: %s", topic, resp.Code, resp.Remark)
	}
	r, err := decodeRoute(resp.Body)
	if err != nil {
		return route{}, fmt.Errorf("route of %s: %w", topic, err)
	}
	return r, nil
}

// decodeRoute reads a GET_ROUTEINFO_BY_TOPIC body: the master is broker
// id 0 of any group, the slave the lowest other id.
func decodeRoute(b []byte) (route, error) {
	var body struct {
		BrokerDatas []struct {
			BrokerAddrs map[string]string `json:"brokerAddrs"`
		} `json:"brokerDatas"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return route{}, fmt.Errorf("decode: %w", err)
	}
	var r route
	best := int64(-1)
	for _, bd := range body.BrokerDatas {
		for id, a := range bd.BrokerAddrs {
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil || n < 0 {
				return route{}, fmt.Errorf("broker id %q: not a broker id", id)
			}
			if n == 0 {
				r.master = a
			} else if best < 0 || n < best {
				best, r.slave = n, a
			}
		}
	}
	return r, nil
}

// router caches the topic's route and refreshes it at most every
// refreshEvery, for all producers and consumers together.
type router struct {
	nsrv, topic string

	mu   sync.Mutex
	r    route
	last time.Time
}

const refreshEvery = 50 * time.Millisecond

// get returns the cached route.
func (rt *router) get() route {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.r
}

// refresh asks the name server again unless another caller did within
// refreshEvery, and returns the route.
func (rt *router) refresh(ctx context.Context) route {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if time.Since(rt.last) < refreshEvery {
		return rt.r
	}
	rt.last = time.Now()
	if r, err := lookupRoute(ctx, rt.nsrv, rt.topic); err == nil {
		rt.r = r
	}
	return rt.r
}

// sendCommand is a SEND_MESSAGE request with the fields rocketmq-client-go
// sends, carrying message id in KEYS (16 hex digits) and in UNIQ_KEY.
func sendCommand(topic string, queue int, id uint64, body []byte) *remoting.Command {
	cmd := &remoting.Command{Code: remoting.CodeSendMessage, Body: body}
	props := fmt.Sprintf("KEYS\x01%016X\x02UNIQ_KEY\x01%016X%016X\x02WAIT\x01true\x02", id, runNonce, id)
	for k, v := range map[string]string{"producerGroup": "bench_failover", "topic": topic, "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "queueId": strconv.Itoa(queue), "sysFlag": "0", "flag": "0", "reconsumeTimes": "0",
		"unitMode": "false", "maxReconsumeTimes": "16", "batch": "false", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"properties": props} {
		cmd.SetExt(k, v)
	}
	return cmd
}

// runNonce makes UNIQ_KEYs differ between runs of one process.
var runNonce = uint64(time.Now().UnixNano())

// pulled is one message a pull returned.
type pulled struct {
	id   uint64 // its KEYS value; ok false when it had none we wrote
	ok   bool
	born int64 // milliseconds
}

// errNoMessages: the queue has nothing at the offset (PULL_NOT_FOUND).
var errNoMessages = errors.New("no new message")

// pull reads up to max messages of topic's queue q from offset off and
// returns them and the next offset.
func pull(c *rconn, topic string, q int, off int64, max int) ([]pulled, int64, error) {
	cmd := &remoting.Command{Code: remoting.CodePullMessage}
	for k, v := range map[string]string{"consumerGroup": "bench_failover_consumer", "topic": topic, "queueId": strconv.Itoa(q),
		"queueOffset": strconv.FormatInt(off, 10), "maxMsgNums": strconv.Itoa(max), "sysFlag": "0", "commitOffset": "0",
		"suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0", "expressionType": "TAG"} {
		cmd.SetExt(k, v)
	}
	resp, err := c.call(cmd, clientTimeout)
	if err != nil {
		return nil, off, err
	}
	next := off
	if s := resp.Ext("nextBeginOffset"); s != "" {
		if next, err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, off, fmt.Errorf("pull %s/%d: nextBeginOffset %q: %w", topic, q, s, err)
		}
	}
	switch resp.Code {
	case remoting.Success:
	case remoting.PullNotFound, remoting.PullRetryImmediately:
		return nil, next, errNoMessages
	case remoting.PullOffsetMoved:
		return nil, next, nil
	default:
		return nil, off, fmt.Errorf("pull %s/%d at %d from %s: code %d: %s", topic, q, off, c.addr, resp.Code, resp.Remark)
	}
	out, err := decodePulled(resp.Body)
	if err != nil {
		return nil, off, fmt.Errorf("pull %s/%d at %d from %s: %w", topic, q, off, c.addr, err)
	}
	return out, next, nil
}

// decodePulled decodes a FOUND pull body: stored records back to back.
func decodePulled(b []byte) ([]pulled, error) {
	var out []pulled
	for len(b) > 0 {
		r, err := record.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("decode message %d of the pull body: %w", len(out), err)
		}
		if r.TotalSize <= 0 || int(r.TotalSize) > len(b) {
			return nil, fmt.Errorf("decode message %d of the pull body: size %d of %d bytes left", len(out), r.TotalSize, len(b))
		}
		id, ok := keysID(r.Properties)
		out = append(out, pulled{id: id, ok: ok, born: r.BornTimestamp})
		b = b[r.TotalSize:]
	}
	return out, nil
}

// keysID reads the 16-hex-digit KEYS property that sendCommand writes.
func keysID(props []byte) (uint64, bool) {
	for _, kv := range bytes.Split(props, []byte{2}) {
		k, v, ok := strings.Cut(string(kv), "\x01")
		if ok && k == "KEYS" && len(v) == 16 {
			id, err := strconv.ParseUint(v, 16, 64)
			return id, err == nil
		}
	}
	return 0, false
}
