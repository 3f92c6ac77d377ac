package semantics

import (
	"bufio"
	"strings"
	"testing"
)

// FuzzParseStatus: parseStatus never panics, reads only whole "kB" values
// of its two keys, and a value it reports is a non-negative multiple of
// 1 KiB.
func FuzzParseStatus(f *testing.F) {
	f.Add("VmRSS:\t  2048 kB\nRssAnon:\t  1024 kB\n")
	f.Add("VmRSS: 12 MB\nRssAnon: x kB\n")
	f.Add("Name:\tkeel\n\nVmRSS:\n")
	f.Fuzz(func(t *testing.T, in string) {
		rss, anon := parseStatus(bufio.NewScanner(strings.NewReader(in)))
		if rss%1024 != 0 || anon%1024 != 0 || rss < 0 || anon < 0 {
			t.Fatalf("rss %d anon %d not whole KiB", rss, anon)
		}
		if rss != 0 && !strings.Contains(in, "VmRSS:") || anon != 0 && !strings.Contains(in, "RssAnon:") {
			t.Fatalf("rss %d anon %d from %q", rss, anon, in)
		}
	})
}
