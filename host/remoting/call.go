package remoting

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"
)

// DefaultCallTimeout bounds a Call whose ctx has no deadline.
const DefaultCallTimeout = 10 * time.Second

// Call sends cmd as a request to the remoting server at addr ("host:port")
// on a new connection and returns its response, for one-shot tools such as
// keel admin. cmd's Opaque, Flag, Language and Version are set here. The
// connection is closed before Call returns. The deadline is ctx's, or
// DefaultCallTimeout from now. Errors wrap what failed (dial, write, read)
// and addr; a response with a code other than SUCCESS is not an error.
func Call(ctx context.Context, addr string, cmd *Command) (*Command, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultCallTimeout)
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("remoting call to %s: %w", addr, err)
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	nc.SetDeadline(deadline)
	cmd.Opaque, cmd.Flag, cmd.Language, cmd.Version = 1, 0, ServerLanguage, ServerVersion
	if _, err := nc.Write(cmd.AppendFrame(nil)); err != nil {
		return nil, fmt.Errorf("remoting call to %s: sending code %d: %w", addr, cmd.Code, err)
	}
	br := bufio.NewReader(nc)
	for {
		resp, err := ReadCommand(br, DefaultMaxFrame)
		if err != nil {
			return nil, fmt.Errorf("remoting call to %s: reading the answer to code %d: %w", addr, cmd.Code, err)
		}
		if resp.IsResponse() && resp.Opaque == cmd.Opaque {
			return resp, nil
		}
	}
}
