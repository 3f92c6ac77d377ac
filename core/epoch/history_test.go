package epoch

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

func openTemp(t *testing.T) (*History, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "epochFileCheckpoint")
	h, err := Open(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	return h, path
}

func TestMarshalFormat(t *testing.T) {
	got := string(Marshal([]Entry{{1, 0}, {3, 1024}}))
	body := "1-0\n3-1024\n"
	want := "2\n" + itoa(int64(checksum([]byte(body)))) + "\n" + body
	if got != want {
		t.Fatalf("Marshal = %q, want %q", got, want)
	}
	if got := string(Marshal(nil)); got != "0\n0\n" {
		t.Fatalf("empty history = %q", got)
	}
	for _, h := range [][]Entry{nil, {{0, 0}}, {{1, 0}, {2, 0}, {5, 7}, {1<<31 - 1, 1<<63 - 1}}} {
		back, err := Parse(Marshal(h))
		if err != nil {
			t.Fatal(err)
		}
		if len(h) == 0 && len(back) == 0 {
			continue
		}
		if !reflect.DeepEqual(back, h) {
			t.Fatalf("round trip %v -> %v", h, back)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestParseRejects(t *testing.T) {
	good := string(Marshal([]Entry{{1, 0}, {2, 100}}))
	withBody := func(count, body string) string {
		return count + "\n" + itoa(int64(checksum([]byte(body)))) + "\n" + body
	}
	tests := map[string]string{
		"empty":                "",
		"no newline":           "0",
		"no checksum line":     "0\n",
		"bad count":            withBody("x", ""),
		"negative count":       withBody("-1", ""),
		"leading zero count":   withBody("01", "1-0\n"),
		"count too high":       withBody("3", "1-0\n2-100\n"),
		"count too low":        withBody("1", "1-0\n2-100\n"),
		"huge count":           withBody("99999999999", ""),
		"crc mismatch":         strings.Replace(good, "2-100", "2-101", 1),
		"crc not a number":     "1\nabc\n1-0\n",
		"crc too large":        withBody("0", "")[:2] + "4294967296\n",
		"unterminated entry":   withBody("1", "1-0"),
		"missing dash":         withBody("1", "10\n"),
		"negative start":       withBody("1", "1--5\n"),
		"epoch overflow":       withBody("1", "2147483648-0\n"),
		"offset overflow":      withBody("1", "1-9223372036854775808\n"),
		"blank line":           withBody("1", "\n1-0\n"),
		"epochs not rising":    withBody("2", "2-0\n2-10\n"),
		"epochs decreasing":    withBody("2", "3-0\n2-10\n"),
		"offsets decreasing":   withBody("2", "1-10\n2-5\n"),
		"plus sign":            withBody("1", "+1-0\n"),
		"trailing space":       withBody("1", "1-0 \n"),
		"windows line endings": withBody("1", "1-0\r\n"),
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(data)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Parse(%q) = %v, want ErrCorrupt", data, err)
			}
		})
	}
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatal(err)
	}
}

func TestAppendRules(t *testing.T) {
	h, _ := openTemp(t)
	if _, ok := h.Last(); ok {
		t.Fatal("new history has a last entry")
	}
	steps := []struct {
		e  Entry
		ok bool
	}{
		{Entry{1, 0}, true},
		{Entry{1, 0}, true},    // re-announcing the last entry is a no-op
		{Entry{1, 50}, false},  // same epoch, later start
		{Entry{0, 100}, false}, // older epoch
		{Entry{2, 100}, true},
		{Entry{3, 100}, true}, // equal start: epoch 2 becomes empty
		{Entry{4, 99}, false}, // start going back
		{Entry{5, -1}, false}, // negative
		{Entry{-1, 200}, false},
		{Entry{7, 300}, true}, // epochs may skip numbers
	}
	for _, s := range steps {
		err := h.Append(s.e)
		if s.ok != (err == nil) {
			t.Fatalf("Append(%v) = %v, want ok=%v", s.e, err, s.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("Append(%v) error %v does not wrap ErrInvalid", s.e, err)
		}
	}
	want := []Entry{{1, 0}, {2, 100}, {3, 100}, {7, 300}}
	if got := h.Entries(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Entries = %v, want %v", got, want)
	}
	// Entries returns a copy.
	got := h.Entries()
	got[0].Epoch = 99
	if h.Entries()[0].Epoch != 1 {
		t.Fatal("Entries aliases the history")
	}
	if last, ok := h.Last(); !ok || last != (Entry{7, 300}) {
		t.Fatal("Last", last, ok)
	}
}

func TestLookups(t *testing.T) {
	h, _ := openTemp(t)
	// Epoch 3 is empty (starts where 4 starts).
	if err := h.Reset([]Entry{{1, 10}, {2, 100}, {3, 200}, {4, 200}, {6, 350}}); err != nil {
		t.Fatal(err)
	}
	at := []struct {
		off   int64
		epoch int32
		ok    bool
	}{
		{0, 0, false}, {9, 0, false}, {10, 1, true}, {99, 1, true}, {100, 2, true},
		{199, 2, true}, {200, 4, true}, {349, 4, true}, {350, 6, true}, {1 << 40, 6, true},
	}
	for _, c := range at {
		e, ok := h.EpochAt(c.off)
		if ok != c.ok || (ok && e.Epoch != c.epoch) {
			t.Fatalf("EpochAt(%d) = %v, %v; want epoch %d, %v", c.off, e, ok, c.epoch, c.ok)
		}
	}
	ends := []struct {
		epoch int32
		end   int64
		ok    bool
	}{{1, 100, true}, {2, 200, true}, {3, 200, true}, {4, 350, true}, {6, 500, true}, {5, 0, false}, {7, 0, false}}
	for _, c := range ends {
		end, ok := h.EndOf(c.epoch, 500)
		if ok != c.ok || end != c.end {
			t.Fatalf("EndOf(%d) = %d, %v; want %d, %v", c.epoch, end, ok, c.end, c.ok)
		}
	}
	if e, ok := h.Find(3); !ok || e != (Entry{3, 200}) {
		t.Fatal("Find(3)", e, ok)
	}
	if _, ok := h.Find(5); ok {
		t.Fatal("Find(5) found a missing epoch")
	}
	empty, _ := openTemp(t)
	if _, ok := empty.EpochAt(0); ok {
		t.Fatal("EpochAt on an empty history")
	}
}

func TestTruncateSuffix(t *testing.T) {
	base := []Entry{{1, 0}, {2, 100}, {3, 200}, {4, 200}, {5, 300}}
	tests := []struct {
		off  int64
		want []Entry
	}{
		{1000, base},
		{300, base}, // == : epoch 5 began at the new end, kept (empty)
		{299, base[:4]},
		{200, base[:4]}, // both epochs starting at 200 stay
		{199, base[:2]},
		{100, base[:2]},
		{0, base[:1]},
	}
	for _, tc := range tests {
		h, path := openTemp(t)
		if err := h.Reset(base); err != nil {
			t.Fatal(err)
		}
		if err := h.TruncateSuffix(tc.off); err != nil {
			t.Fatal(err)
		}
		if got := h.Entries(); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("TruncateSuffix(%d) = %v, want %v", tc.off, got, tc.want)
		}
		re, err := Open(vfs.OS, path)
		if err != nil {
			t.Fatal(err)
		}
		if got := re.Entries(); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("TruncateSuffix(%d) not persisted: reopened %v", tc.off, got)
		}
	}
	h, _ := openTemp(t)
	if err := h.Reset([]Entry{{1, 5}}); err != nil {
		t.Fatal(err)
	}
	if err := h.TruncateSuffix(4); err != nil || len(h.Entries()) != 0 {
		t.Fatal("truncating below the first start must empty the history", h.Entries(), err)
	}
	if err := h.TruncateSuffix(-1); !errors.Is(err, ErrInvalid) {
		t.Fatal("negative offset accepted")
	}
}

func TestTruncatePrefix(t *testing.T) {
	base := []Entry{{1, 0}, {2, 100}, {3, 200}, {4, 200}, {5, 300}}
	tests := []struct {
		min  int64
		want []Entry
	}{
		{0, base},
		{99, base},
		{100, base[1:]}, // epoch 1 ended at 100: wholly below
		{150, base[1:]},
		{200, base[3:]}, // epoch 2 wholly below, empty epoch 3 too
		{299, base[3:]},
		{300, base[4:]},
		{1 << 40, base[4:]}, // the last entry always stays
	}
	for _, tc := range tests {
		h, path := openTemp(t)
		if err := h.Reset(base); err != nil {
			t.Fatal(err)
		}
		if err := h.TruncatePrefix(tc.min); err != nil {
			t.Fatal(err)
		}
		if got := h.Entries(); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("TruncatePrefix(%d) = %v, want %v", tc.min, got, tc.want)
		}
		if e, ok := h.EpochAt(tc.min); tc.min >= 0 && (!ok || e != mustEpochAt(base, tc.min)) {
			t.Fatalf("after TruncatePrefix(%d) EpochAt(%d) = %v, %v", tc.min, tc.min, e, ok)
		}
		re, _ := Open(vfs.OS, path)
		if got := re.Entries(); !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("TruncatePrefix(%d) not persisted", tc.min)
		}
	}
}

func mustEpochAt(entries []Entry, off int64) Entry {
	var e Entry
	for _, x := range entries {
		if x.StartOffset <= off {
			e = x
		}
	}
	return e
}

func TestResetValidates(t *testing.T) {
	h, _ := openTemp(t)
	if err := h.Append(Entry{1, 0}); err != nil {
		t.Fatal(err)
	}
	if err := h.Reset([]Entry{{2, 0}, {1, 10}}); !errors.Is(err, ErrInvalid) {
		t.Fatal("invalid Reset accepted:", err)
	}
	if got := h.Entries(); !reflect.DeepEqual(got, []Entry{{1, 0}}) {
		t.Fatal("failed Reset changed the history", got)
	}
	if err := h.Reset(nil); err != nil || len(h.Entries()) != 0 {
		t.Fatal("Reset(nil)", err)
	}
}

func TestPersistenceAcrossReopen(t *testing.T) {
	h, path := openTemp(t)
	for _, e := range []Entry{{1, 0}, {2, 4096}, {5, 1 << 33}} {
		if err := h.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	h2, err := Open(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h2.Entries(), h.Entries()) {
		t.Fatalf("reopened %v, want %v", h2.Entries(), h.Entries())
	}
	if h2.Path() != path {
		t.Fatal("Path")
	}
	// A leftover temp file is ignored.
	if err := os.WriteFile(path+".tmp", []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	h3, err := Open(vfs.OS, path)
	if err != nil || !reflect.DeepEqual(h3.Entries(), h.Entries()) {
		t.Fatal("temp file disturbed Open:", err)
	}
}

func TestOpenCorruptFile(t *testing.T) {
	h, path := openTemp(t)
	for _, e := range []Entry{{1, 0}, {2, 100}} {
		if err := h.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Flip one digit of an entry: the CRC must catch it.
	bad := []byte(strings.Replace(string(data), "2-100", "2-109", 1))
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(vfs.OS, path)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Open of a corrupt file = %v; want ErrCorrupt naming %s and the checksum", err, path)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(vfs.OS, path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of an empty file = %v", err)
	}
}
