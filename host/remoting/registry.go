package remoting

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keelmq/keel/core/record"
)

// Expression types of a subscription.
const (
	// ExpressionTag filters by tags: "*" (everything) or "a || b".
	ExpressionTag = "TAG"
	// ExpressionSQL92 filters by an SQL92 expression over properties; keel
	// does not support it.
	ExpressionSQL92 = "SQL92"
)

// subscription is one topic subscription of a consumer, from a heartbeat
// (or a pull request's own subscription).
type subscription struct {
	Topic          string
	SubString      string
	ExpressionType string
	SubVersion     int64
	// codes is the set of tag hash codes to accept; nil accepts all.
	codes map[int64]struct{}
}

// parseSubscription interprets a TAG expression ("*", "", "a || b").
func parseSubscription(topic, expr, exprType string) subscription {
	s := subscription{Topic: topic, SubString: expr, ExpressionType: exprType}
	if exprType != "" && !strings.EqualFold(exprType, ExpressionTag) {
		return s
	}
	expr = strings.TrimSpace(expr)
	if expr == "" || expr == "*" {
		return s
	}
	s.codes = make(map[int64]struct{})
	for _, tag := range strings.Split(expr, "||") {
		if tag = strings.TrimSpace(tag); tag != "" {
			s.codes[record.TagsHashCode(tag)] = struct{}{}
		}
	}
	if len(s.codes) == 0 {
		s.codes = nil
	}
	return s
}

// isSQL reports whether the subscription needs SQL92 filtering.
func (s subscription) isSQL() bool {
	return s.ExpressionType != "" && !strings.EqualFold(s.ExpressionType, ExpressionTag)
}

// filter returns the consume-queue filter for s, nil when everything
// passes. The broker filters by tags code only; the client re-filters by
// the exact tag string (hash collisions), as RocketMQ does.
func (s subscription) filter() func(int64) bool {
	if s.codes == nil {
		return nil
	}
	codes := s.codes
	return func(c int64) bool { _, ok := codes[c]; return ok }
}

// member is one client in one consumer group.
type member struct {
	clientID     string
	conn         *Conn
	lastSeen     time.Time
	consumeType  string
	messageModel string
	fromWhere    string
	subs         map[string]subscription
}

// registry is the consumer group table: group → clientID → member.
type registry struct {
	mu     sync.Mutex
	groups map[string]map[string]*member
}

func newRegistry() *registry {
	return &registry{groups: make(map[string]map[string]*member)}
}

// heartbeat records m (whose subs replace the old ones) in group and
// reports whether the group's set of client ids changed.
func (r *registry) heartbeat(group string, m *member) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if g == nil {
		g = make(map[string]*member)
		r.groups[group] = g
	}
	_, existed := g[m.clientID]
	g[m.clientID] = m
	return !existed
}

// removeConn drops every member whose connection is c and returns the
// groups that changed.
func (r *registry) removeConn(c *Conn) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var changed []string
	for name, g := range r.groups {
		for id, m := range g {
			if m.conn == c {
				delete(g, id)
				changed = appendOnce(changed, name)
			}
		}
		if len(g) == 0 {
			delete(r.groups, name)
		}
	}
	return changed
}

// unregister drops clientID from group and reports whether it was there.
func (r *registry) unregister(group, clientID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	if g == nil {
		return false
	}
	if _, ok := g[clientID]; !ok {
		return false
	}
	delete(g, clientID)
	if len(g) == 0 {
		delete(r.groups, group)
	}
	return true
}

// expire drops members not seen since before cutoff and returns the groups
// that changed.
func (r *registry) expire(cutoff time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var changed []string
	for name, g := range r.groups {
		for id, m := range g {
			if m.lastSeen.Before(cutoff) {
				delete(g, id)
				changed = appendOnce(changed, name)
			}
		}
		if len(g) == 0 {
			delete(r.groups, name)
		}
	}
	return changed
}

// clientIDs returns group's client ids, sorted.
func (r *registry) clientIDs(group string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.groups[group]
	ids := make([]string, 0, len(g))
	for id := range g {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// conns returns the distinct connections of group's members.
func (r *registry) conns(group string) []*Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*Conn
	for _, m := range r.groups[group] {
		if m.conn != nil && !slices.Contains(out, m.conn) {
			out = append(out, m.conn)
		}
	}
	return out
}

// subscription returns group's subscription to topic: the one of the
// member on connection c if it has one, else any member's (members of one
// group are expected to subscribe alike).
func (r *registry) subscription(group, topic string, c *Conn) (subscription, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var found subscription
	ok := false
	for _, m := range r.groups[group] {
		s, has := m.subs[topic]
		if !has {
			continue
		}
		if m.conn == c {
			return s, true
		}
		if !ok || s.SubVersion > found.SubVersion {
			found, ok = s, true
		}
	}
	return found, ok
}

func appendOnce(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}
