package acl

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Pattern matches client addresses: one of plain_acl.yml's remote address
// forms. Its zero value matches nothing.
type Pattern struct {
	src   string
	any   bool
	alts  []ipv4Alt    // IPv4 alternatives, any of which matches
	exact []netip.Addr // exact addresses (IPv4 or IPv6)
}

// ipv4Alt is one IPv4 pattern: each of the four bytes within its ranges.
type ipv4Alt [4][]byteRange

type byteRange struct{ lo, hi uint8 }

// PatternForms describes the forms ParsePattern accepts, for error
// messages.
const PatternForms = `"*", an address ("10.1.2.3", "::1"), "10.1.2.*", "10.1.*", "10.1.2.1-200", "10.1.2.{1,5,9}" or several of these separated by commas`

// ParsePattern reads an address pattern in the forms of RocketMQ's
// RemoteAddressStrategyFactory:
//
//   - "" matches nothing;
//   - "*" and "*.*.*.*" match every address;
//   - an IPv4 or IPv6 address matches itself;
//   - an IPv4 pattern whose bytes are each a number, "*", a range "1-200"
//     or a set "{1,5,9}"; trailing bytes left out are "*" ("10.1.*" is
//     "10.1.*.*"), but only after a "*";
//   - several patterns separated by commas (outside braces) match an
//     address any of them matches.
//
// IPv6 addresses are matched exactly or by "*" only; an IPv6 range or set
// is refused.
func ParsePattern(s string) (Pattern, error) {
	p := Pattern{src: s}
	s = strings.TrimSpace(s)
	if s == "" {
		return p, nil
	}
	for _, part := range splitTop(s) {
		part = strings.TrimSpace(part)
		switch {
		case part == "*" || part == "*.*.*.*":
			p.any = true
		case part == "":
			return Pattern{}, fmt.Errorf("%q has an empty part (want %s)", s, PatternForms)
		default:
			if a, err := netip.ParseAddr(part); err == nil {
				p.exact = append(p.exact, a.Unmap())
				continue
			}
			alt, err := parseIPv4Alt(part)
			if err != nil {
				if part != s {
					err = fmt.Errorf("in %q: %v", s, err)
				}
				return Pattern{}, fmt.Errorf("%v (want %s)", err, PatternForms)
			}
			p.alts = append(p.alts, alt)
		}
	}
	return p, nil
}

// splitTop splits s at the commas outside braces.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

func parseIPv4Alt(s string) (ipv4Alt, error) {
	var alt ipv4Alt
	if strings.Contains(s, ":") {
		return alt, fmt.Errorf("%q: an IPv6 pattern must be an exact address or \"*\"", s)
	}
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return alt, fmt.Errorf("%q has more than four bytes", s)
	}
	for i := range 4 {
		if i >= len(parts) {
			if parts[len(parts)-1] != "*" {
				return alt, fmt.Errorf("%q has fewer than four bytes and does not end in \"*\"", s)
			}
			alt[i] = []byteRange{{0, 255}}
			continue
		}
		r, err := parseByte(parts[i])
		if err != nil {
			return alt, fmt.Errorf("%q, byte %d: %v", s, i+1, err)
		}
		alt[i] = r
	}
	return alt, nil
}

// parseByte reads one byte of an IPv4 pattern: "*", "7", "1-200" or
// "{1,5,9}".
func parseByte(s string) ([]byteRange, error) {
	s = strings.TrimSpace(s)
	if s == "*" {
		return []byteRange{{0, 255}}, nil
	}
	if inner, ok := strings.CutPrefix(s, "{"); ok {
		inner, ok = strings.CutSuffix(inner, "}")
		if !ok {
			return nil, fmt.Errorf("%q: unclosed {", s)
		}
		var out []byteRange
		for _, m := range strings.Split(inner, ",") {
			n, err := byteNum(m)
			if err != nil {
				return nil, err
			}
			out = append(out, byteRange{n, n})
		}
		return out, nil
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		l, err := byteNum(lo)
		if err != nil {
			return nil, err
		}
		h, err := byteNum(hi)
		if err != nil {
			return nil, err
		}
		if l > h {
			return nil, fmt.Errorf("range %q runs backwards", s)
		}
		return []byteRange{{l, h}}, nil
	}
	n, err := byteNum(s)
	if err != nil {
		return nil, err
	}
	return []byteRange{{n, n}}, nil
}

func byteNum(s string) (uint8, error) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseUint(s, 10, 8)
	if err != nil || s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, fmt.Errorf("%q is not a number from 0 to 255", s)
	}
	return uint8(n), nil
}

// Match reports whether the address a matches the pattern (an
// IPv4-mapped IPv6 address is matched as IPv4).
func (p Pattern) Match(a netip.Addr) bool {
	if p.any {
		return true
	}
	a = a.Unmap()
	for _, e := range p.exact {
		if e == a {
			return true
		}
	}
	if !a.Is4() {
		return false
	}
	b := a.As4()
	for _, alt := range p.alts {
		if alt.match(b) {
			return true
		}
	}
	return false
}

func (alt ipv4Alt) match(b [4]byte) bool {
	for i, rs := range alt {
		ok := false
		for _, r := range rs {
			if b[i] >= r.lo && b[i] <= r.hi {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// String is the pattern as written.
func (p Pattern) String() string { return p.src }
