package commitpage

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestReaderSeesWriter(t *testing.T) {
	w, err := Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if v := r.Load(); v != 0 {
		t.Fatalf("fresh page holds %d, want 0", v)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := int64(1); i <= 100000; i++ {
			w.Store(i)
		}
	}()
	last := int64(0)
	for last < 100000 {
		v := r.Load()
		if v < last {
			t.Fatalf("load went back from %d to %d", last, v)
		}
		last = v
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Path()); !os.IsNotExist(err) {
		t.Fatalf("page file left after Close: %v", err)
	}
	if v := r.Load(); v != 100000 {
		t.Fatalf("after the writer closed the reader holds %d, want the last value 100000", v)
	}
}

func TestOpenRefusesAnotherFile(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"short":    []byte("keelcp01"),
		"badmagic": make([]byte, PageSize),
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: Open = %v, want an error naming the file", name, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
}
