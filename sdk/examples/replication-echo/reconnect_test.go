package echo_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/keelmq/keel/sdk"
	echo "github.com/keelmq/keel/sdk/examples/replication-echo"
)

// rawHello is a hello as protocol.go documents it, encoded here by hand:
// version 2 carries id, version 1 has none.
func rawHello(version byte, secret, id string, from int64) []byte {
	b := append([]byte("ECHO"), version)
	b = binary.BigEndian.AppendUint16(b, uint16(len(secret)))
	b = append(b, secret...)
	if version >= 2 {
		b = append(b, byte(len(id)))
		b = append(b, id...)
	}
	return binary.BigEndian.AppendUint64(b, uint64(from))
}

// dialHello connects to the master at addr, sends hello and returns the
// connection and the master's reply.
func dialHello(t *testing.T, addr string, hello []byte) (net.Conn, byte, int64) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var r [9]byte
	if _, err := io.ReadFull(c, r[:]); err != nil {
		t.Fatalf("read the master's reply: %v", err)
	}
	return c, r[0], int64(binary.BigEndian.Uint64(r[1:]))
}

type masterStatus struct {
	Replicas []struct {
		ID   string `json:"id"`
		Addr string `json:"addr"`
	} `json:"replicas"`
}

func statusOf(t *testing.T, p *echo.Plugin) masterStatus {
	t.Helper()
	b, err := p.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var st masterStatus
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("status %s: %v", b, err)
	}
	return st
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A slave that connects again with its id while its old connection is
// still open replaces that connection: the master closes the old one and
// counts the slave once, so with wait_replicas = 2 one slave never makes
// two in sync. A second id is a second slave.
func TestReconnectReplacesConnection(t *testing.T) {
	_, mh := benchStore(t)
	addr := freeAddr(t)
	m := startEcho(t, mh, "master", addr, "", "wait_replicas = 2")

	old, st, _ := dialHello(t, addr, rawHello(2, "bench", "slave-a", -1))
	if st != 0 {
		t.Fatalf("first hello: status %d, want 0 (ok)", st)
	}
	waitFor(t, "the master reports slave-a in sync", func() bool { return mh.InSync() == 1 })

	_, st, _ = dialHello(t, addr, rawHello(2, "bench", "slave-a", -1))
	if st != 0 {
		t.Fatalf("second hello: status %d, want 0 (ok)", st)
	}
	old.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(old); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the master kept the replaced connection open")
		}
	}
	if got := statusOf(t, m).Replicas; len(got) != 1 || got[0].ID != "slave-a" {
		t.Fatalf("replicas after the reconnect: %+v, want slave-a once", got)
	}
	time.Sleep(50 * time.Millisecond) // let a stale report show, if any
	if n := mh.InSync(); n != 1 {
		t.Fatalf("in sync after slave-a reconnected: %d, want 1", n)
	}

	_, st, _ = dialHello(t, addr, rawHello(2, "bench", "slave-b", -1))
	if st != 0 {
		t.Fatalf("slave-b's hello: status %d, want 0 (ok)", st)
	}
	waitFor(t, "the master reports two slaves in sync", func() bool { return mh.InSync() == 2 })
}

// A version 1 hello (no id) is refused with status 4 and the version the
// master speaks, and the slave is not counted.
func TestHelloVersion1Refused(t *testing.T) {
	_, mh := benchStore(t)
	addr := freeAddr(t)
	m := startEcho(t, mh, "master", addr, "", "wait_replicas = 1")
	c, st, v := dialHello(t, addr, rawHello(1, "bench", "", -1))
	if st != 4 || v != 2 {
		t.Fatalf("v1 hello: status %d, value %d; want 4 (bad version) and 2", st, v)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := io.Copy(io.Discard, c); err != nil || n != 0 {
		t.Fatalf("after refusing a v1 hello the master sent %d more bytes (err %v), want it to close the connection", n, err)
	}
	if got := statusOf(t, m).Replicas; len(got) != 0 {
		t.Fatalf("replicas after a v1 hello: %+v, want none", got)
	}
}

// A slave's id survives its restarts: the first Start on a store creates
// it, a later instance on the same DataDir sends the same one (Status
// shows it), and another store's slave has another.
func TestSlaveKeepsItsID(t *testing.T) {
	_, sh := benchStore(t)
	dir := t.TempDir()
	master := freeAddr(t) // nothing listens: the slave keeps retrying
	idOf := func(dataDir string) string {
		p := echo.New()
		cfg := sdk.Config{Name: "echo", Section: "replication", Role: "slave", PeerAddr: master, DataDir: dataDir,
			Document: []byte("[replication.config]\n")}
		if err := p.Configure(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background(), sh); err != nil {
			t.Fatal(err)
		}
		defer p.Stop(context.Background())
		b, err := p.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ ID string }
		if err := json.Unmarshal(b, &st); err != nil || st.ID == "" {
			t.Fatalf("slave status %s: %v, want its id", b, err)
		}
		return st.ID
	}
	first := idOf(dir)
	if again := idOf(dir); again != first {
		t.Fatalf("restarted slave on the same DataDir has id %q, want %q", again, first)
	}
	if other := idOf(t.TempDir()); other == first {
		t.Fatalf("a slave on another store has the same id %q", other)
	}
}
