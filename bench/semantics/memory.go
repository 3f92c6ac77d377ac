package semantics

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// memSample is the memory of this process at one moment.
type memSample struct {
	rss, anon, heap int64 // bytes
}

// sampleMemory returns freed memory to the OS (a full GC) and reads
// VmRSS and RssAnon from /proc/self/status and the Go heap in use. On a
// system without /proc the RSS fields are 0.
func sampleMemory() memSample {
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s := memSample{heap: int64(ms.HeapInuse)}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return s
	}
	defer f.Close()
	s.rss, s.anon = parseStatus(bufio.NewScanner(f))
	return s
}

// parseStatus reads VmRSS and RssAnon (kB) from /proc/<pid>/status lines.
func parseStatus(sc *bufio.Scanner) (rss, anon int64) {
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 || n > 1<<40 { // not a size in kB
			continue
		}
		switch k {
		case "VmRSS":
			rss = n << 10
		case "RssAnon":
			anon = n << 10
		}
	}
	return rss, anon
}

func (m memSample) String() string {
	return fmt.Sprintf("rss %d MiB, anon %d MiB, heap %d MiB", m.rss>>20, m.anon>>20, m.heap>>20)
}
