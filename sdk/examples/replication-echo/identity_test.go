package echo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/meta"
)

// The first call creates the id file; later calls read the same id; a
// damaged file is an error naming it, and it is left as it was.
func TestLoadOrCreateID(t *testing.T) {
	dir := t.TempDir()
	id, err := loadOrCreateID(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := validID(id); err != nil || len(id) != 32 {
		t.Fatalf("new id %q: %v (want 32 hex digits)", id, err)
	}
	again, err := loadOrCreateID(dir)
	if err != nil || again != id {
		t.Fatalf("second load: %q, %v; want %q", again, err, id)
	}
	if other, _ := loadOrCreateID(t.TempDir()); other == id {
		t.Fatalf("two stores got the same id %q", id)
	}
	path := filepath.Join(dir, idFile)
	if err := os.WriteFile(path, []byte("not an id!\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = loadOrCreateID(dir)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("damaged id file: err %v, want one naming %s", err, path)
	}
	if b, _ := os.ReadFile(path); string(b) != "not an id!\n" {
		t.Fatalf("damaged id file rewritten to %q", b)
	}
	if _, err := loadOrCreateID(""); err == nil {
		t.Fatal("no data directory: no error")
	}
	if _, err := os.Stat(path + meta.TempSuffix); err == nil {
		t.Fatalf("temporary file %s left", path+meta.TempSuffix)
	}
}
