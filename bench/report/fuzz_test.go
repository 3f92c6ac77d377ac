package report

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadJSON: ReadJSON accepts only schema_version 1 documents and never
// panics.
func FuzzReadJSON(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"cells":[{"flush":"sync","msgs_per_sec":1}],"ceilings":{"group_commit_per_sec":{"1":2}}}`))
	f.Add([]byte(`{"schema_version":2}`))
	f.Add([]byte(`[]`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "r.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := ReadJSON(p)
		if err == nil && r.SchemaVersion != SchemaVersion {
			t.Fatalf("accepted schema_version %d", r.SchemaVersion)
		}
	})
}
