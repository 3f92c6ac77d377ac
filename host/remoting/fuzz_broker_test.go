package remoting

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

var fuzzCodes = []int16{
	CodeSendMessage, CodeSendMessageV2, CodeSendBatchMessage, CodePullMessage, CodeQueryMessage,
	CodeQueryConsumerOffset, CodeUpdateConsumerOffset, CodeSearchOffsetByTimestamp, CodeGetMaxOffset,
	CodeGetMinOffset, CodeViewMessageByID, CodeHeartBeat, CodeUnregisterClient, CodeConsumerSendMsgBack,
	CodeGetConsumerListByGroup, CodeLockBatchMQ, CodeUnlockBatchMQ, CodeGetRouteInfoByTopic, CodeGetBrokerClusterInfo,
}

// FuzzBrokerRequest feeds arbitrary header fields and bodies to every
// broker and name-server handler. No input may make a handler panic.
// ext is "k=v" pairs separated by "\n".
func FuzzBrokerRequest(f *testing.F) {
	f.Add(uint8(0), "topic=T\nqueueId=0\nproperties=TAGS\x01a\x02", []byte("body"))
	f.Add(uint8(2), "b=T\ne=-1\nm=true", []byte{0, 0, 0, 22, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(3), "consumerGroup=G\ntopic=T\nqueueId=0\nqueueOffset=99\nsysFlag=7\nsubscription=a||b\ncommitOffset=3", []byte(nil))
	f.Add(uint8(11), "", heartbeatBodyJSON("C", "G", map[string]string{"T": "x || y"}))
	f.Add(uint8(13), "group=G\noffset=0\ndelayLevel=-1", []byte(nil))
	f.Add(uint8(15), "", []byte(`{"consumerGroup":"G","clientId":"c","mqSet":[{"topic":"T","queueId":1}]}`))
	f.Add(uint8(17), "topic=%RETRY%G", []byte(nil))

	be := newFakeBackend()
	be.maxBody = 1 << 10
	s := NewServer(ServerConfig{Logger: quietLogger()})
	b := NewBroker(BrokerConfig{AutoCreateTopics: true, MaxSuspend: 5 * time.Millisecond, Logger: quietLogger()}, be)
	b.Register(s)
	NewNameServer(NameServerConfig{AutoCreateTopics: true, Logger: quietLogger()}, fakeRoutes{be, BrokerIdentity{MasterAddr: "127.0.0.1:1"}}).Register(s)
	nc, peer := net.Pipe()
	go io.Copy(io.Discard, peer)
	c := s.newConn(nc)
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go c.writeLoop()
	f.Cleanup(func() {
		c.Close()
		peer.Close()
		b.Close()
		s.Close()
	})

	f.Fuzz(func(t *testing.T, code uint8, ext string, body []byte) {
		cmd := &Command{Code: fuzzCodes[int(code)%len(fuzzCodes)], Body: body}
		for _, line := range strings.Split(ext, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				cmd.SetExt(k, v)
			}
		}
		s.dispatch(c, cmd)
		for deadline := time.Now().Add(5 * time.Second); len(c.sem) > 0; {
			if time.Now().After(deadline) {
				t.Fatal("async handler still running after 5s")
			}
			time.Sleep(time.Millisecond)
		}
		if n := s.panics.Load(); n > 0 {
			t.Fatalf("%d handler panics for code %d ext %q body %q", n, cmd.Code, ext, body)
		}
	})
}
