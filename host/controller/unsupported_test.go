package controller

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/keelmq/keel/host/remoting"
)

// TestUnsupportedCodesNameTheAlternative: the controller refuses the
// RocketMQ controller-mode codes keel does not implement with
// REQUEST_CODE_NOT_SUPPORTED and a remark naming what keel does instead
// (leader or not); a broker's server refuses NOTIFY_BROKER_ROLE_CHANGED
// the same way.
func TestUnsupportedCodesNameTheAlternative(t *testing.T) {
	nodes := startCluster(t, 1)
	ctx := context.Background()
	want := map[int16]string{
		remoting.CodeNotifyBrokerRoleChanged:   "BROKER_HEARTBEAT (904)",
		remoting.CodeCleanBrokerData:           "never removes a member",
		remoting.CodeControllerGetNextBrokerID: "CONTROLLER_REGISTER_BROKER (1003)",
		remoting.CodeControllerApplyBrokerID:   "CONTROLLER_REGISTER_BROKER (1003)",
	}
	check := func(where, addr string, codes ...int16) {
		t.Helper()
		for _, code := range codes {
			resp, err := remoting.Call(ctx, addr, &remoting.Command{Code: code,
				ExtFields: remoting.FieldsOf(map[string]string{"clusterName": "c", "brokerName": "b"})})
			if err != nil {
				t.Fatalf("%s: code %d: %v", where, code, err)
			}
			if resp.Code != remoting.RequestCodeNotSupported || !strings.Contains(resp.Remark, want[code]) {
				t.Errorf("%s: code %d answered %d %q, want %d naming %q", where, code, resp.Code, resp.Remark,
					remoting.RequestCodeNotSupported, want[code])
			}
		}
	}
	check("controller", nodes[0].addr, remoting.CodeNotifyBrokerRoleChanged, remoting.CodeCleanBrokerData,
		remoting.CodeControllerGetNextBrokerID, remoting.CodeControllerApplyBrokerID)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rs := remoting.NewServer(remoting.ServerConfig{})
	RegisterBrokerRefusals(rs)
	go rs.Serve(ln)
	t.Cleanup(func() { rs.Close() })
	check("broker", ln.Addr().String(), remoting.CodeNotifyBrokerRoleChanged)
}
