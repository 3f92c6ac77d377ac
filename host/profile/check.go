package profile

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// checkDeleteWhen validates hours of day separated by ';'.
func checkDeleteWhen(s string) string {
	if strings.TrimSpace(s) == "" {
		return `must list at least one hour of day, e.g. "04" or "04;16"`
	}
	for _, part := range strings.Split(s, ";") {
		t := strings.TrimSpace(part)
		if len(t) == 0 || len(t) > 2 || !isDigits(t) {
			return fmt.Sprintf(`invalid hour %q in %q (want hours 00-23 separated by ';', e.g. "04;16")`, part, s)
		}
		if h, _ := strconv.Atoi(t); h > 23 {
			return fmt.Sprintf(`invalid hour %q in %q (want hours 00-23 separated by ';', e.g. "04;16")`, part, s)
		}
	}
	return ""
}

// checkAddr validates host:port. A listen address may have an empty host
// and port 0; a dial address needs both.
func checkAddr(addr string, listen bool) string {
	example := `"127.0.0.1:10911"`
	bad := func(why string) string {
		if listen {
			return fmt.Sprintf("invalid address %q: %s (want host:port, e.g. %s; port 0 picks a free port)", addr, why, example)
		}
		return fmt.Sprintf("invalid address %q: %s (want host:port with a non-zero port, e.g. %s)", addr, why, example)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return bad("not host:port")
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil || !isDigits(port) {
		return bad(fmt.Sprintf("invalid port %q", port))
	}
	if n == 0 && !listen {
		return bad("port 0 cannot be dialled")
	}
	if host == "" {
		if !listen {
			return bad("missing host")
		}
		return ""
	}
	if net.ParseIP(host) == nil && !hostnameRE.MatchString(host) {
		return bad(fmt.Sprintf("invalid host %q", host))
	}
	return ""
}

// hasPrefix reports whether path starts with prefix.
func hasPrefix(path, prefix []string) bool {
	return len(path) >= len(prefix) && slices.Equal(path[:len(prefix)], prefix)
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// sameListener reports whether two valid listen addresses would collide.
func sameListener(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	na, _ := strconv.Atoi(pa)
	nb, _ := strconv.Atoi(pb)
	if na == 0 || na != nb {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}
