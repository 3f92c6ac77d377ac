package flushstrategies

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/keelmq/keel/core/vfs"
)

// BenchmarkSerialWriteVsMmap compares the serial durable-append rate of
// the two ways of putting a record into a fallocated segment before an
// fdatasync: pwrite (the ceiling probe) and a store into a shared mapping
// (what core does). Rounds alternate; it reports medians.
func BenchmarkSerialWriteVsMmap(b *testing.B) {
	rec := make([]byte, benchRecordSize(b))
	for i := range rec {
		rec[i] = byte(i*7 + 1)
	}
	dir := b.TempDir()
	open := func(name string) vfs.File {
		f, err := vfs.OS.Create(filepath.Join(dir, name))
		if err != nil {
			b.Fatal(err)
		}
		if err := f.Allocate(0, benchSegment); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		return f
	}
	fw, fm := open("w"), open("m")
	defer fw.Close()
	defer fm.Close()
	m, err := fm.Map(benchSegment)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	data := m.Bytes()
	var offW, offM int64
	var rw, rm []float64
	phase := 300 * time.Millisecond
	for r := 0; r < 9; r++ {
		n, t0 := 0, time.Now()
		for time.Since(t0) < phase {
			fw.WriteAt(rec, offW)
			fw.Datasync()
			offW += int64(len(rec))
			n++
		}
		rw = append(rw, float64(n)/time.Since(t0).Seconds())
		n, t0 = 0, time.Now()
		for time.Since(t0) < phase {
			copy(data[offM:], rec)
			fm.Datasync()
			offM += int64(len(rec))
			n++
		}
		rm = append(rm, float64(n)/time.Since(t0).Seconds())
	}
	b.ReportMetric(median(rw), "pwrite-syncs/s")
	b.ReportMetric(median(rm), "mmap-syncs/s")
	b.ReportMetric(0, "ns/op")
}
