package profile

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmq/keel/sdk"
)

func TestPluginConfigFields(t *testing.T) {
	p := mustLoad(t, pluginDoc)
	c := p.PluginConfig(SectionFlush)
	// Document is the flush plugin's own table, at the lines of the file.
	flushDoc := strings.Repeat("\n", 7) + "[flush.config]\ninterval = \"200ms\"\nbuffer = \"4MiB\"\nthreshold = \"25%\"\n\n" +
		"[flush.config.retry]\nbackoff = \"1s\"\n\n\n\n"
	want := sdk.Config{Name: "async", File: "profiles/x.toml", Document: []byte(flushDoc), Section: SectionFlush,
		Role: RoleMaster, DataDir: filepath.Join("data", "x", "plugins", "flush")}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("flush:\n got %+v\nwant %+v", c, want)
	}
	// Document is a copy; DataDir follows Store.Dir as it is at the call.
	c.Document[0] = '#'
	p.Store.Dir = "/var/keel"
	if c := p.PluginConfig(SectionIndex); string(c.Document) != strings.Repeat("\n", strings.Count(pluginDoc, "\n")) || c.DataDir != "/var/keel/plugins/index" || c.Name != "hash" {
		t.Errorf("index: %+v", c)
	}

	slave := "schema = 1\n[replication]\npath = \"bin/repl\"\nrole = \"slave\"\nmaster_addr = \"10.0.0.1:10912\"\nsecret = \"s\"\n" +
		"[server]\nha_addr = \"127.0.0.1:20912\"\n"
	p = mustLoad(t, slave)
	c = p.PluginConfig(SectionReplication)
	if c.Name != "bin/repl" || c.Role != RoleSlave || c.Addr != "127.0.0.1:20912" || c.PeerAddr != "10.0.0.1:10912" || c.Secret != "s" ||
		c.Section != SectionReplication {
		t.Errorf("replication: %+v", c)
	}
	// Only the replication plugin gets the HA address and the secret.
	if c := p.PluginConfig(SectionFlush); c.Addr != "" || c.PeerAddr != "" || c.Secret != "" || c.Role != RoleSlave {
		t.Errorf("flush of a slave: %+v", c)
	}
}

// TestPluginConfigDecode: a plugin decoding what PluginConfig hands it with
// sdk.Config.Decode gets what DecodePluginConfig gets, overrides included,
// and the same error text.
func TestPluginConfigDecode(t *testing.T) {
	for _, overrides := range [][]string{
		nil,
		{"flush.config.interval=1s", "flush.config.retry.max=9", "store.segment_size=128MiB"},
		{"flush.config.mode=a", `flush.config={least_pages = 1}`, "flush.config.mode=b"},
		{"flush.config.interval=soon"},
		{"flush.config.nope=1"},
	} {
		p := mustLoad(t, pluginDoc, overrides...)
		a, b := defaultFlushConfig(), defaultFlushConfig()
		errA := p.DecodePluginConfig(SectionFlush, &a)
		errB := p.PluginConfig(SectionFlush).Decode(&b)
		if (errA == nil) != (errB == nil) || !reflect.DeepEqual(a, b) {
			t.Errorf("%q: DecodePluginConfig %v %+v, Config.Decode %v %+v", overrides, errA, a, errB, b)
			continue
		}
		if errA != nil {
			if errA.Error() != errB.Error() || !errors.Is(errB, sdk.ErrInvalidConfig) {
				t.Errorf("%q: errors differ or lack ErrInvalidConfig:\n%v\n%v", overrides, errA, errB)
			}
			var pe *Error
			if !errors.As(errB, &pe) || pe.Override != overrides[0] {
				t.Errorf("%q: %#v", overrides, pe)
			}
		}
	}
	p := mustLoad(t, pluginDoc, "flush.config.interval=1s")
	var c flushConfig
	if err := p.PluginConfig(SectionFlush).Decode(&c); err != nil || c.Interval.D().String() != "1s" {
		t.Errorf("override not applied: %v %+v", err, c)
	}
}
