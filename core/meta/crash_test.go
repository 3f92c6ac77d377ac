package meta

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmq/keel/core/vfs"
)

// crashAtFS wraps a CrashFS and simulates a power cut just before its
// crashAt-th mutating operation (create, write, sync, close, rename,
// syncdir), which then fails, as does everything after it until disarm.
type crashAtFS struct {
	*vfs.CrashFS
	mu      sync.Mutex
	n       int
	crashAt int
	crashed bool
}

var errPowerCut = errors.New("power cut")

func (c *crashAtFS) step() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return errPowerCut
	}
	c.n++
	if c.n == c.crashAt {
		c.crashed = true
		c.CrashFS.Crash()
		return errPowerCut
	}
	return nil
}

func (c *crashAtFS) Create(name string) (vfs.File, error) {
	if err := c.step(); err != nil {
		return nil, err
	}
	f, err := c.CrashFS.Create(name)
	if err != nil {
		return nil, err
	}
	return &crashAtFile{File: f, fs: c}, nil
}

func (c *crashAtFS) Rename(o, n string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.CrashFS.Rename(o, n)
}

func (c *crashAtFS) SyncDir(d string) error {
	if err := c.step(); err != nil {
		return err
	}
	return c.CrashFS.SyncDir(d)
}

type crashAtFile struct {
	vfs.File
	fs *crashAtFS
}

func (f *crashAtFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.step(); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

func (f *crashAtFile) Sync() error {
	if err := f.fs.step(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *crashAtFile) Close() error {
	if err := f.fs.step(); err != nil {
		_ = f.File.Close()
		return err
	}
	return f.File.Close()
}

// TestWriteFileAtomicCrash cuts the power before every step of
// WriteFileAtomic (and after the last), with torn pages, for several seeds:
// the file must then hold exactly the old or exactly the new content, and
// the new one if the call returned nil.
func TestWriteFileAtomicCrash(t *testing.T) {
	oldData := bytes.Repeat([]byte("old content "), 1000) // > 2 pages
	newData := bytes.Repeat([]byte("NEW CONTENT!"), 1500)
	const steps = 6
	for seed := int64(0); seed < 8; seed++ {
		for crashAt := 1; crashAt <= steps+1; crashAt++ {
			cfs := vfs.NewCrashFS(seed)
			if err := cfs.MkdirAll("/cfg", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := cfs.SyncDir("/"); err != nil {
				t.Fatal(err)
			}
			if err := WriteFileAtomic(cfs, "/cfg/f.json", oldData); err != nil {
				t.Fatal(err)
			}
			w := &crashAtFS{CrashFS: cfs, crashAt: crashAt}
			err := WriteFileAtomic(w, "/cfg/f.json", newData)
			if crashAt > steps {
				if err != nil {
					t.Fatal(err)
				}
				cfs.Crash()
			}
			got, rerr := ReadFile(cfs, "/cfg/f.json")
			if rerr != nil {
				t.Fatalf("seed %d crash at %d: %v", seed, crashAt, rerr)
			}
			switch {
			case bytes.Equal(got, newData):
			case bytes.Equal(got, oldData):
				if err == nil {
					t.Fatalf("seed %d crash at %d: WriteFileAtomic returned nil but the old content came back", seed, crashAt)
				}
			default:
				t.Fatalf("seed %d crash at %d: file holds %d bytes that are neither old nor new", seed, crashAt, len(got))
			}
		}
	}
}

// TestStoreCrashDuringPersist changes every table and cuts the power at
// every step of PersistAll: Open must succeed and each table must be in its
// old or its new state.
func TestStoreCrashDuringPersist(t *testing.T) {
	const maxSteps = 4*6 + 1
	for seed := int64(0); seed < 3; seed++ {
		for crashAt := 1; crashAt <= maxSteps; crashAt++ {
			t.Run(fmt.Sprintf("seed%d/step%d", seed, crashAt), func(t *testing.T) {
				cfs := vfs.NewCrashFS(seed)
				s, err := Open(cfs, "/broker/config")
				if err != nil {
					t.Fatal(err)
				}
				if err := cfs.SyncDir("/broker"); err != nil { // make the new directory durable
					t.Fatal(err)
				}
				if err := cfs.SyncDir("/"); err != nil {
					t.Fatal(err)
				}
				populate(t, s)
				if err := s.PersistAll(); err != nil {
					t.Fatal(err)
				}
				old := s.Snapshot()

				w := &crashAtFS{CrashFS: cfs, crashAt: crashAt}
				s2, err := Open(w, "/broker/config")
				if err != nil {
					t.Fatal(err)
				}
				for _, err := range []error{
					s2.Topics.Put(topic("new_topic", 2)),
					s2.SubscriptionGroups.Put(DefaultSubscriptionGroup("new_group")),
					s2.ConsumerOffsets.Commit("billing", "orders", 0, 999),
					s2.DelayOffsets.Set(3, 1000),
				} {
					// Topic changes persist at once, so the crash may
					// come inside Put; the change stays in memory.
					if err != nil && !w.crashed {
						t.Fatal(err)
					}
				}
				updated := s2.Snapshot()
				perr := s2.PersistAll()
				if !w.crashed {
					if perr != nil {
						t.Fatal(perr)
					}
					cfs.Crash()
				}

				r, err := Open(cfs, "/broker/config")
				if err != nil {
					t.Fatalf("Open after a crash: %v", err)
				}
				got := r.Snapshot()
				check := func(name string, g, o, n any) {
					if !reflect.DeepEqual(g, o) && !reflect.DeepEqual(g, n) {
						t.Fatalf("%s after crash is neither old nor new:\n%+v", name, g)
					}
				}
				check("topics", got.Topics, old.Topics, updated.Topics)
				check("groups", got.SubscriptionGroups, old.SubscriptionGroups, updated.SubscriptionGroups)
				check("offsets", got.ConsumerOffsets, old.ConsumerOffsets, updated.ConsumerOffsets)
				check("delay", got.DelayOffsets, old.DelayOffsets, updated.DelayOffsets)
				if perr == nil && !reflect.DeepEqual(got, updated) {
					t.Fatal("PersistAll returned nil but the new state did not survive")
				}
			})
		}
	}
}

// TestTopicCreationIsDurable: a topic created (auto-create on a first send,
// or an explicit Put) or deleted survives a power cut that comes right
// after, with no PersistAll in between, as RocketMQ writes topics.json at
// creation.
func TestTopicCreationIsDurable(t *testing.T) {
	cfs := vfs.NewCrashFS(7)
	if err := cfs.MkdirAll("/b/config", 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/b", "/"} {
		if err := cfs.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(cfs, "/b/config")
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := s.Topics.GetOrCreate("auto_created", 4); err != nil || !created {
		t.Fatalf("GetOrCreate: created %v, %v", created, err)
	}
	if err := s.Topics.Put(topic("put_topic", 8)); err != nil {
		t.Fatal(err)
	}
	if err := s.Topics.Put(topic("doomed", 1)); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Topics.Delete("doomed"); !ok || err != nil {
		t.Fatalf("Delete: %v %v", ok, err)
	}
	cfs.Crash()
	r, err := Open(cfs, "/b/config")
	if err != nil {
		t.Fatalf("Open after a crash: %v", err)
	}
	for _, name := range []string{"auto_created", "put_topic"} {
		if _, ok := r.Topics.Get(name); !ok {
			t.Fatalf("topic %s lost in a crash right after its creation", name)
		}
	}
	if _, ok := r.Topics.Get("doomed"); ok {
		t.Fatal("a deleted topic came back after a crash")
	}
}

// gatedRenameFS holds every Rename (the step that makes a metadata file
// durable under its name) until released, or fails it while failing is set.
type gatedRenameFS struct {
	*vfs.CrashFS
	entered chan struct{}
	release chan struct{}
	failing atomic.Bool
}

func (g *gatedRenameFS) Rename(from, to string) error {
	if g.failing.Load() {
		return errors.New("rename refused")
	}
	g.entered <- struct{}{}
	<-g.release
	return g.CrashFS.Rename(from, to)
}

// TestTopicNotServedBeforeDurable: while one goroutine's auto-create is
// still persisting a topic, another goroutine's Get of it waits for the
// file (so a second producer's first SEND is not acknowledged on a topic a
// crash would lose); and a topic whose persist failed is not served until
// a persist succeeds.
func TestTopicNotServedBeforeDurable(t *testing.T) {
	cfs := vfs.NewCrashFS(8)
	if err := cfs.MkdirAll("/g/config", 0o755); err != nil {
		t.Fatal(err)
	}
	g := &gatedRenameFS{CrashFS: cfs, entered: make(chan struct{}), release: make(chan struct{})}
	tp, err := OpenTopics(g, "/g/config/topics.json")
	if err != nil {
		t.Fatal(err)
	}
	created := make(chan error, 1)
	go func() { _, _, err := tp.GetOrCreate("racy", 4); created <- err }()
	<-g.entered // the creator is inside its persist
	got := make(chan bool, 1)
	go func() { _, ok := tp.Get("racy"); got <- ok }()
	select {
	case ok := <-got:
		t.Fatalf("Get returned (found=%v) while the topic's creation was not yet on disk", ok)
	case <-time.After(100 * time.Millisecond):
	}
	g.release <- struct{}{} // the creator's rename
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	if ok := <-got; !ok {
		t.Fatal("Get did not find the topic once it was durable")
	}

	g.failing.Store(true)
	if err := tp.Put(topic("unlucky", 2)); err == nil {
		t.Fatal("Put succeeded with every rename refused")
	}
	if _, ok := tp.Get("unlucky"); ok {
		t.Fatal("a topic whose persist failed was served")
	}
	g.failing.Store(false)
	go func() { <-g.entered; g.release <- struct{}{} }()
	if _, ok := tp.Get("unlucky"); !ok {
		t.Fatal("the topic was not served once a persist succeeded")
	}
}
