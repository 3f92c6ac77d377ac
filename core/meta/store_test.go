package meta

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

func populate(t *testing.T, s *Store) {
	t.Helper()
	for _, err := range []error{
		s.Topics.Put(topic("orders", 8)),
		s.Topics.Put(topic("%RETRY%billing", 1)),
		s.SubscriptionGroups.Put(DefaultSubscriptionGroup("billing")),
		s.ConsumerOffsets.Commit("billing", "orders", 0, 12),
		s.ConsumerOffsets.Commit("billing", "orders", 7, 3),
		s.DelayOffsets.Set(3, 77),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestStorePersistReload(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "config") // Open creates it
	s, err := Open(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	populate(t, s)
	if err := s.PersistAll(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{TopicsFile, SubscriptionGroupsFile, ConsumerOffsetsFile, DelayOffsetsFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("%s not written: %v", f, err)
		}
	}
	s2, err := Open(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s2.Snapshot(), s.Snapshot()) {
		t.Fatalf("reloaded\n%+v\nwant\n%+v", s2.Snapshot(), s.Snapshot())
	}
	if s2.Dir() != dir {
		t.Fatal("Dir")
	}
}

func TestStoreOpenCorruptFileFails(t *testing.T) {
	for _, f := range []string{TopicsFile, SubscriptionGroupsFile, ConsumerOffsetsFile, DelayOffsetsFile} {
		for name, content := range map[string]string{
			"truncated json": `{"dataVersion":{"stateVersion":0,`,
			"empty file":     ``,
			"wrong type":     `[1,2,3]`,
		} {
			t.Run(f+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				s, _ := Open(vfs.OS, dir)
				populate(t, s)
				if err := s.PersistAll(); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, f)
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				_, err := Open(vfs.OS, dir)
				if err == nil {
					t.Fatal("Open succeeded on a corrupt file")
				}
				if !strings.Contains(err.Error(), path) {
					t.Fatalf("error %q does not name %s", err, path)
				}
			})
		}
	}
	// A file that parses but breaks a rule is also refused.
	dir := t.TempDir()
	bad := `{"offsetTable":{"orders@billing":{"0":-5}}}`
	if err := os.WriteFile(filepath.Join(dir, ConsumerOffsetsFile), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(vfs.OS, dir); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), ConsumerOffsetsFile) {
		t.Fatalf("Open with a negative offset on disk = %v", err)
	}
}

func TestStoreOpenIgnoresTempFile(t *testing.T) {
	dir := t.TempDir()
	s, _ := Open(vfs.OS, dir)
	populate(t, s)
	if err := s.PersistAll(); err != nil {
		t.Fatal(err)
	}
	// An interrupted write left a half-written temp file next to every
	// intact table; and a table never written has only a temp file.
	for _, f := range []string{TopicsFile, SubscriptionGroupsFile, ConsumerOffsetsFile, DelayOffsetsFile} {
		if err := os.WriteFile(filepath.Join(dir, f+TempSuffix), []byte(`{"dataVers`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := Open(vfs.OS, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s2.Snapshot(), s.Snapshot()) {
		t.Fatal("content changed by a leftover temp file")
	}
	fresh := t.TempDir()
	if err := os.WriteFile(filepath.Join(fresh, TopicsFile+TempSuffix), []byte(`{"topicConfigTable":{"x":`), 0o644); err != nil {
		t.Fatal(err)
	}
	s3, err := Open(vfs.OS, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if len(s3.Topics.List()) != 0 {
		t.Fatal("topics loaded from a temp file")
	}
	// The next persist replaces the stale temp file and succeeds.
	if err := s3.Topics.Put(topic("x", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s3.PersistAll(); err != nil {
		t.Fatal(err)
	}
	s4, err := Open(vfs.OS, fresh)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s4.Topics.Get("x"); !ok {
		t.Fatal("topic lost")
	}
}

func TestStoreSnapshotApply(t *testing.T) {
	master, _ := Open(vfs.OS, t.TempDir())
	populate(t, master)
	slave, _ := Open(vfs.OS, t.TempDir())
	if err := slave.ConsumerOffsets.Commit("billing", "orders", 0, 500); err != nil {
		t.Fatal(err)
	}

	// The snapshot travels as JSON.
	b, err := json.Marshal(master.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	var snap Snapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap, master.Snapshot()) {
		t.Fatal("snapshot JSON round trip differs")
	}
	if err := slave.Apply(snap); err != nil {
		t.Fatal(err)
	}
	got := slave.Snapshot()
	if !reflect.DeepEqual(got.Topics, snap.Topics) || !reflect.DeepEqual(got.SubscriptionGroups, snap.SubscriptionGroups) {
		t.Fatal("topics or groups not replicated")
	}
	if off, _ := slave.ConsumerOffsets.Query("billing", "orders", 0); off != 500 {
		t.Fatalf("slave offset rolled back to %d", off)
	}
	if off, _ := slave.ConsumerOffsets.Query("billing", "orders", 7); off != 3 {
		t.Fatal("master offset not merged")
	}
	if off, _ := slave.DelayOffsets.Get(3); off != 77 {
		t.Fatal("delay offset not merged")
	}

	// A snapshot with one invalid part changes nothing at all.
	other, _ := Open(vfs.OS, t.TempDir())
	bad := master.Snapshot()
	bad.DelayOffsets.Offsets[-1] = 1
	if err := other.Apply(bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Apply = %v, want ErrInvalid", err)
	}
	if len(other.Topics.List()) != 0 || len(other.ConsumerOffsets.Groups()) != 0 {
		t.Fatal("a rejected snapshot was partly applied")
	}
}
