package host

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// addrPortOf is a listener's address, IPv4-mapped addresses unmapped.
func addrPortOf(a net.Addr) netip.AddrPort {
	if ta, ok := a.(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap
}

// refuseMutation says why a mutating admin request must be refused (an
// HTTP status and a message), or 0 when it may proceed. self is the admin
// listener's own address.
func refuseMutation(r *http.Request, self netip.AddrPort) (int, string) {
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, self) {
		return http.StatusForbidden, fmt.Sprintf("cross-origin request refused: Origin %q is not this admin listener (%s); the admin API takes no requests from web pages", o, self)
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return http.StatusForbidden, fmt.Sprintf("cross-origin request refused: Sec-Fetch-Site is %q; the admin API takes no requests from web pages", site)
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q refused: mutating admin requests must be application/json", ct)
	}
	return 0, ""
}

// sameOrigin reports whether the Origin header value o names the admin
// listener self: an http origin whose host is self's address and port. A
// listener on a wildcard address also accepts any IP address with its
// port, and a loopback one "localhost" with its port; a host name never
// matches otherwise (so a DNS-rebound name is refused).
func sameOrigin(o string, self netip.AddrPort) bool {
	u, err := url.Parse(o)
	if err != nil || u.Scheme != "http" || u.Host == "" || u.Path != "" {
		return false
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	if port != strconv.Itoa(int(self.Port())) {
		return false
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		return ip == self.Addr() || self.Addr().IsUnspecified()
	}
	return strings.EqualFold(host, "localhost") && (self.Addr().IsLoopback() || self.Addr().IsUnspecified())
}
