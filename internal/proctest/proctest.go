// Package proctest helps tests that start processes check that none is
// left behind. Linux only: it reads /proc.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Children lists the processes whose parent is this process, zombies
// included, as "pid (comm) state". An error means /proc cannot be read.
func Children() ([]string, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	self := strconv.Itoa(os.Getpid())
	var out []string
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) >= 2 && fields[1] == self {
			out = append(out, strings.TrimSpace(string(b[:i+1]))+" "+fields[0])
		}
	}
	return out, nil
}
