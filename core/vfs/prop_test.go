package vfs

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// crashModel is the reference model of CrashFS's durability semantics for
// files in one directory: names map to file ids, and every file has a
// volatile and a durable image.
type crashModel struct {
	c      *CrashFS
	nextID int
	vol    map[string]int // volatile entries of /d
	dur    map[string]int // durable entries of /d
	files  map[int]*modelFile
}

type modelFile struct{ vol, dur []byte }

var propNames = []string{"a", "b", "c", "d"}

func resized(b []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, b)
	return out
}

// TestCrashFSProperties drives random operations, syncs and crashes (torn
// and clean) against CrashFS and the model: reads must always show the
// volatile image; after a clean crash exactly the durable names and images
// survive; after a torn crash every page is the durable or the volatile
// page (zeros past the volatile end of file), at the durable size.
func TestCrashFSProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &crashModel{
			c:     NewCrashFS(rapid.Int64().Draw(t, "seed")),
			vol:   map[string]int{},
			dur:   map[string]int{},
			files: map[int]*modelFile{},
		}
		if err := m.c.MkdirAll("/d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := m.c.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		t.Repeat(map[string]func(*rapid.T){
			"":         m.check,
			"create":   m.create,
			"write":    m.write,
			"short":    m.shortWrite,
			"mapstore": m.mapStore,
			"truncate": m.truncate,
			"allocate": m.allocate,
			"zero":     m.zero,
			"sync":     m.sync,
			"syncdir":  m.syncDir,
			"rename":   m.rename,
			"remove":   m.remove,
			"crash":    m.crash,
		})
	})
}

func path(name string) string { return "/d/" + name }

// existing draws a name that exists, skipping the action when none does.
func (m *crashModel) existing(t *rapid.T) (string, *modelFile) {
	if len(m.vol) == 0 {
		t.Skip("no files")
	}
	name := rapid.SampledFrom(slices.Sorted(maps.Keys(m.vol))).Draw(t, "name")
	return name, m.files[m.vol[name]]
}

func (m *crashModel) openRW(t *rapid.T, name string) File {
	f, err := m.c.OpenReadWrite(path(name))
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	return f
}

func closeOrFail(t *rapid.T, c io.Closer) {
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}

func (m *crashModel) create(t *rapid.T) {
	name := rapid.SampledFrom(propNames).Draw(t, "name")
	f, err := m.c.Create(path(name))
	if err != nil {
		t.Fatal(err)
	}
	closeOrFail(t, f)
	if id, ok := m.vol[name]; ok {
		m.files[id].vol = nil
		return
	}
	m.nextID++
	m.vol[name] = m.nextID
	m.files[m.nextID] = &modelFile{}
}

func (m *crashModel) write(t *rapid.T) {
	name, mf := m.existing(t)
	off := rapid.IntRange(0, 3*PageSize).Draw(t, "off")
	data := rapid.SliceOfN(rapid.Byte(), 1, 2*PageSize).Draw(t, "data")
	f := m.openRW(t, name)
	if n, err := f.WriteAt(data, int64(off)); err != nil || n != len(data) {
		t.Fatalf("write: %d, %v", n, err)
	}
	closeOrFail(t, f)
	if end := off + len(data); end > len(mf.vol) {
		mf.vol = resized(mf.vol, end)
	}
	copy(mf.vol[off:], data)
}

func (m *crashModel) shortWrite(t *rapid.T) {
	name, mf := m.existing(t)
	off := rapid.IntRange(0, 2*PageSize).Draw(t, "off")
	data := rapid.SliceOfN(rapid.Byte(), 1, 100).Draw(t, "data")
	written := rapid.IntRange(0, 120).Draw(t, "written")
	m.c.InjectShortWrite(1, written, ErrIO)
	f := m.openRW(t, name)
	n, err := f.WriteAt(data, int64(off))
	closeOrFail(t, f)
	want := max(min(written, len(data)-1), 0)
	if n != want || !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("short write = %d, %v; want %d", n, err, want)
	}
	if n > 0 {
		if end := off + n; end > len(mf.vol) {
			mf.vol = resized(mf.vol, end)
		}
		copy(mf.vol[off:], data[:n])
	}
}

func (m *crashModel) mapStore(t *rapid.T) {
	name, mf := m.existing(t)
	if len(mf.vol) == 0 {
		t.Skip("empty file")
	}
	f := m.openRW(t, name)
	mp, err := f.Map(len(mf.vol))
	if err != nil {
		t.Fatal(err)
	}
	start := rapid.IntRange(0, len(mf.vol)-1).Draw(t, "start")
	n := rapid.IntRange(1, len(mf.vol)-start).Draw(t, "n")
	v := rapid.Byte().Draw(t, "value")
	b := mp.Bytes()
	for i := start; i < start+n; i++ {
		b[i] = v
		mf.vol[i] = v
	}
	closeOrFail(t, mp)
	closeOrFail(t, f)
}

func (m *crashModel) truncate(t *rapid.T) {
	name, mf := m.existing(t)
	size := rapid.IntRange(0, 4*PageSize).Draw(t, "size")
	f := m.openRW(t, name)
	if err := f.Truncate(int64(size)); err != nil {
		t.Fatal(err)
	}
	closeOrFail(t, f)
	mf.vol = resized(mf.vol, size)
}

func (m *crashModel) allocate(t *rapid.T) {
	name, mf := m.existing(t)
	off := rapid.IntRange(0, 3*PageSize).Draw(t, "off")
	n := rapid.IntRange(1, 2*PageSize).Draw(t, "n")
	f := m.openRW(t, name)
	if err := f.Allocate(int64(off), int64(n)); err != nil {
		t.Fatal(err)
	}
	closeOrFail(t, f)
	if off+n > len(mf.vol) {
		mf.vol = resized(mf.vol, off+n)
	}
}

func (m *crashModel) zero(t *rapid.T) {
	name, mf := m.existing(t)
	off := rapid.IntRange(0, 3*PageSize).Draw(t, "off")
	n := rapid.IntRange(1, 2*PageSize).Draw(t, "n")
	f := m.openRW(t, name)
	if err := f.ZeroRange(int64(off), int64(n)); err != nil {
		t.Fatal(err)
	}
	closeOrFail(t, f)
	if off < len(mf.vol) {
		clear(mf.vol[off:min(off+n, len(mf.vol))])
	}
}

func (m *crashModel) sync(t *rapid.T) {
	name, mf := m.existing(t)
	f := m.openRW(t, name)
	var err error
	if rapid.Bool().Draw(t, "datasync") {
		err = f.Datasync()
	} else {
		err = f.Sync()
	}
	if err != nil {
		t.Fatal(err)
	}
	closeOrFail(t, f)
	mf.dur = slices.Clone(mf.vol)
}

func (m *crashModel) syncDir(t *rapid.T) {
	if err := m.c.SyncDir("/d"); err != nil {
		t.Fatal(err)
	}
	m.dur = maps.Clone(m.vol)
}

func (m *crashModel) rename(t *rapid.T) {
	from, _ := m.existing(t)
	to := rapid.SampledFrom(propNames).Draw(t, "to")
	if err := m.c.Rename(path(from), path(to)); err != nil {
		t.Fatal(err)
	}
	if from != to {
		m.vol[to] = m.vol[from]
		delete(m.vol, from)
	}
}

func (m *crashModel) remove(t *rapid.T) {
	name, _ := m.existing(t)
	if err := m.c.Remove(path(name)); err != nil {
		t.Fatal(err)
	}
	delete(m.vol, name)
}

func (m *crashModel) crash(t *rapid.T) {
	torn := rapid.Bool().Draw(t, "torn")
	m.c.CrashWith(CrashOptions{TornPages: torn})
	m.vol = maps.Clone(m.dur)
	for name, id := range m.vol {
		mf := m.files[id]
		if !torn {
			mf.vol = slices.Clone(mf.dur)
			continue
		}
		got, err := m.read(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(mf.dur) {
			t.Fatalf("%s: torn crash size %d, want durable size %d", name, len(got), len(mf.dur))
		}
		for p := 0; p < len(got); p += PageSize {
			e := min(p+PageSize, len(got))
			if bytes.Equal(got[p:e], mf.dur[p:e]) {
				continue
			}
			if p >= len(mf.vol) || !bytes.Equal(got[p:e], resized(mf.vol[p:min(e, len(mf.vol))], e-p)) {
				t.Fatalf("%s: page at %d after torn crash is neither durable nor volatile", name, p)
			}
		}
		mf.vol, mf.dur = got, slices.Clone(got)
	}
}

func (m *crashModel) read(name string) ([]byte, error) {
	f, err := m.c.Open(path(name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	if size > 0 {
		if _, err := f.ReadAt(buf, 0); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

func (m *crashModel) check(t *rapid.T) {
	names, err := m.c.ReadDir("/d")
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(maps.Keys(m.vol)); !slices.Equal(names, want) {
		t.Fatalf("ReadDir = %v, model %v", names, want)
	}
	for name, id := range m.vol {
		got, err := m.read(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, m.files[id].vol) {
			t.Fatalf("%s: contents (%d bytes) differ from the model's volatile image (%d bytes)",
				name, len(got), len(m.files[id].vol))
		}
	}
	for name, id := range m.dur {
		got, err := m.c.DurableContents(path(name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, m.files[id].dur) {
			t.Fatalf("%s: durable contents (%d bytes) differ from the model's (%d bytes)",
				name, len(got), len(m.files[id].dur))
		}
	}
}
