package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmq/keel/cli"
	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// runOut runs the keel command line with args and returns what it printed.
func runOut(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	err := cli.Run(args, cli.WithOutput(&buf))
	return buf.String(), err
}

// TestQueryDamagedRecord: `keel query --id` prints an intact message and
// exits 0; for a record damaged on disk it exits non-zero with the admin
// API's message naming the damage and the offset.
func TestQueryDamagedRecord(t *testing.T) {
	dir := t.TempDir()
	n := startNode(t, "default.toml", "store.dir="+dir, "store.segment_size=1MiB", "store.max_message_size=64KiB", "index.plugin=none")
	defer n.Stop(context.Background())
	resp := send(t, n.Addr("broker"), "Orders", "hello", nil)
	if resp.Code != 0 {
		t.Fatalf("send: %d %s", resp.Code, resp.Remark)
	}
	id := resp.Ext("msgId")
	_, off, err := record.ParseOffsetMsgID(id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runOut(t, "query", "--admin", n.Addr("admin"), "--id", id)
	if err != nil || !strings.Contains(out, `"hello"`) {
		t.Fatalf("query of an intact message: %v\n%s", err, out)
	}

	path := filepath.Join(dir, core.CommitlogDir, fmt.Sprintf("%020d", off/(1<<20)*(1<<20)))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	at := off%(1<<20) + 89 // in the body: the CRC fails
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
	f.Close()

	out, err = runOut(t, "query", "--admin", n.Addr("admin"), "--id", id)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("damaged record at offset %d", off)) || !strings.Contains(err.Error(), "CRC") {
		t.Fatalf("query of a damaged record: err %v, output %q", err, out)
	}
	if out != "" {
		t.Fatalf("a failed query printed %q", out)
	}
}

// TestAdminCommandSendsJSON: `keel admin force-writes` passes the admin
// API's browser-request guard (it sends application/json): the answer is
// the handler's own (no replication plugin here), not 415.
func TestAdminCommandSendsJSON(t *testing.T) {
	n := startNode(t, "default.toml", "store.dir="+t.TempDir(), "store.segment_size=1MiB", "store.max_message_size=64KiB", "index.plugin=none")
	defer n.Stop(context.Background())
	_, err := runOut(t, "admin", "force-writes", "--admin", n.Addr("admin"))
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "no replication plugin") {
		t.Fatalf("keel admin force-writes: %v", err)
	}
}
