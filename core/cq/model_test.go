package cq

import (
	"errors"
	"fmt"
	"testing"

	"github.com/keelmq/keel/core/vfs"
	"pgregory.net/rapid"
)

// model is a slice model of one queue.
type model struct {
	epf      int64
	start    int64   // queue offset of the first file; meaningful when ents != nil
	ents     []Entry // units from start, blanks included
	min      int64
	minPhys  int64
	nextPhys int64 // where the next commitlog record starts
}

func (m *model) max() int64 {
	if len(m.ents) == 0 {
		return 0
	}
	return m.start + int64(len(m.ents))
}

func (m *model) maxPhys() int64 {
	if len(m.ents) == 0 {
		return 0
	}
	return m.ents[len(m.ents)-1].End()
}

func (m *model) firstReal() int64 {
	for i, e := range m.ents {
		if !e.IsBlank() {
			return m.start + int64(i)
		}
	}
	return m.max()
}

func (m *model) files() int {
	if len(m.ents) == 0 {
		return 0
	}
	return int((m.max()-1-m.start)/m.epf) + 1
}

func (m *model) at(qo int64) Entry { return m.ents[qo-m.start] }

func (m *model) put(qo int64, e Entry) {
	if len(m.ents) == 0 {
		m.start = qo - qo%m.epf
		m.ents = nil
		for i := m.start; i < qo; i++ {
			m.ents = append(m.ents, blankEntry)
		}
		m.min = qo
	}
	m.ents = append(m.ents, e)
	m.nextPhys = e.End()
}

func (m *model) truncate(phys int64) {
	if len(m.ents) == 0 {
		return
	}
	fr := m.firstReal()
	n := m.max()
	for i := fr; i < m.max(); i++ {
		if m.at(i).Offset >= phys {
			n = i
			break
		}
	}
	if n == m.max() {
		return
	}
	if n <= fr {
		m.ents, m.min = nil, 0
		return
	}
	m.ents = m.ents[:n-m.start]
	m.min = min(m.min, n)
}

func (m *model) setMin(minPhys int64) (deleted int) {
	m.minPhys = max(m.minPhys, minPhys)
	if len(m.ents) == 0 {
		return 0
	}
	for m.files() > 1 {
		last := m.ents[m.epf-1]
		if !last.IsBlank() && last.End() > minPhys {
			break
		}
		m.start += m.epf
		m.ents = m.ents[m.epf:]
		deleted++
	}
	lo := max(m.min, m.firstReal(), m.start)
	n := m.max()
	for i := lo; i < m.max(); i++ {
		if m.at(i).Offset >= minPhys {
			n = i
			break
		}
	}
	m.min = max(m.min, n)
	return deleted
}

func (m *model) clone() *model {
	c := *m
	c.ents = append([]Entry(nil), m.ents...)
	return &c
}

func checkModel(t *rapid.T, q *Queue, m *model, fsys vfs.FS) {
	if q.Max() != m.max() || q.Min() != m.min || q.MaxPhysOffset() != m.maxPhys() {
		t.Fatalf("queue Min/Max/MaxPhys %d/%d/%d, model %d/%d/%d", q.Min(), q.Max(), q.MaxPhysOffset(), m.min, m.max(), m.maxPhys())
	}
	got, err := q.Get(q.Min(), 1<<20, nil)
	if err != nil {
		t.Fatalf("Get(Min): %v", err)
	}
	if int64(len(got)) != m.max()-m.min {
		t.Fatalf("Get returned %d entries, model has %d", len(got), m.max()-m.min)
	}
	for i, e := range got {
		if w := m.at(m.min + int64(i)); e != w {
			t.Fatalf("entry %d = %+v, model %+v", m.min+int64(i), e, w)
		}
	}
	if m.min > 0 {
		if _, err := q.At(m.min - 1); !errors.Is(err, ErrOffsetTooSmall) {
			t.Fatalf("At(min-1) = %v", err)
		}
	}
	if _, err := q.At(m.max()); !errors.Is(err, ErrOffsetOverflow) {
		t.Fatalf("At(max) = %v", err)
	}
	if q.FlushedOffset() > q.Max() {
		t.Fatalf("flushed %d > max %d", q.FlushedOffset(), q.Max())
	}
	names, err := fsys.ReadDir(q.Dir())
	if err != nil && m.files() > 0 {
		t.Fatalf("ReadDir: %v", err)
	}
	if len(names) != m.files() {
		t.Fatalf("files %v, model has %d", names, m.files())
	}
	if m.files() > 0 && names[0] != fileName(m.start) {
		t.Fatalf("first file %s, model starts at %d", names[0], m.start)
	}
}

func TestQueueModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfs := vfs.NewCrashFS(rapid.Int64().Draw(t, "seed"))
		opts := testOpts(cfs)
		opts.EntriesPerFile = rapid.IntRange(1, 6).Draw(t, "epf")
		m := &model{epf: int64(opts.EntriesPerFile), nextPhys: 100}
		open := func() *Queue {
			q, err := OpenQueue(opts, "/cq", "T", 0)
			if err != nil {
				t.Fatalf("OpenQueue: %v", err)
			}
			return q
		}
		q := open()
		defer func() { q.Close() }()
		reopen := func() {
			// What a restart does: reopen, then reapply the commitlog minimum.
			m.min = m.firstReal()
			if len(m.ents) == 0 {
				m.min = 0
			}
			q = open()
			checkModel(t, q, m, cfs)
			if _, err := q.SetMinPhysOffset(m.minPhys); err != nil {
				t.Fatal(err)
			}
			m.setMin(m.minPhys)
		}
		nextEntry := func(t *rapid.T) Entry {
			gap := rapid.Int64Range(0, 50).Draw(t, "gap")
			size := rapid.Int32Range(1, 300).Draw(t, "size")
			return Entry{Offset: m.nextPhys + gap, Size: size, TagsCode: rapid.Int64().Draw(t, "tags")}
		}
		t.Repeat(map[string]func(*rapid.T){
			"put": func(t *rapid.T) {
				n := rapid.IntRange(1, 3*opts.EntriesPerFile).Draw(t, "n")
				qo := m.max()
				if len(m.ents) == 0 {
					qo = rapid.Int64Range(0, 4*m.epf).Draw(t, "first")
				}
				for i := 0; i < n; i++ {
					e := nextEntry(t)
					if err := q.Put(qo, e); err != nil {
						t.Fatalf("Put(%d, %+v): %v", qo, e, err)
					}
					m.put(qo, e)
					qo++
				}
			},
			"replay": func(t *rapid.T) {
				fr := m.firstReal()
				if fr >= m.max() {
					t.Skip("no entries")
				}
				qo := rapid.Int64Range(max(fr, m.start), m.max()-1).Draw(t, "qo")
				if err := q.Put(qo, m.at(qo)); err != nil {
					t.Fatalf("replay Put(%d): %v", qo, err)
				}
			},
			"putWrongOffset": func(t *rapid.T) {
				if len(m.ents) == 0 {
					t.Skip("any offset is right on an empty queue")
				}
				d := rapid.Int64Range(1, 5).Draw(t, "d")
				if rapid.Bool().Draw(t, "below") {
					d = -d
				}
				if err := q.Put(m.max()+d, nextEntry(t)); !errors.Is(err, ErrQueueOffsetMismatch) {
					t.Fatalf("Put at max%+d = %v", d, err)
				}
			},
			"truncate": func(t *rapid.T) {
				phys := rapid.Int64Range(m.minPhys, m.nextPhys+100).Draw(t, "phys")
				if err := q.TruncatePhys(phys); err != nil {
					t.Fatal(err)
				}
				m.truncate(phys)
				m.nextPhys = max(m.maxPhys(), phys)
			},
			"setMin": func(t *rapid.T) {
				mp := rapid.Int64Range(m.minPhys, m.nextPhys).Draw(t, "minPhys")
				n, err := q.SetMinPhysOffset(mp)
				if err != nil {
					t.Fatal(err)
				}
				if want := m.setMin(mp); n != want {
					t.Fatalf("SetMinPhysOffset(%d) deleted %d files, model %d", mp, n, want)
				}
			},
			"flush": func(t *rapid.T) {
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				if q.FlushedOffset() != q.Max() {
					t.Fatalf("flushed %d, max %d", q.FlushedOffset(), q.Max())
				}
			},
			"reopen": func(t *rapid.T) {
				if err := q.Close(); err != nil {
					t.Fatal(err)
				}
				reopen()
			},
			"crash": func(t *rapid.T) {
				// Flush, write more, lose power before the next flush: the
				// flushed state comes back exactly.
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
				saved := m.clone()
				n := rapid.IntRange(0, 2*opts.EntriesPerFile).Draw(t, "lost")
				qo := m.max()
				if len(m.ents) == 0 {
					qo = rapid.Int64Range(0, 4*m.epf).Draw(t, "first")
				}
				for i := 0; i < n; i++ {
					e := nextEntry(t)
					if err := q.Put(qo, e); err != nil {
						t.Fatal(err)
					}
					m.put(qo, e)
					qo++
				}
				cfs.CrashWith(vfs.CrashOptions{})
				*m = *saved
				reopen()
			},
			"": func(t *rapid.T) { checkModel(t, q, m, cfs) },
		})
	})
}

// Example-style sanity check that the model itself agrees with the
// hand-written expectations of TestSetMinPhysOffset.
func TestModelSelfCheck(t *testing.T) {
	m := &model{epf: testEPF}
	for i := int64(3); i < 30; i++ {
		m.put(i, ent(i))
	}
	if d := m.setMin(ent(20).Offset); d != 2 || m.min != 20 {
		t.Fatalf("model setMin: deleted %d min %d", d, m.min)
	}
	m.truncate(ent(22).Offset)
	if m.max() != 22 || fmt.Sprint(m.files()) != "1" {
		t.Fatalf("model truncate: max %d files %d", m.max(), m.files())
	}
}
