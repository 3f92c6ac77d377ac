package remoting

import (
	"context"
	"strings"
	"testing"
)

// TestRefusedCodesNameWhatKeelDoes: the RocketMQ requests the broker does
// not implement are refused with REQUEST_CODE_NOT_SUPPORTED and a remark
// saying why, where an unregistered code gets a bare one.
func TestRefusedCodesNameWhatKeelDoes(t *testing.T) {
	e := newBrokerEnv(t, BrokerConfig{})
	for code, want := range map[int16]string{
		CodeCleanExpiredConsumeQueue: "retention trims every consume queue",
		CodeCleanUnusedTopic:         "stay until retention removes their messages",
		9999:                         "request code 9999 not supported",
	} {
		resp, err := Call(context.Background(), e.addr, &Command{Code: code})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Code != RequestCodeNotSupported || !strings.Contains(resp.Remark, want) {
			t.Errorf("code %d answered %d %q, want %d with %q", code, resp.Code, resp.Remark, RequestCodeNotSupported, want)
		}
	}
}
