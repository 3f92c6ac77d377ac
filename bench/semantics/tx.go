package semantics

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/keelmq/keel/bench/hist"
	"github.com/keelmq/keel/bench/wire"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host"
	"github.com/keelmq/keel/host/remoting"
)

// TxSpec is one transactional or plain run of the transaction entry.
type TxSpec struct {
	// Node is the node's spec.
	Node wire.NodeSpec
	// Producers share Conns connections; each sends BodyBytes bodies to
	// queue p mod Queues of wire.DefaultTopic for Duration.
	Producers, Conns, BodyBytes, Queues int
	Duration                            time.Duration
	// Transactional: a half message then END_TRANSACTION commit per
	// transaction; otherwise one plain SEND_MESSAGE.
	Transactional bool
}

// txGroup is the producer group of the entry's half messages.
const txGroup = "bench_tx_producer"

// callTimeout bounds one request of the transaction entry.
const callTimeout = 10 * time.Second

// TxResult is one run: completed operations (committed transactions or
// stored plain messages) per second, their latency (ns), failures, and,
// for a transactional run, the committed messages found in the real
// queues afterwards.
type TxResult struct {
	Done       int64
	PerSec     float64
	Latency    hist.Histogram
	Errors     int64
	FirstError string
	Visible    int64
}

// RunTx starts a node, runs s and stops the node, removing s.Node.Dir.
func RunTx(ctx context.Context, s TxSpec) (res *TxResult, err error) {
	if s.Producers < 1 || s.Conns < 1 || s.BodyBytes < 1 || s.Queues < 1 || s.Duration <= 0 {
		return nil, fmt.Errorf("semantics: transaction run needs Producers, Conns, BodyBytes, Queues >= 1 and Duration > 0 (got %d, %d, %d, %d, %v)",
			s.Producers, s.Conns, s.BodyBytes, s.Queues, s.Duration)
	}
	err = wire.WithNode(ctx, s.Node, func(n *host.Node) error {
		r, err := runTx(ctx, s, n)
		res = r
		return err
	})
	return res, err
}

// runTx is RunTx on a started node.
func runTx(ctx context.Context, s TxSpec, n *host.Node) (res *TxResult, err error) {
	addr := n.Addr("broker")
	if err := wire.Prime(ctx, wire.LoadSpec{Addr: addr, Queues: s.Queues, Producers: 1, BodyBytes: 1, Duration: time.Second}); err != nil {
		return nil, err
	}
	conns := make([]*client, 0, s.Conns)
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	for range min(s.Conns, s.Producers) {
		c, err := dialClient(ctx, addr)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	runID := uint64(time.Now().UnixNano())
	type pstats struct {
		h     hist.Histogram
		done  int64
		errs  int64
		first string
	}
	ps := make([]pstats, s.Producers)
	start := time.Now()
	end := start.Add(s.Duration)
	var wg sync.WaitGroup
	for p := range s.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &ps[p]
			c := conns[p%len(conns)]
			body := wire.Body(p, s.BodyBytes)
			for seq := uint64(1); ctx.Err() == nil; seq++ {
				t0 := time.Now()
				if !t0.Before(end) {
					return
				}
				id := wire.MessageID(p, seq)
				var err error
				if s.Transactional {
					err = transact(c, p%s.Queues, body, runID, id, t0)
				} else {
					err = sendPlain(c, p%s.Queues, body, runID, id, t0)
				}
				if err != nil {
					st.errs++
					if st.first == "" {
						st.first = err.Error()
					}
					time.Sleep(time.Millisecond) // do not spin on a failing broker
					continue
				}
				st.h.Record(int64(time.Since(t0)))
				st.done++
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	res = &TxResult{}
	for i := range ps {
		res.Latency.Merge(&ps[i].h)
		res.Done += ps[i].done
		res.Errors += ps[i].errs
		if res.FirstError == "" {
			res.FirstError = ps[i].first
		}
	}
	if res.Done == 0 {
		return nil, fmt.Errorf("semantics: no %s completed: %s", kind(s.Transactional), res.FirstError)
	}
	res.PerSec = float64(res.Done) / elapsed.Seconds()
	if s.Transactional {
		st := n.Store()
		want := res.Done + 1 // the priming message
		deadline := time.Now().Add(10 * time.Second)
		for queued(st, wire.DefaultTopic, s.Queues) < want && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		res.Visible = queued(st, wire.DefaultTopic, s.Queues) - 1
	}
	return res, nil
}

func kind(tx bool) string {
	if tx {
		return "transaction"
	}
	return "plain send"
}

// sendRequest builds a SEND_MESSAGE (10) request with the header fields
// rocketmq-client-go sends, and the properties UNIQ_KEY and KEYS (id),
// WAIT=true, plus extra.
func sendRequest(queue int, body []byte, runID, id uint64, born time.Time, sysFlag int32, extra ...string) *remoting.Command {
	uniq := fmt.Sprintf("%016X%016X", runID, id)
	props := []byte(nil)
	for i := 0; i+1 < len(extra); i += 2 {
		props = record.SetProperty(props, extra[i], extra[i+1])
	}
	props = record.SetProperty(props, record.PropertyKeys, fmt.Sprintf("%016X", id))
	props = record.SetProperty(props, record.PropertyUniqKey, uniq)
	props = record.SetProperty(props, record.PropertyWaitStoreMsgOK, "true")
	cmd := &remoting.Command{Code: remoting.CodeSendMessage, Body: body}
	for _, kv := range [][2]string{{"producerGroup", txGroup}, {"topic", wire.DefaultTopic}, {"defaultTopic", "TBW102"},
		{"defaultTopicQueueNums", "4"}, {"queueId", strconv.Itoa(queue)}, {"sysFlag", strconv.Itoa(int(sysFlag))},
		{"bornTimestamp", strconv.FormatInt(born.UnixMilli(), 10)}, {"flag", "0"}, {"properties", string(props)},
		{"reconsumeTimes", "0"}, {"unitMode", "false"}, {"maxReconsumeTimes", "16"}, {"batch", "false"}, {"bname", "broker-a"}} {
		cmd.SetExt(kv[0], kv[1])
	}
	return cmd
}

// sendPlain sends one plain message and checks it was stored.
func sendPlain(c *client, queue int, body []byte, runID, id uint64, born time.Time) error {
	resp, err := c.call(sendRequest(queue, body, runID, id, born, 0), callTimeout)
	if err != nil {
		return err
	}
	if !wire.Stored(wire.StatusOf(resp.Code)) {
		return fmt.Errorf("send: response code %d: %s", resp.Code, resp.Remark)
	}
	return nil
}

// transact sends a half message and commits it with END_TRANSACTION (37)
// built from the reply as rocketmq-client-go builds it: commitLogOffset
// from the offset msgId, tranStateTableOffset = queueOffset, msgId =
// UNIQ_KEY, transactionId from the reply. The commit is awaited.
func transact(c *client, queue int, body []byte, runID, id uint64, born time.Time) error {
	half := sendRequest(queue, body, runID, id, born, record.SysFlagTransactionPrepared,
		record.PropertyTransactionPrepared, "true", record.PropertyProducerGroup, txGroup)
	resp, err := c.call(half, callTimeout)
	if err != nil {
		return fmt.Errorf("half message: %w", err)
	}
	if !wire.Stored(wire.StatusOf(resp.Code)) {
		return fmt.Errorf("half message: response code %d: %s", resp.Code, resp.Remark)
	}
	_, phys, err := record.ParseOffsetMsgID(resp.Ext("msgId"))
	if err != nil {
		return fmt.Errorf("half message: the reply's msgId: %w", err)
	}
	uniq, _ := record.GetProperty([]byte(half.Ext("properties")), record.PropertyUniqKey)
	end := &remoting.Command{Code: remoting.CodeEndTransaction}
	for _, kv := range [][2]string{{"producerGroup", txGroup}, {"tranStateTableOffset", resp.Ext("queueOffset")},
		{"commitLogOffset", strconv.FormatInt(phys, 10)}, {"commitOrRollback", strconv.Itoa(int(record.SysFlagTransactionCommit))},
		{"fromTransactionCheck", "false"}, {"msgId", uniq}, {"transactionId", resp.Ext("transactionId")}, {"bname", "broker-a"}} {
		end.SetExt(kv[0], kv[1])
	}
	er, err := c.call(end, callTimeout)
	if err != nil {
		return fmt.Errorf("end transaction: %w", err)
	}
	if er.Code != remoting.Success {
		return fmt.Errorf("end transaction: response code %d: %s", er.Code, er.Remark)
	}
	return nil
}
