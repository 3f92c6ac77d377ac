package remoting

import (
	"context"
	"testing"
	"time"
)

func TestCallRoundTrip(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := Call(ctx, e.addr, &Command{Code: CodeGetAllTopicListFromNameServer})
	if err != nil || resp.Code != Success || string(resp.Body) != `{"topicList":[]}` {
		t.Fatalf("Call: %v, %+v", err, resp)
	}
	if _, err := Call(ctx, "127.0.0.1:1", &Command{Code: CodeGetAllTopicConfig}); err == nil {
		t.Fatal("Call to a closed port succeeded")
	}
}
