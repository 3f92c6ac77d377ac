package core

import (
	"reflect"
	"testing"

	"github.com/keelmq/keel/core/vfs"
)

// overwrite writes b at off of the segment file path (durably).
func overwrite(t testing.TB, fs vfs.FS, path string, off int64, b []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestRepairDryRunAgreesWithRepair damages one record in an old segment of
// a closed store in several ways and checks that the dry run reports
// exactly what the real repair then cuts: the cut offset, the bytes from
// it to the log's end, and the records lost, against what the test wrote;
// that dry run and repair return the same plan; and that the repaired
// store opens with every record before the damage and none after.
func TestRepairDryRunAgreesWithRepair(t *testing.T) {
	const total, bad = 1500, 200 // ~4 segments of 64 KiB; bad is in the first
	cases := []struct {
		name   string
		damage func(t *testing.T, fs vfs.FS, path string, rel int64)
		// lost is how many records the plan reports past bad-1.
		lost int
	}{
		{"body CRC", func(t *testing.T, fs vfs.FS, path string, rel int64) {
			flipByte(t, fs, path, rel+89) // in the body: only the CRC fails
		}, total - bad},
		{"TOTALSIZE", func(t *testing.T, fs vfs.FS, path string, rel int64) {
			overwrite(t, fs, path, rel, []byte{0x7f, 0xff, 0xff, 0xf0}) // its extent is unknown
		}, total - bad},
		{"two records overwritten", func(t *testing.T, fs vfs.FS, path string, rel int64) {
			junk := make([]byte, 200) // the record (~140 B) and the next one's head
			for i := range junk {
				junk[i] = 0xEE
			}
			overwrite(t, fs, path, rel, junk)
		}, total - bad - 1}, // one damaged stretch counts as one record
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewCrashFS(int64(100 + i))
			o := testOptions(fs, "/rp")
			s := mustOpen(t, o)
			recs := appendN(t, s, total, "r")
			if _, err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			end := s.Positions().Committed
			if end != recs[total-1].End() {
				t.Fatalf("log end %d, last record ends at %d", end, recs[total-1].End())
			}
			path := s.segmentFor(recs[bad].PhysOffset).path
			if s.segmentFor(recs[total-1].PhysOffset).path == path {
				t.Fatal("the test needs the damage in an old segment")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			c.damage(t, fs, path, recs[bad].PhysOffset%o.SegmentSize)

			dry, err := Repair(o, true)
			if err != nil {
				t.Fatal(err)
			}
			cut := recs[bad].PhysOffset
			if dry.CutAt != cut || dry.File != path || dry.LogEnd != end || dry.BytesCut != end-cut || dry.RecordsCut != c.lost {
				t.Fatalf("dry run %+v\nwant cut at %d in %s, log end %d, %d bytes, %d records", dry, cut, path, end, end-cut, c.lost)
			}
			if len(dry.SegmentsRemoved) == 0 {
				t.Fatalf("dry run removes no later segment: %+v", dry)
			}
			real, err := Repair(o, false)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dry, real) {
				t.Fatalf("dry run and repair disagree:\n dry  %+v\n real %+v", dry, real)
			}
			rep, err := Inspect(o.Dir, InspectOptions{FS: fs, CheckCRC: true})
			if err != nil {
				t.Fatal(err)
			}
			kept := 0
			for _, sg := range rep.Segments {
				kept += sg.Records
			}
			if rep.FirstBad != -1 || rep.LogEnd != cut || rep.LostRecords != 0 || kept != bad {
				t.Fatalf("after repair: first bad %d, log end %d (want %d), lost %d, %d records kept (want %d)",
					rep.FirstBad, rep.LogEnd, cut, rep.LostRecords, kept, bad)
			}
			if got := end - rep.LogEnd; got != real.BytesCut {
				t.Fatalf("the repair cut %d bytes, its plan said %d", got, real.BytesCut)
			}
			s = mustOpen(t, o)
			defer s.Close()
			if got := s.Positions().Committed; got != cut {
				t.Fatalf("after repair end %d want %d", got, cut)
			}
			for _, r := range recs[:bad] {
				if _, err := s.ReadRecord(r.PhysOffset); err != nil {
					t.Fatalf("record at %d before the damage: %v", r.PhysOffset, err)
				}
			}
			verifyStore(t, s)
		})
	}
}

// TestInspectIntactStore: no damage means FirstBad -1, LogEnd at the end
// of the last record and nothing lost; a repair has nothing to do.
func TestInspectIntactStore(t *testing.T) {
	fs := vfs.NewCrashFS(120)
	o := testOptions(fs, "/in")
	s := mustOpen(t, o)
	recs := appendN(t, s, 900, "i")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Inspect(o.Dir, InspectOptions{FS: fs, CheckCRC: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FirstBad != -1 || rep.LostRecords != 0 || rep.LogEnd != recs[len(recs)-1].End() || rep.End != rep.LogEnd {
		t.Fatalf("intact store: first bad %d lost %d log end %d end %d, want end %d",
			rep.FirstBad, rep.LostRecords, rep.LogEnd, rep.End, recs[len(recs)-1].End())
	}
	plan, err := Repair(o, true)
	if err != nil || plan.CutAt != -1 || plan.BytesCut != 0 || plan.RecordsCut != 0 {
		t.Fatalf("repair of an intact store: %v %+v", err, plan)
	}
}
