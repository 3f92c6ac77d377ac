package wire

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/keelmq/keel/host/remoting"
)

// TestStrayFrameEndsBatch: a batch of frames whose last one is not a
// matched response (a broker-initiated request, or a late answer to an
// abandoned request) must end the reader's batch like any other frame;
// the reader once skipped its batch bookkeeping for them, leaving the
// writer waiting for a batchDone that never came and every later request
// of the connection unwritten.
func TestStrayFrameEndsBatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		stray *remoting.Command
	}{
		{"broker-request", &remoting.Command{Code: 40, Opaque: 7, Language: "JAVA", Version: 1}},
		{"unmatched-response", &remoting.Command{Code: remoting.Success, Opaque: 12345, Flag: remoting.FlagResponse, Language: "JAVA", Version: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			go func() {
				nc, err := l.Accept()
				if err != nil {
					return
				}
				defer nc.Close()
				br := bufio.NewReader(nc)
				for n := 0; ; n++ {
					req, err := remoting.ReadCommand(br, 0)
					if err != nil {
						return
					}
					out := remoting.NewResponse(req, remoting.Success, "")
					out.Opaque = req.Opaque
					out.Flag |= remoting.FlagResponse
					b := out.AppendFrame(nil)
					if n == 0 {
						b = tc.stray.AppendFrame(b) // same write: one batch of two frames
					}
					if _, err := nc.Write(b); err != nil {
						return
					}
				}
			}()
			res, err := Load(context.Background(), LoadSpec{Addr: l.Addr().String(), Producers: 1, Conns: 1, BodyBytes: 16,
				Duration: 300 * time.Millisecond, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if res.Errors > 0 {
				t.Fatalf("%d messages, %d errors, first %q: the request after the stray frame was never written", res.Msgs, res.Errors, res.FirstError)
			}
		})
	}
}
