package remoting

import (
	"testing"
	"time"
)

// A pull whose data is already there is answered on the read goroutine:
// with one asynchronous slot per connection, taken by a held pull, it is
// still answered at once.
func TestPullWithDataAnsweredWithoutGoroutine(t *testing.T) {
	be := newFakeBackend()
	b := NewBroker(BrokerConfig{AutoCreateTopics: true, Logger: quietLogger()}, be)
	t.Cleanup(b.Close)
	s := NewServer(ServerConfig{Logger: quietLogger(), MaxInflight: 1})
	b.Register(s)
	c := dialTest(t, startServer(t, s))
	e := &brokerEnv{be: be, b: b}
	for _, topic := range []string{"A", "B"} {
		if r := e.send(t, c, topic, 0, "x", ""); r.Code != Success {
			t.Fatalf("send to %s: %+v", topic, r)
		}
	}
	held := c.start(&Command{Code: CodePullMessage, ExtFields: FieldsOf(pullExt("G", "B", 0, 1, 10000))})
	time.Sleep(100 * time.Millisecond) // B's pull is held, on the one slot
	r, err := c.callTimeout(&Command{Code: CodePullMessage, ExtFields: FieldsOf(pullExt("G", "A", 0, 0, 10000))}, 2*time.Second)
	if err != nil {
		t.Fatalf("pull with data waiting while the slot is held: %v", err)
	}
	if r.Code != Success || extInt(t, r, "nextBeginOffset") != 1 {
		t.Fatalf("pull with data: code %d next %s", r.Code, r.Ext("nextBeginOffset"))
	}
	e.send(t, c, "B", 0, "y", "")
	select {
	case r := <-held:
		if r.Code != Success {
			t.Fatalf("held pull: %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("held pull not woken")
	}
}
