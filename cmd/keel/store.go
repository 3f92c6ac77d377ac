package main

import (
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
)

func cmdStoreInspect(args []string) error {
	fs := flag.NewFlagSet("store inspect", flag.ContinueOnError)
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
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	defer w.Flush()
	fmt.Fprintf(w, "store\t%s\n", rep.Dir)
	fmt.Fprintf(w, "segment size\t%d\n", rep.SegmentSize)
	fmt.Fprintf(w, "clean shutdown\t%v\n", !rep.AbortMarker)
	fmt.Fprintf(w, "log end (scanned)\t%d\n", rep.End)
	if rep.FirstBad >= 0 {
		fmt.Fprintf(w, "FIRST BAD RECORD\t%d: %s\n", rep.FirstBad, rep.FirstBadError)
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
	return nil
}

func cmdStoreRepair(args []string) error {
	fs := flag.NewFlagSet("store repair", flag.ContinueOnError)
	dry := fs.Bool("dry-run", false, "only list what would be cut")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: keel store repair [--dry-run] DIR")
	}
	plan, err := core.Repair(core.Options{Dir: pos[0]}, *dry)
	if err != nil {
		return err
	}
	if plan.CutAt < 0 {
		fmt.Println("no damaged record found: nothing to repair")
		return nil
	}
	verb := "cut"
	if *dry {
		verb = "would cut"
	}
	fmt.Printf("%s the log at offset %d in %s\n  reason: %s\n", verb, plan.CutAt, plan.File, plan.Reason)
	for _, f := range plan.SegmentsRemoved {
		fmt.Printf("  %s remove %s\n", verb, f)
	}
	fmt.Printf("  at most %d bytes of later records are lost\n", plan.BytesCut)
	return nil
}
