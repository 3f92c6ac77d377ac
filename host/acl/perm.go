package acl

import (
	"fmt"
	"strings"

	"github.com/keelmq/keel/host/remoting"
)

// Perm is what an account may do with a topic or a group: RocketMQ's
// Permission bits (DENY 1, ANY 2, PUB 4, SUB 8).
type Perm uint8

const (
	// Deny refuses every request that needs the resource, whatever else
	// is set.
	Deny Perm = 1
	// Pub allows publishing to a topic.
	Pub Perm = 4
	// Sub allows subscribing to a topic, or acting as a consumer group.
	Sub Perm = 8
)

// PermValues are the strings ParsePerm accepts, for error messages.
const PermValues = `"DENY", "PUB", "SUB" or "PUB|SUB"`

// ParsePerm reads a permission as plain_acl.yml writes one: "DENY",
// "PUB", "SUB", "PUB|SUB" or "SUB|PUB" (case-insensitive, spaces around
// '|' ignored). Where RocketMQ reads anything else as DENY, ParsePerm
// refuses it, so a typo is an error at load rather than a silent denial.
// The empty string is DENY (a default left unset denies, as in RocketMQ).
func ParsePerm(s string) (Perm, error) {
	if strings.TrimSpace(s) == "" {
		return Deny, nil
	}
	var p Perm
	for _, part := range strings.Split(s, "|") {
		switch strings.ToUpper(strings.TrimSpace(part)) {
		case "DENY":
			if strings.Contains(s, "|") {
				return 0, fmt.Errorf("%q: DENY cannot be combined (want %s)", s, PermValues)
			}
			return Deny, nil
		case "PUB":
			p |= Pub
		case "SUB":
			p |= Sub
		default:
			return 0, fmt.Errorf("%q is not a permission (want %s)", s, PermValues)
		}
	}
	return p, nil
}

// String writes p as ParsePerm reads it.
func (p Perm) String() string {
	switch {
	case p&Deny != 0 || p == 0:
		return "DENY"
	case p&(Pub|Sub) == Pub|Sub:
		return "PUB|SUB"
	case p&Pub != 0:
		return "PUB"
	default:
		return "SUB"
	}
}

// allows reports whether an account holding p may do need: never when p
// has Deny, otherwise when p has the bit need asks for
// (RocketMQ's Permission.checkPermission).
func (p Perm) allows(need remoting.Need) bool {
	if p&Deny != 0 {
		return false
	}
	switch need {
	case remoting.NeedPub:
		return p&Pub != 0
	case remoting.NeedSub:
		return p&Sub != 0
	}
	return p&(Pub|Sub) != 0
}
