package bench

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// progress draws a live progress bar on a terminal (one redrawn line) and
// plain lines elsewhere.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	total int
	n     int
	start time.Time
	cur   string
}

func newProgress(w io.Writer, total int) *progress {
	p := &progress{w: w, total: max(total, 1), start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			p.tty = true
		}
	}
	return p
}

func (p *progress) bar() string {
	const width = 24
	n := min(width, p.n*width/p.total)
	el := time.Since(p.start).Round(time.Second)
	eta := ""
	if p.n > 0 && p.n < p.total {
		left := time.Duration(float64(time.Since(p.start)) * float64(p.total-p.n) / float64(p.n)).Round(time.Second)
		eta = fmt.Sprintf(" ~%v left", left)
	}
	return fmt.Sprintf("[%s%s] %3d/%d %v%s", strings.Repeat("=", n), strings.Repeat(" ", width-n), p.n, p.total, el, eta)
}

// step announces the next unit of work.
func (p *progress) step(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cur = msg
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s %s", p.bar(), msg)
	} else {
		fmt.Fprintf(p.w, "%s %s\n", p.bar(), msg)
	}
	p.n++
}

// result reports the outcome of the current unit.
func (p *progress) result(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s %s: %s", p.bar(), p.cur, msg)
	} else {
		fmt.Fprintf(p.w, "    %s\n", msg)
	}
}

// skip counts n units as done without running them.
func (p *progress) skip(n int) {
	p.mu.Lock()
	p.n += max(n, 0)
	p.mu.Unlock()
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n = p.total
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s done\n", p.bar())
	} else {
		fmt.Fprintf(p.w, "%s done\n", p.bar())
	}
}
