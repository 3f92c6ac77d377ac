package cq

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmq/keel/core/meta"
	"github.com/keelmq/keel/core/vfs"
)

const testEPF = 8

func testOpts(fsys vfs.FS) Options {
	return Options{FS: fsys, EntriesPerFile: testEPF, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func openTest(t testing.TB, fsys vfs.FS, root string) *Queue {
	t.Helper()
	q, err := OpenQueue(testOpts(fsys), root, "TopicA", 3)
	if err != nil {
		t.Fatalf("OpenQueue: %v", err)
	}
	return q
}

// ent is the i-th entry of a simple stream: records of 100+i%7 bytes laid
// end to end starting at commitlog offset 1000.
func ent(i int64) Entry {
	off := int64(1000)
	for j := int64(0); j < i; j++ {
		off += 100 + j%7
	}
	return Entry{Offset: off, Size: int32(100 + i%7), TagsCode: i * 31}
}

// stream returns entries [from, to) of ent.
func stream(from, to int64) []Entry {
	var out []Entry
	for i := from; i < to; i++ {
		out = append(out, ent(i))
	}
	return out
}

func mustPut(t testing.TB, q *Queue, qo int64, e Entry) {
	t.Helper()
	if err := q.Put(qo, e); err != nil {
		t.Fatalf("Put(%d, %+v): %v", qo, e, err)
	}
}

func putRange(t testing.TB, q *Queue, from, to int64) {
	t.Helper()
	for i := from; i < to; i++ {
		mustPut(t, q, i, ent(i))
	}
}

func checkState(t testing.TB, q *Queue, min, max, maxPhys int64) {
	t.Helper()
	if got := q.Min(); got != min {
		t.Errorf("Min() = %d, want %d", got, min)
	}
	if got := q.Max(); got != max {
		t.Errorf("Max() = %d, want %d", got, max)
	}
	if got := q.MaxPhysOffset(); got != maxPhys {
		t.Errorf("MaxPhysOffset() = %d, want %d", got, maxPhys)
	}
}

func checkEntries(t testing.TB, q *Queue, from int64, want []Entry) {
	t.Helper()
	got, err := q.Get(from, len(want)+5, nil)
	if err != nil {
		t.Fatalf("Get(%d): %v", from, err)
	}
	if len(got) != len(want) {
		t.Fatalf("Get(%d) returned %d entries, want %d", from, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("entry %d = %+v, want %+v", from+int64(i), got[i], want[i])
		}
		e, err := q.At(from + int64(i))
		if err != nil || e != want[i] {
			t.Fatalf("At(%d) = %+v, %v; want %+v", from+int64(i), e, err, want[i])
		}
	}
}

func listFiles(t testing.TB, fsys vfs.FS, dir string) []string {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir(%s): %v", dir, err)
	}
	return names
}

func fileName(start int64) string { return fmt.Sprintf("%020d", start*EntrySize) }

func TestValidateTopic(t *testing.T) {
	for _, tc := range []struct {
		topic string
		ok    bool
	}{
		{"TopicA", true},
		{"%RETRY%group-1", true},
		{"%DLQ%g", true},
		{"a_c-d|e", true},
		{"a.b", false}, // RocketMQ's rule has no '.'
		{strings.Repeat("x", meta.MaxTopicNameLen), true},
		{strings.Repeat("x", meta.MaxTopicNameLen+1), false},
		{"", false},
		{".", false},
		{"..", false},
		{"a..b", false},
		{"a/b", false},
		{"a\\b", false},
		{"a\x00b", false},
	} {
		err := validateTopic(tc.topic)
		if (err == nil) != tc.ok {
			t.Errorf("validateTopic(%q) = %v, want ok=%v", tc.topic, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalidTopic) || !errors.Is(err, meta.ErrInvalid)) {
			t.Errorf("validateTopic(%q) error %v does not wrap ErrInvalidTopic and meta.ErrInvalid", tc.topic, err)
		}
		_, oerr := OpenQueue(testOpts(vfs.OS), t.TempDir(), tc.topic, 0)
		if (oerr == nil) != tc.ok {
			t.Errorf("OpenQueue(%q) = %v, want ok=%v", tc.topic, oerr, tc.ok)
		}
	}
	for _, id := range []int32{-1, MaxQueueID + 1} {
		if _, err := OpenQueue(testOpts(vfs.OS), t.TempDir(), "t", id); !errors.Is(err, ErrInvalidQueueID) {
			t.Errorf("OpenQueue id %d: %v, want ErrInvalidQueueID", id, err)
		}
	}
	if _, err := OpenQueue(testOpts(vfs.OS), t.TempDir(), "t", MaxQueueID); err != nil {
		t.Errorf("OpenQueue id %d: %v", MaxQueueID, err)
	}
}

func TestEntryCodec(t *testing.T) {
	for _, e := range []Entry{{}, {1, 2, 3}, {math.MaxInt64, math.MaxInt32, math.MinInt64}, blankEntry, {-1, -1, -1}} {
		var b [EntrySize]byte
		encodeEntry(b[:], e)
		if got := decodeEntry(b[:]); got != e {
			t.Errorf("round trip %+v = %+v", e, got)
		}
	}
	var b [EntrySize]byte
	encodeEntry(b[:], Entry{Offset: 0x0102030405060708, Size: 0x090a0b0c, TagsCode: 0x0d0e0f1011121314})
	want := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	if string(b[:]) != string(want) {
		t.Errorf("encoding % x, want big-endian % x", b, want)
	}
}

// step is one operation of a table test.
type step struct {
	qo      int64
	e       Entry
	wantErr error // nil: success
}

func TestPut(t *testing.T) {
	e := stream(0, 40)
	big := ent(39)
	for _, tc := range []struct {
		name              string
		steps             []step
		min, max, maxPhys int64
		readFrom          int64
		want              []Entry
		files             []string
	}{
		{
			name:  "append from zero",
			steps: []step{{0, e[0], nil}, {1, e[1], nil}, {2, e[2], nil}},
			min:   0, max: 3, maxPhys: e[2].End(),
			readFrom: 0, want: e[0:3],
			files: []string{fileName(0)},
		},
		{
			name: "rollover at file boundary",
			steps: func() []step {
				var s []step
				for i := int64(0); i < 17; i++ {
					s = append(s, step{i, e[i], nil})
				}
				return s
			}(),
			min: 0, max: 17, maxPhys: e[16].End(),
			readFrom: 0, want: e[0:17],
			files: []string{fileName(0), fileName(8), fileName(16)},
		},
		{
			name:  "exactly one full file creates no next file",
			steps: []step{{0, e[0], nil}, {1, e[1], nil}, {2, e[2], nil}, {3, e[3], nil}, {4, e[4], nil}, {5, e[5], nil}, {6, e[6], nil}, {7, e[7], nil}},
			min:   0, max: 8, maxPhys: e[7].End(),
			readFrom: 0, want: e[0:8],
			files: []string{fileName(0)},
		},
		{
			name:  "idempotent replays are skipped",
			steps: []step{{0, e[0], nil}, {1, e[1], nil}, {0, e[0], nil}, {1, e[1], nil}, {7, e[0], nil}, {2, e[2], nil}, {2, e[2], nil}},
			min:   0, max: 3, maxPhys: e[2].End(),
			readFrom: 0, want: e[0:3],
			files: []string{fileName(0)},
		},
		{
			name:  "gap on non-empty queue is an error",
			steps: []step{{0, e[0], nil}, {2, e[1], ErrQueueOffsetMismatch}, {1, e[1], nil}},
			min:   0, max: 2, maxPhys: e[1].End(),
			readFrom: 0, want: e[0:2],
			files: []string{fileName(0)},
		},
		{
			name:  "going back without idempotence is an error",
			steps: []step{{0, e[0], nil}, {1, e[1], nil}, {1, e[2], ErrQueueOffsetMismatch}, {0, e[2], ErrQueueOffsetMismatch}},
			min:   0, max: 2, maxPhys: e[1].End(),
			readFrom: 0, want: e[0:2],
			files: []string{fileName(0)},
		},
		{
			name:  "pre-blank when starting mid-file",
			steps: []step{{13, e[13], nil}, {14, e[14], nil}},
			min:   13, max: 15, maxPhys: e[14].End(),
			readFrom: 13, want: e[13:15],
			files: []string{fileName(8)},
		},
		{
			name:  "start at a file boundary needs no blanks",
			steps: []step{{16, e[16], nil}},
			min:   16, max: 17, maxPhys: e[16].End(),
			readFrom: 16, want: e[16:17],
			files: []string{fileName(16)},
		},
		{
			name:  "mid-stream start then rollover",
			steps: []step{{6, e[6], nil}, {7, e[7], nil}, {8, e[8], nil}, {9, e[9], nil}},
			min:   6, max: 10, maxPhys: e[9].End(),
			readFrom: 6, want: e[6:10],
			files: []string{fileName(0), fileName(8)},
		},
		{
			name: "invalid entries",
			steps: []step{
				{0, Entry{Offset: -1, Size: 10}, ErrInvalidEntry},
				{0, Entry{Offset: 5, Size: 0}, ErrInvalidEntry},
				{0, Entry{Offset: 5, Size: -3}, ErrInvalidEntry},
				{0, Entry{Offset: 5, Size: math.MaxInt32}, ErrInvalidEntry},
				{0, e[1], nil},
				{1, Entry{Offset: e[1].Offset + 1, Size: 1000}, ErrInvalidEntry}, // overlaps the last record
				{-1, e[2], ErrQueueOffsetMismatch},
			},
			min: 0, max: 1, maxPhys: e[1].End(),
			readFrom: 0, want: e[1:2],
			files: []string{fileName(0)},
		},
		{
			name:  "negative first queue offset",
			steps: []step{{-5, big, ErrQueueOffsetMismatch}, {0, big, nil}},
			min:   0, max: 1, maxPhys: big.End(),
			readFrom: 0, want: []Entry{big},
			files: []string{fileName(0)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			q := openTest(t, vfs.OS, root)
			defer q.Close()
			for i, s := range tc.steps {
				err := q.Put(s.qo, s.e)
				if s.wantErr == nil && err != nil {
					t.Fatalf("step %d: Put(%d): %v", i, s.qo, err)
				}
				if s.wantErr != nil && !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d: Put(%d) = %v, want %v", i, s.qo, err, s.wantErr)
				}
			}
			checkState(t, q, tc.min, tc.max, tc.maxPhys)
			checkEntries(t, q, tc.readFrom, tc.want)
			got := listFiles(t, vfs.OS, q.Dir())
			if strings.Join(got, ",") != strings.Join(tc.files, ",") {
				t.Errorf("files %v, want %v", got, tc.files)
			}
			for _, n := range got {
				st, err := vfs.OS.Stat(filepath.Join(q.Dir(), n))
				if err != nil || st.Size() != testEPF*EntrySize {
					t.Errorf("file %s: size %v err %v, want %d", n, st.Size(), err, testEPF*EntrySize)
				}
			}
			// Reopen recovers the same state.
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			q2 := openTest(t, vfs.OS, root)
			defer q2.Close()
			checkState(t, q2, tc.min, tc.max, tc.maxPhys)
			checkEntries(t, q2, tc.readFrom, tc.want)
		})
	}
}

func TestQueueDirLayout(t *testing.T) {
	root := t.TempDir()
	q, err := OpenQueue(testOpts(vfs.OS), root, "%RETRY%group", 65535)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if want := filepath.Join(root, "%RETRY%group", "65535"); q.Dir() != want {
		t.Fatalf("Dir() = %s, want %s", q.Dir(), want)
	}
	if _, err := vfs.OS.Stat(q.Dir()); err == nil {
		t.Fatalf("directory created before the first Put")
	}
	mustPut(t, q, 0, ent(0))
	if got := listFiles(t, vfs.OS, q.Dir()); len(got) != 1 || got[0] != "00000000000000000000" {
		t.Fatalf("files %v", got)
	}
	if q.Topic() != "%RETRY%group" || q.QueueID() != 65535 {
		t.Fatalf("Topic/QueueID = %s/%d", q.Topic(), q.QueueID())
	}
}

func TestBlanksOnDisk(t *testing.T) {
	root := t.TempDir()
	q := openTest(t, vfs.OS, root)
	mustPut(t, q, 11, ent(11))
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := vfs.OS.Open(filepath.Join(root, "TopicA", "3", fileName(8)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, testEPF*EntrySize)
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if got := decodeEntry(buf[i*EntrySize:]); got != (Entry{0, math.MaxInt32, 0}) {
			t.Errorf("unit %d = %+v, want blank", i, got)
		}
	}
	if got := decodeEntry(buf[3*EntrySize:]); got != ent(11) {
		t.Errorf("unit 3 = %+v", got)
	}
	if !allZero(buf[4*EntrySize:]) {
		t.Errorf("bytes after the last entry are not zero")
	}
}

func TestReadErrors(t *testing.T) {
	q := openTest(t, vfs.OS, t.TempDir())
	defer q.Close()
	// Empty queue.
	if got, err := q.Get(0, 10, nil); err != nil || len(got) != 0 {
		t.Fatalf("Get(0) on empty = %v, %v", got, err)
	}
	if _, err := q.At(0); !errors.Is(err, ErrOffsetOverflow) {
		t.Fatalf("At(0) on empty: %v", err)
	}
	putRange(t, q, 5, 20) // file starts at 0 with 5 blanks
	for _, tc := range []struct {
		off     int64
		limit   int
		want    []Entry
		wantErr error
	}{
		{4, 1, nil, ErrOffsetTooSmall}, // a blank
		{0, 1, nil, ErrOffsetTooSmall},
		{-1, 1, nil, ErrOffsetTooSmall},
		{21, 1, nil, ErrOffsetOverflow},
		{20, 5, nil, nil}, // caught up
		{5, 3, stream(5, 8), nil},
		{6, 4, stream(6, 10), nil},   // crosses the boundary at 8
		{5, 100, stream(5, 20), nil}, // crosses two boundaries, stops at max
		{19, 10, stream(19, 20), nil},
		{10, 0, nil, nil},
	} {
		got, err := q.Get(tc.off, tc.limit, nil)
		if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Errorf("Get(%d,%d) err = %v, want %v", tc.off, tc.limit, err, tc.wantErr)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Get(%d,%d) = %v, want %v", tc.off, tc.limit, got, tc.want)
		}
	}
	if _, err := q.At(20); !errors.Is(err, ErrOffsetOverflow) {
		t.Errorf("At(max): %v", err)
	}
	if _, err := q.At(4); !errors.Is(err, ErrOffsetTooSmall) {
		t.Errorf("At(blank): %v", err)
	}
	// Get appends to dst.
	dst := []Entry{{Offset: 1}}
	dst, err := q.Get(5, 2, dst)
	if err != nil || len(dst) != 3 || dst[0].Offset != 1 || dst[1] != ent(5) {
		t.Errorf("Get appending: %v, %v", dst, err)
	}
}

func TestTruncatePhys(t *testing.T) {
	for _, tc := range []struct {
		name       string
		first, n   int64 // queue holds entries [first, n)
		phys       int64 // truncate at the Offset of entry cut (or a raw value if cut < 0)
		cut        int64
		wantMax    int64
		wantFiles  int
		wantMaxPhy int64
	}{
		{name: "middle of last file", first: 0, n: 20, cut: 18, wantMax: 18, wantFiles: 3},
		{name: "middle of an earlier file", first: 0, n: 20, cut: 5, wantMax: 5, wantFiles: 1},
		{name: "at a file boundary", first: 0, n: 20, cut: 16, wantMax: 16, wantFiles: 2},
		{name: "at second file boundary", first: 0, n: 20, cut: 8, wantMax: 8, wantFiles: 1},
		{name: "one entry left", first: 0, n: 20, cut: 1, wantMax: 1, wantFiles: 1},
		{name: "everything", first: 0, n: 20, cut: 0, wantMax: 0, wantFiles: 0},
		{name: "everything after blanks", first: 5, n: 20, cut: 5, wantMax: 0, wantFiles: 0},
		{name: "keeps blanks and one entry", first: 5, n: 20, cut: 6, wantMax: 6, wantFiles: 1},
		{name: "beyond the end is a no-op", first: 0, n: 20, cut: -1, phys: 1 << 40, wantMax: 20, wantFiles: 3},
		{name: "at the end is a no-op", first: 0, n: 20, cut: -1, phys: ent(19).End(), wantMax: 20, wantFiles: 3},
		{name: "inside the last record drops it", first: 0, n: 20, cut: -1, phys: ent(19).Offset + 1, wantMax: 20, wantFiles: 3},
		{name: "between records", first: 0, n: 20, cut: -1, phys: ent(11).Offset - 1, wantMax: 11, wantFiles: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			q := openTest(t, vfs.OS, root)
			putRange(t, q, tc.first, tc.n)
			if err := q.Flush(); err != nil {
				t.Fatal(err)
			}
			phys := tc.phys
			if tc.cut >= 0 {
				phys = ent(tc.cut).Offset
			}
			if err := q.TruncatePhys(phys); err != nil {
				t.Fatal(err)
			}
			check := func(q *Queue) {
				t.Helper()
				wantMin, wantPhys := tc.first, int64(0)
				if tc.wantMax == 0 {
					wantMin = 0
				} else {
					wantPhys = ent(tc.wantMax - 1).End()
				}
				checkState(t, q, wantMin, tc.wantMax, wantPhys)
				if tc.wantMax > 0 {
					checkEntries(t, q, tc.first, stream(tc.first, tc.wantMax))
				}
				names, _ := vfs.OS.ReadDir(q.Dir())
				if len(names) != tc.wantFiles {
					t.Errorf("files %v, want %d", names, tc.wantFiles)
				}
				if q.FlushedOffset() > q.Max() {
					t.Errorf("flushed %d beyond max %d", q.FlushedOffset(), q.Max())
				}
			}
			check(q)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			q = openTest(t, vfs.OS, root)
			check(q)
			// Dispatch resumes after the cut: re-put the dropped entries
			// (or, for an emptied queue, start anywhere).
			resume := tc.wantMax
			if resume == 0 {
				resume = tc.first
			}
			putRange(t, q, resume, tc.n+3)
			checkEntries(t, q, tc.first, stream(tc.first, tc.n+3))
			q.Close()
		})
	}
}

func TestTruncateToEmptyThenStartElsewhere(t *testing.T) {
	q := openTest(t, vfs.OS, t.TempDir())
	defer q.Close()
	putRange(t, q, 3, 12)
	if err := q.TruncatePhys(0); err != nil {
		t.Fatal(err)
	}
	checkState(t, q, 0, 0, 0)
	// A different start is accepted once the queue is empty.
	mustPut(t, q, 30, ent(30))
	checkState(t, q, 30, 31, ent(30).End())
}

func TestSetMinPhysOffset(t *testing.T) {
	root := t.TempDir()
	q := openTest(t, vfs.OS, root)
	putRange(t, q, 3, 30) // files 0, 8, 16, 24; entries 3..29
	checkState(t, q, 3, 30, ent(29).End())

	steps := []struct {
		minPhys     int64
		wantDeleted int
		wantMin     int64
		wantFiles   []string
	}{
		{0, 0, 3, []string{fileName(0), fileName(8), fileName(16), fileName(24)}},
		{ent(5).Offset, 0, 5, []string{fileName(0), fileName(8), fileName(16), fileName(24)}},
		{ent(7).Offset + 1, 0, 8, []string{fileName(0), fileName(8), fileName(16), fileName(24)}}, // inside entry 7: it ends beyond
		{ent(7).End(), 1, 8, []string{fileName(8), fileName(16), fileName(24)}},
		{ent(5).Offset, 0, 8, []string{fileName(8), fileName(16), fileName(24)}}, // Min never goes back
		{ent(20).Offset, 1, 20, []string{fileName(16), fileName(24)}},
		{ent(29).End(), 1, 30, []string{fileName(24)}}, // never the last file; nothing readable
	}
	for i, s := range steps {
		n, err := q.SetMinPhysOffset(s.minPhys)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if n != s.wantDeleted {
			t.Errorf("step %d: deleted %d, want %d", i, n, s.wantDeleted)
		}
		if q.Min() != s.wantMin {
			t.Errorf("step %d: Min() = %d, want %d", i, q.Min(), s.wantMin)
		}
		if got := listFiles(t, vfs.OS, q.Dir()); strings.Join(got, ",") != strings.Join(s.wantFiles, ",") {
			t.Errorf("step %d: files %v, want %v", i, got, s.wantFiles)
		}
		if _, err := q.At(s.wantMin - 1); s.wantMin > 0 && !errors.Is(err, ErrOffsetTooSmall) {
			t.Errorf("step %d: At(min-1): %v", i, err)
		}
	}
	if q.Max() != 30 || q.MaxPhysOffset() != ent(29).End() {
		t.Fatalf("retention changed Max/MaxPhys: %d %d", q.Max(), q.MaxPhysOffset())
	}
	// New entries become readable from Min on.
	putRange(t, q, 30, 35)
	checkEntries(t, q, 30, stream(30, 35))
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen: Min is recomputed from the files; the caller reapplies the
	// commitlog minimum.
	q = openTest(t, vfs.OS, root)
	defer q.Close()
	if q.Min() != 24 || q.Max() != 35 {
		t.Fatalf("after reopen Min %d Max %d", q.Min(), q.Max())
	}
	if _, err := q.SetMinPhysOffset(ent(29).End()); err != nil {
		t.Fatal(err)
	}
	if q.Min() != 30 {
		t.Fatalf("after reapplying min: Min() = %d", q.Min())
	}
	// Truncating below Min leaves nothing readable.
	if err := q.TruncatePhys(ent(26).Offset); err != nil {
		t.Fatal(err)
	}
	checkState(t, q, 26, 26, ent(25).End())
}

func TestSearchTime(t *testing.T) {
	q := openTest(t, vfs.OS, t.TempDir())
	defer q.Close()
	putRange(t, q, 2, 40)
	// Store time of entry i: 1000 + 10*(i/2) (pairs share a timestamp).
	calls := 0
	storeTime := func(e Entry) (int64, error) {
		calls++
		i := e.TagsCode / 31
		return 1000 + 10*(i/2), nil
	}
	for _, tc := range []struct{ ts, want int64 }{
		{0, 2},
		{1000, 2},
		{1010, 2},
		{1011, 4},
		{1020, 4},
		{1100, 20},
		{1105, 22},
		{1190, 38},
		{1191, 40},
		{99999, 40},
	} {
		calls = 0
		got, err := q.SearchTime(tc.ts, storeTime)
		if err != nil || got != tc.want {
			t.Errorf("SearchTime(%d) = %d, %v; want %d", tc.ts, got, err, tc.want)
		}
		if calls > 7 {
			t.Errorf("SearchTime(%d) read %d entries, want O(log n)", tc.ts, calls)
		}
	}
	boom := errors.New("boom")
	if _, err := q.SearchTime(1050, func(Entry) (int64, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("storeTime error not returned: %v", err)
	}
	// After retention the search starts at Min.
	if _, err := q.SetMinPhysOffset(ent(17).Offset); err != nil {
		t.Fatal(err)
	}
	if got, _ := q.SearchTime(0, storeTime); got != 17 {
		t.Errorf("SearchTime(0) after retention = %d, want 17", got)
	}
	empty := openTest(t, vfs.OS, t.TempDir())
	defer empty.Close()
	if got, err := empty.SearchTime(5, storeTime); err != nil || got != 0 {
		t.Errorf("SearchTime on empty = %d, %v", got, err)
	}
}

func TestClosed(t *testing.T) {
	q := openTest(t, vfs.OS, t.TempDir())
	putRange(t, q, 0, 3)
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	if err := q.Put(3, ent(3)); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close: %v", err)
	}
	if _, err := q.Get(0, 1, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v", err)
	}
	if _, err := q.At(0); !errors.Is(err, ErrClosed) {
		t.Errorf("At after Close: %v", err)
	}
	if err := q.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
	if err := q.TruncatePhys(0); !errors.Is(err, ErrClosed) {
		t.Errorf("TruncatePhys after Close: %v", err)
	}
	if _, err := q.SetMinPhysOffset(0); !errors.Is(err, ErrClosed) {
		t.Errorf("SetMinPhysOffset after Close: %v", err)
	}
}

func TestFlushTracksPosition(t *testing.T) {
	q := openTest(t, vfs.OS, t.TempDir())
	defer q.Close()
	if q.FlushedOffset() != 0 {
		t.Fatalf("flushed %d", q.FlushedOffset())
	}
	putRange(t, q, 0, 11)
	if q.FlushedOffset() != 0 {
		t.Fatalf("flushed %d before Flush", q.FlushedOffset())
	}
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	if q.FlushedOffset() != 11 {
		t.Fatalf("flushed %d, want 11", q.FlushedOffset())
	}
	if err := q.TruncatePhys(ent(4).Offset); err != nil {
		t.Fatal(err)
	}
	if q.FlushedOffset() != 4 {
		t.Fatalf("flushed %d after truncate, want 4", q.FlushedOffset())
	}
}

func TestCheckOffset(t *testing.T) {
	q := openTest(t, vfs.OS, t.TempDir())
	defer q.Close()
	type res struct {
		st   OffsetStatus
		next int64
	}
	check := func(off int64, want res) {
		t.Helper()
		st, next := q.CheckOffset(off)
		if (res{st, next}) != want {
			t.Errorf("CheckOffset(%d) = %v, %d; want %v, %d", off, st, next, want.st, want.next)
		}
	}
	check(0, res{NoMessageInQueue, 0})
	check(7, res{NoMessageInQueue, 0})
	putRange(t, q, 5, 20)
	if _, err := q.SetMinPhysOffset(ent(9).Offset); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		off  int64
		want res
	}{
		{0, res{OffsetTooSmall, 9}},
		{5, res{OffsetTooSmall, 9}},
		{8, res{OffsetTooSmall, 9}},
		{9, res{OffsetFound, 9}},
		{19, res{OffsetFound, 19}},
		{20, res{OffsetOverflowOne, 20}},
		{21, res{OffsetOverflowBadly, 20}},
		{1 << 40, res{OffsetOverflowBadly, 20}},
	} {
		check(tc.off, tc.want)
	}
	if OffsetOverflowBadly.String() != "OFFSET_OVERFLOW_BADLY" || OffsetStatus(99).String() != "OffsetStatus(99)" {
		t.Error("String")
	}
}
