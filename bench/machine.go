package bench

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/keelmq/keel/bench/report"
)

// machineInfo describes this machine and the filesystem holding dir.
func machineInfo(dir string) report.Machine {
	m := report.Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) >= 2 && fs[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(fs[1], 10, 64); err == nil {
					m.MemTotalBytes = kb << 10
				}
			}
		}
		f.Close()
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	m.Disk = diskInfo(dir)
	m.LoadAvgStart = loadAvg()
	return m
}

// loadAvg is the 1-minute load average (0 if unknown).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	fs := strings.Fields(string(b))
	if len(fs) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(fs[0], 64)
	return v
}

func diskInfo(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	var st unix.Statfs_t
	size := ""
	if unix.Statfs(abs, &st) == nil {
		total := float64(st.Blocks) * float64(st.Bsize)
		avail := float64(st.Bavail) * float64(st.Bsize)
		size = fmt.Sprintf("%.0f GB, %.0f GB available", total/1e9, avail/1e9)
	}
	dev, fstype, opts, best := "", "", "", ""
	if f, err := os.Open("/proc/mounts"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 4 {
				continue
			}
			mp := fs[1]
			if (abs == mp || strings.HasPrefix(abs, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
				best, dev, fstype, opts = mp, fs[0], fs[2], fs[3]
			}
		}
		f.Close()
	}
	cache := ""
	if strings.HasPrefix(dev, "/dev/") {
		name := strings.TrimPrefix(dev, "/dev/")
		if b, err := os.ReadFile("/sys/block/" + name + "/queue/write_cache"); err == nil {
			cache = ", write_cache " + strings.TrimSpace(string(b))
		}
	}
	return fmt.Sprintf("%s %s on %s (%s), %s%s", dev, fstype, best, opts, size, cache)
}
