package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/host/storelock"
)

// errDamaged is returned by `keel store inspect` when it found a damaged
// record, so that the command exits non-zero.
type errDamaged struct {
	offset int64
	reason string
	dir    string
}

func (e *errDamaged) Error() string {
	return fmt.Sprintf("damaged record at offset %d (%s); see `keel store repair --dry-run %s`", e.offset, e.reason, e.dir)
}

const storeInspectHelp = `usage: keel store inspect [--records N] [--from OFFSET] [--crc] DIR

Reads a store directory without changing it: segments, checkpoint, epochs,
consume queues, optionally records. With --crc every body CRC is checked.

Exit status:
  0  no damaged record found
  1  a damaged record was found (the report names it, as FIRST BAD RECORD,
     and what a repair would cut), or the store could not be read
`

func (a *app) storeInspect(args []string) error {
	fs := flag.NewFlagSet("store inspect", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), storeInspectHelp)
		fs.PrintDefaults()
	}
	n := fs.Int("records", 0, "decode and print `N` records")
	from := fs.Int64("from", 0, "first record's physical `offset` (default: the log minimum)")
	crc := fs.Bool("crc", false, "verify body CRCs while scanning")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: keel store inspect [--records N] [--from OFFSET] [--crc] DIR")
	}
	rep, err := core.Inspect(pos[0], core.InspectOptions{DumpRecords: *n, DumpFrom: *from, CheckCRC: *crc})
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintf(w, "store\t%s\n", rep.Dir)
	fmt.Fprintf(w, "segment size\t%d\n", rep.SegmentSize)
	fmt.Fprintf(w, "clean shutdown\t%v\n", !rep.AbortMarker)
	fmt.Fprintf(w, "log end (scanned)\t%d\n", rep.End)
	if rep.FirstBad >= 0 {
		fmt.Fprintf(w, "FIRST BAD RECORD\t%d: %s\n", rep.FirstBad, rep.FirstBadError)
		fmt.Fprintf(w, "log end (past the damage)\t%d\n", rep.LogEnd)
		fmt.Fprintf(w, "a repair would cut\t%d bytes, %d records\n", rep.LogEnd-rep.FirstBad, rep.LostRecords)
	}
	if c := rep.Checkpoint; c != nil {
		fmt.Fprintf(w, "checkpoint\tseq=%d flushed=%d dispatched=%d confirm=%d min=%d phys_ts=%d logics_ts=%d\n",
			c.Seq, c.Flushed, c.Dispatched, c.Confirm, c.Min, c.PhysTs, c.LogicsTs)
	} else {
		fmt.Fprintf(w, "checkpoint\tnone\n")
	}
	fmt.Fprintf(w, "epochs\t%v\n", rep.Epochs)
	fmt.Fprintln(w, "\nsegment\tstart\trecords\tbytes")
	for _, s := range rep.Segments {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", s.File, s.Start, s.Records, s.Bytes)
	}
	fmt.Fprintln(w, "\ntopic\tqueue\tmin\tmax")
	for _, q := range rep.Queues {
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\n", q.Topic, q.QueueID, q.Min, q.Max)
	}
	if len(rep.Records) > 0 {
		fmt.Fprintln(w, "\nphys\tsize\ttopic\tqueue\tqoffset\tstored\tmsgid\tproperties\tbody")
		for _, r := range rep.Records {
			props, _ := record.ParseProperties(r.Properties)
			body := string(r.Body)
			if len(body) > 64 {
				body = body[:64] + "…"
			}
			if r.SysFlag&record.SysFlagCompressed != 0 {
				body = fmt.Sprintf("(compressed, %d bytes)", len(r.Body))
			}
			fmt.Fprintf(w, "%d\t%d\t%s\t%d\t%d\t%d\t%s\t%v\t%q\n", r.PhysOffset, r.TotalSize, r.Topic, r.QueueID, r.QueueOffset,
				r.StoreTimestamp, record.OffsetMsgID(r.StoreHost, r.PhysOffset), props, body)
		}
	}
	if rep.FirstBad >= 0 {
		return &errDamaged{offset: rep.FirstBad, reason: rep.FirstBadError, dir: pos[0]}
	}
	return nil
}

const storeRepairHelp = `usage: keel store repair [--dry-run] DIR

Finds the first damaged record of a closed store (checking CRCs) and cuts
the log there: the rest of its segment is zeroed, later segments are
removed, consume queues and the checkpoint follow. Everything from the
damaged record to the end of the log is lost; --dry-run prints exactly
that (bytes and records) and changes nothing.

Exit status:
  0  nothing to repair, the plan was printed (--dry-run), or the repair was done
  1  the store could not be read or repaired
`

func (a *app) storeRepair(args []string) error {
	fs := flag.NewFlagSet("store repair", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), storeRepairHelp)
		fs.PrintDefaults()
	}
	dry := fs.Bool("dry-run", false, "only list what would be cut")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: keel store repair [--dry-run] DIR")
	}
	// A repair under a running broker would cut a log it is writing: hold
	// the store's lock, as `keel serve` does, for the whole repair. A
	// directory with no commitlog is left to core.Repair to refuse (no
	// lock file is created in it).
	if fi, err := os.Stat(filepath.Join(pos[0], core.CommitlogDir)); err == nil && fi.IsDir() {
		lock, err := storelock.Acquire(pos[0])
		var inUse *storelock.InUseError
		switch {
		case errors.As(err, &inUse):
			return fmt.Errorf("keel store repair: %v: stop it first (a repair under a running broker would cut the log it is writing)", err)
		case err != nil:
			return fmt.Errorf("keel store repair: %w", err)
		}
		defer lock.Release()
	}
	plan, err := core.Repair(core.Options{Dir: pos[0]}, *dry)
	if err != nil {
		return err
	}
	if plan.RebuildCheckpoint {
		verb := "rebuilt"
		if *dry {
			verb = "would rebuild"
		}
		fmt.Fprintf(a.stdout, "the checkpoint was unreadable: %s it from a full CRC scan (flushed at the repaired end; the next start re-dispatches the whole log)\n", verb)
	}
	if plan.CutAt < 0 {
		fmt.Fprintln(a.stdout, "no damaged record found: no log bytes to cut")
		return nil
	}
	cut, remove, lose := "cut", "removed", "are lost"
	if *dry {
		cut, remove, lose = "would cut", "would remove", "would be lost"
	}
	fmt.Fprintf(a.stdout, "%s the log at offset %d in %s\n  reason: %s\n", cut, plan.CutAt, plan.File, plan.Reason)
	for _, f := range plan.SegmentsRemoved {
		fmt.Fprintf(a.stdout, "  %s %s\n", remove, f)
	}
	fmt.Fprintf(a.stdout, "  %d bytes (%d records) %s: offsets %d to %d, the damaged record and everything after it\n",
		plan.BytesCut, plan.RecordsCut, lose, plan.CutAt, plan.LogEnd)
	return nil
}
