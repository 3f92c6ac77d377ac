package wire

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"

	"github.com/keelmq/keel/host/remoting"
)

// FloorName and FloorProfile name the protocol floor's rows in the wire
// part's results.
const (
	FloorName    = "protocol-floor"
	FloorProfile = "none"
)

// StartFloor starts the protocol floor on 127.0.0.1: keel's remoting
// server (the same reader, writer and write coalescing as keel serve)
// with a SEND_MESSAGE handler that checks the header fields a broker needs
// and answers with the response keel sends, storing nothing. Driven by
// the same generator as a keel node, it bounds what any broker behind
// keel's remoting server could reach on the machine. stop closes it.
func StartFloor() (addr string, stop func() error, err error) {
	s := remoting.NewServer(remoting.ServerConfig{Logger: slog.New(slog.DiscardHandler)})
	var off atomic.Int64
	s.Handle(remoting.CodeSendMessage, func(req *remoting.Request) *remoting.Command { return floorAnswer(req.Cmd, &off) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("wire: protocol floor: %w", err)
	}
	go s.Serve(l)
	return l.Addr().String(), s.Close, nil
}

// floorAnswer checks the header fields a broker needs and builds the
// response keel sends to a SEND_MESSAGE, advancing *off as an append
// would, without storing anything.
func floorAnswer(c *remoting.Command, off *atomic.Int64) *remoting.Command {
	q, err := strconv.Atoi(c.Ext("queueId"))
	if err != nil || c.Ext("topic") == "" || c.Ext("properties") == "" {
		return remoting.NewResponse(c, remoting.MessageIllegal, "bad header")
	}
	if _, err := strconv.ParseInt(c.Ext("bornTimestamp"), 10, 64); err != nil {
		return remoting.NewResponse(c, remoting.MessageIllegal, "bad born timestamp")
	}
	o := off.Add(int64(len(c.Body)) + 200)
	resp := remoting.NewResponse(c, remoting.Success, "")
	resp.SetExt("msgId", fmt.Sprintf("7F00000100002A9F%016X", o))
	resp.SetExt("queueId", strconv.Itoa(q))
	resp.SetExt("queueOffset", strconv.FormatInt(o/300, 10))
	resp.SetExt("MSG_REGION", "DefaultRegion")
	resp.SetExt("TRACE_ON", "true")
	return resp
}
