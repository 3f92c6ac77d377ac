package cli

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/keelmq/keel/host/storelock"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

// damagedStore writes n records into a fresh store with 64 KiB segments,
// closes it, flips a byte in the body of record bad (in the first
// segment), and returns the directory, the records, and the log's end.
func damagedStore(t *testing.T, n, bad int) (string, []core.AppendResult, int64) {
	t.Helper()
	dir := t.TempDir()
	o := core.Options{Dir: dir, SegmentSize: 64 << 10, MaxMessageSize: 8 << 10, CQEntriesPerFile: 64,
		Retention: core.RetentionOptions{DiskMaxUsedRatio: 0.99, CleanForciblyRatio: 0.99, WarningRatio: 0.995}}
	s, err := core.Open(o)
	if err != nil {
		t.Fatal(err)
	}
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	var recs []core.AppendResult
	for i := 0; i < n; i++ {
		r, err := s.Append(&record.Message{Topic: "T", QueueID: int32(i % 2), Body: []byte(fmt.Sprintf("body-%d", i)),
			BornHost: host, StoreHost: host, BornTimestamp: 1})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	end := s.Positions().Committed
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if bad >= 0 {
		off := recs[bad].PhysOffset
		f, err := os.OpenFile(filepath.Join(dir, core.CommitlogDir, fmt.Sprintf("%020d", off/(64<<10)*(64<<10))), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		rel := off%(64<<10) + 89 // inside the body: a CRC mismatch
		if _, err := f.ReadAt(b, rel); err != nil {
			t.Fatal(err)
		}
		b[0] ^= 0x10
		if _, err := f.WriteAt(b, rel); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	return dir, recs, end
}

// runOut runs the keel command line with args and returns what it printed.
func runOut(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	err := Run(args, WithOutput(&buf))
	return buf.String(), err
}

// TestStoreInspectExitStatus: `keel store inspect --crc` fails (a non-zero
// exit) when it finds a damaged record and names it, and succeeds on an
// intact store.
func TestStoreInspectExitStatus(t *testing.T) {
	dir, recs, end := damagedStore(t, 1200, 150)
	out, err := runOut(t, "store", "inspect", "--crc", dir)
	var de *errDamaged
	if !errors.As(err, &de) || de.offset != recs[150].PhysOffset {
		t.Fatalf("inspect of a damaged store returned %v, want the damage at %d\n%s", err, recs[150].PhysOffset, out)
	}
	if !strings.Contains(out, "FIRST BAD RECORD") || !strings.Contains(err.Error(), strconv.FormatInt(recs[150].PhysOffset, 10)) {
		t.Fatalf("inspect output does not name the damage (err %v):\n%s", err, out)
	}
	if want := fmt.Sprintf("%d bytes, %d records", end-recs[150].PhysOffset, 1200-150); !strings.Contains(out, want) {
		t.Fatalf("inspect output lacks %q:\n%s", want, out)
	}

	clean, _, _ := damagedStore(t, 300, -1)
	if out, err := runOut(t, "store", "inspect", "--crc", clean); err != nil {
		t.Fatalf("inspect of an intact store: %v\n%s", err, out)
	}
}

var lostLine = regexp.MustCompile(`(\d+) bytes \((\d+) records\) (would be lost|are lost): offsets (\d+) to (\d+)`)

// TestStoreRepairDryRunReportsTheCut: the dry run prints exactly what the
// real repair cuts (bytes and records from the damaged record to the end
// of the log), the repair prints the same, and afterwards the store is
// intact and ends at the cut.
func TestStoreRepairDryRunReportsTheCut(t *testing.T) {
	const n, bad = 1200, 150
	dir, recs, end := damagedStore(t, n, bad)
	cut := recs[bad].PhysOffset
	dry, err := runOut(t, "store", "repair", "--dry-run", dir)
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, dry)
	}
	want := []string{strconv.FormatInt(end-cut, 10), strconv.Itoa(n - bad), "would be lost", strconv.FormatInt(cut, 10), strconv.FormatInt(end, 10)}
	m := lostLine.FindStringSubmatch(dry)
	if m == nil || !slices.Equal(m[1:], want) {
		t.Fatalf("dry run says %q, want %v:\n%s", m, want, dry)
	}
	real, err := runOut(t, "store", "repair", dir)
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, real)
	}
	want[2] = "are lost"
	if m := lostLine.FindStringSubmatch(real); m == nil || !slices.Equal(m[1:], want) {
		t.Fatalf("repair says %q, want %v:\n%s", m, want, real)
	}
	out, err := runOut(t, "store", "inspect", "--crc", dir)
	if err != nil || !strings.Contains(out, fmt.Sprintf("log end (scanned)  %d", cut)) {
		t.Fatalf("after repair: %v\n%s", err, out)
	}
}

// TestStoreRepairRefusesAStoreInUse: while another holder has the store's
// lock (as a running `keel serve` does), repair and its dry run refuse,
// naming the holder, and the log is left as it was; once the lock is
// released the repair runs.
func TestStoreRepairRefusesAStoreInUse(t *testing.T) {
	dir, recs, _ := damagedStore(t, 300, 100)
	lock, err := storelock.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	for _, args := range [][]string{{"store", "repair", dir}, {"store", "repair", "--dry-run", dir}} {
		out, err := runOut(t, args...)
		if err == nil || !strings.Contains(err.Error(), "in use by another keel process (pid "+pid+")") || !strings.Contains(err.Error(), "stop it first") {
			t.Fatalf("%v under a held lock: %v\n%s", args, err, out)
		}
	}
	out, err := runOut(t, "store", "inspect", "--crc", dir)
	var de *errDamaged
	if !errors.As(err, &de) || de.offset != recs[100].PhysOffset {
		t.Fatalf("the refused repair changed the store: inspect says %v\n%s", err, out)
	}
	lock.Release()
	if out, err := runOut(t, "store", "repair", dir); err != nil || !strings.Contains(out, "are lost") {
		t.Fatalf("repair after the lock was released: %v\n%s", err, out)
	}
}
