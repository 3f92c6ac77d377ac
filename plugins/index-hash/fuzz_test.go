package indexhash

import (
	"bytes"
	"testing"

	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/core/vfs"
	"github.com/keelmq/keel/sdk"
)

// FuzzCheckpoint: decoding never panics, and what decodes re-encodes to
// the same checkpoint.
func FuzzCheckpoint(f *testing.F) {
	c := checkpoint{seq: 3, slots: 7, hasFile: true, lastFile: 1700000000000, h: header{1, 2, 3, 4, 5, 6}, indexedEnd: 99}
	a := c.encode()
	c.seq, c.clean = 4, true
	f.Add(append(a, c.encode()...))
	f.Add(a)
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 256))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, ok := decodeCheckpointFile(b)
		if !ok {
			return
		}
		back, ok := decodeCheckpoint(c.encode())
		if !ok || back != c {
			t.Fatalf("round trip: %+v -> %+v (%v)", c, back, ok)
		}
	})
}

// FuzzOpen: an index directory holding arbitrary bytes as its checkpoint
// and last index file opens (or fails cleanly), and then queries, indexing,
// cutting back, syncing and stopping never panic or loop.
func FuzzOpen(f *testing.F) {
	// Seeds: a real directory's files, clean and not.
	fs := vfs.NewCrashFS(1)
	x, err := Open("/s", tinyConfig(3, 6), WithFS(fs), WithLogger(quiet))
	if err != nil {
		f.Fatal(err)
	}
	l := newTestLog()
	for i := range 8 {
		mustIndex(f, x, l.add(f, "T", "k"+itoa(i%3)+" z", "u", 0, 700))
	}
	name := x.Files()[len(x.Files())-1].Name
	x.Sync(ctx)
	dirty, _ := fs.DurableContents("/s/" + CheckpointFile)
	x.Stop(ctx)
	clean, _ := fs.DurableContents("/s/" + CheckpointFile)
	file, _ := fs.DurableContents("/s/" + name)
	f.Add(clean, file)
	f.Add(dirty, file)
	f.Add(clean, file[:len(file)-20])
	f.Add(clean, []byte{})
	f.Fuzz(func(t *testing.T, ck, file []byte) {
		c, ok := decodeCheckpointFile(ck)
		slots := 3
		if ok && c.slots >= 1 && c.slots <= 64 {
			slots = int(c.slots)
		}
		fs := vfs.NewCrashFS(1)
		fs.MkdirAll("/d", 0o755)
		write := func(name string, b []byte) {
			w, err := fs.Create("/d/" + name)
			if err != nil {
				t.Fatal(err)
			}
			w.WriteAt(b, 0)
			w.Close()
		}
		write(CheckpointFile, ck)
		fname := name
		if ok && c.hasFile && c.lastFile > 0 && c.lastFile < 1<<45 {
			fname = fileName(c.lastFile)
		}
		write(fname, file)
		x, err := Open("/d", tinyConfig(slots, 5), WithFS(fs), WithLogger(quiet))
		if err != nil {
			return
		}
		defer x.Stop(ctx)
		for _, k := range []string{"k0", "k1", "u", "z"} {
			x.Query(ctx, sdk.Query{Topic: "T", Key: k, Max: 64})
			x.Query(ctx, sdk.Query{Topic: "T", Key: k, Begin: 1700000002000, End: 1700000004000, Max: 64})
		}
		in, _ := x.Offsets()
		var off int64
		if in > 0 && in < 1<<40 {
			off = in / 2
		}
		x.Index(ctx, []sdk.Record{{Topic: "T", Keys: "k0 k1", UniqKey: "u", PhysOffset: off, Size: 100, StoreTimestamp: 1700000003000}})
		x.Index(ctx, []sdk.Record{{Topic: "T", Keys: "k2", PhysOffset: off + 100, Size: 100, StoreTimestamp: 1700000003000}})
		x.Query(ctx, sdk.Query{Topic: "T", Key: "k0", Max: 64})
		x.Sync(ctx)
		x.Clean(1 << 40)
	})
}

// FuzzKeyHash: the piecewise hash equals Java's hash of the concatenation.
func FuzzKeyHash(f *testing.F) {
	f.Add("TopicTest", "OrderID188")
	f.Add("t", "é𝄞")
	f.Add("主题", "a\xffb")
	f.Fuzz(func(t *testing.T, topic, key string) {
		want := absHash(record.JavaHashCode(topic + "#" + key))
		if got := keyHash(topic, key); got != want {
			t.Fatalf("keyHash(%q, %q) = %d, want %d", topic, key, got, want)
		}
		if keyHash(topic, key) < 0 {
			t.Fatal("negative hash")
		}
	})
}

// FuzzDecodeConfig: decoding any document never panics; what it accepts
// validates.
func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte("[index.config]\nhash_slots = 7\nread_cache = \"2MiB\"\nclean_interval = \"1s\"\n"))
	f.Add([]byte("[index.config]\nread_cache = 5\nbogus = 1\n"))
	f.Add([]byte("[index]\nconfig = { max_query = 3 }\n"))
	f.Add([]byte("[index.config\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := DecodeConfig(sdk.Config{Section: "index", Document: doc, File: "f.toml"})
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("accepted an invalid config %+v: %v", c, verr)
			}
		}
	})
}
