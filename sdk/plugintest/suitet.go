package plugintest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// suiteT is what the replication suite's body runs on: a testing.TB that
// can run subtests and hand the plugin constructor a *testing.T. It is a
// real test (testT) when a plugin author calls RunReplication, and a
// recorder when the suite's own tests check that it fails on a broken
// plugin without failing themselves.
type suiteT interface {
	testing.TB
	// run runs f as the subtest name and reports whether it passed.
	run(name string, f func(suiteT)) bool
	// std is the *testing.T plugin constructors get.
	std() *testing.T
}

// testT is a suiteT over a real test.
type testT struct{ *testing.T }

func (t testT) run(name string, f func(suiteT)) bool {
	return t.T.Run(name, func(t *testing.T) { f(testT{t}) })
}

func (t testT) std() *testing.T { return t.T }

// recorder is a suiteT that records failures instead of reporting them:
// Error and Fatal are kept (Fatal ends the subtest's goroutine), Failed
// reports them, and Cleanup functions run when the (sub)test's function
// returns, as they do for a real test. Temporary directories, logs and
// the plugin constructors' *testing.T are the root test's.
type recorder struct {
	testing.TB
	root     *testing.T
	name     string
	parent   *recorder
	mu       sync.Mutex
	failed   bool
	msgs     []string
	cleanups []func()
}

func newRecorder(t *testing.T, name string) *recorder {
	return &recorder{TB: t, root: t, name: name}
}

func (r *recorder) std() *testing.T { return r.root }
func (r *recorder) Name() string    { return r.name }

func (r *recorder) run(name string, f func(suiteT)) bool {
	c := &recorder{TB: r.root, root: r.root, name: r.name + "/" + name, parent: r}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.runCleanups()
		f(c)
	}()
	<-done
	return !c.Failed()
}

func (r *recorder) runCleanups() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	r.cleanups = append(r.cleanups, f)
	r.mu.Unlock()
}

func (r *recorder) Fail() {
	for p := r; p != nil; p = p.parent {
		p.mu.Lock()
		p.failed = true
		p.mu.Unlock()
	}
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) record(msg string) {
	r.Fail()
	for p := r; p != nil; p = p.parent {
		p.mu.Lock()
		p.msgs = append(p.msgs, r.name+": "+msg)
		p.mu.Unlock()
	}
	r.root.Log(r.name + ": (recorded failure) " + msg)
}

func (r *recorder) Error(args ...any) { r.record(fmt.Sprintln(args...)) }
func (r *recorder) Errorf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any) { r.record(fmt.Sprintln(args...)); r.FailNow() }
func (r *recorder) Fatalf(format string, args ...any) {
	r.record(fmt.Sprintf(format, args...))
	r.FailNow()
}
func (r *recorder) FailNow() { r.Fail(); runtime.Goexit() }

// Skip, Skipf and SkipNow end the subtest without failing it.
func (r *recorder) Skip(args ...any) {
	r.root.Log(r.name + ": skipped: " + fmt.Sprint(args...))
	runtime.Goexit()
}
func (r *recorder) Skipf(format string, args ...any) { r.Skip(fmt.Sprintf(format, args...)) }
func (r *recorder) SkipNow()                         { runtime.Goexit() }

func (r *recorder) Log(args ...any) { r.root.Log(r.name + ": " + fmt.Sprint(args...)) }
func (r *recorder) Logf(format string, args ...any) {
	r.root.Log(r.name + ": " + fmt.Sprintf(format, args...))
}

// messages returns every failure recorded in r and its subtests.
func (r *recorder) messages() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, "\n")
}
