// Package acl is the broker's access control: RocketMQ's ACL 1.0
// (plain_acl.yml), configured by a profile's [acl] section. A client
// signs each request with its account's secret key (HMAC-SHA1 over the
// header values and body, see Sign); the broker checks the signature and
// the account's permissions on the topics and groups the request touches
// (remoting.RequestAccess) before the request's handler runs.
//
// # Contract
//
// Policy.Check decides one request, in RocketMQ's order
// (PlainPermissionManager.validate):
//
//  1. a client whose address matches a global white-list pattern is let
//     through, unsigned;
//  2. a request without an AccessKey, or with one no account has, is
//     refused;
//  3. a client whose address matches its account's white-list pattern is
//     let through without a signature or permission check;
//  4. a request whose Signature does not match is refused;
//  5. an admin request (remoting.RequestAccess) from an account that is
//     not admin is refused;
//  6. each resource the request touches needs the account's permission
//     on it: its explicit topic_perms or group_perms entry, else its
//     default_topic_perm or default_group_perm. An admin account with no
//     explicit entries may do everything. Publishing to
//     RMQ_SYS_TRACE_TOPIC (message traces) is always allowed.
//
// A refusal is an error naming the access key, the code and the reason,
// never a secret. The Policy is immutable: a change of the profile takes
// effect when the broker restarts (RocketMQ watches plain_acl.yml; keel
// does not).
//
// The name server, the controller and the HA link are not checked (the
// RocketMQ name server has no ACL hook either; HA peers authenticate with
// replication.secret).
package acl

import (
	"fmt"
	"net/netip"
	"sort"

	"github.com/keelmq/keel/host/remoting"
)

// TraceTopic is the topic message traces go to, which every account may
// publish to (RocketMQ's TopicValidator.RMQ_SYS_TRACE_TOPIC).
const TraceTopic = "RMQ_SYS_TRACE_TOPIC"

// MinKeyLen is the shortest access key or secret key accepted (RocketMQ
// refuses keys of 6 characters or fewer).
const MinKeyLen = 7

// Config is the [acl] section of a profile.
type Config struct {
	// Enabled checks every broker request (see the package doc). Default
	// false: no request is checked, and the signature fields clients send
	// are ignored, as with RocketMQ's aclEnable=false.
	Enabled bool `toml:"enabled" comment:"check every broker request's signature and permissions"`
	// GlobalWhiteRemoteAddresses are address patterns (ParsePattern)
	// whose clients are let through unsigned.
	GlobalWhiteRemoteAddresses []string `toml:"global_white_remote_addresses,omitempty" comment:"address patterns let through unsigned"`
	// Accounts are keyed by access key (at least MinKeyLen characters).
	Accounts map[string]AccountConfig `toml:"accounts,omitempty" comment:"accounts, keyed by access key"`
}

// AccountConfig is one [acl.accounts.<access key>] table.
type AccountConfig struct {
	// SecretKey signs the account's requests: at least MinKeyLen
	// characters. It is a secret: `keel profile check` redacts it.
	SecretKey string `toml:"secret_key" comment:"signs this account's requests (secret)"`
	// WhiteRemoteAddress is an address pattern (ParsePattern) whose
	// clients using this access key skip the signature and permission
	// checks. Default "": none.
	WhiteRemoteAddress string `toml:"white_remote_address,omitempty" comment:"clients at these addresses skip the signature check"`
	// Admin allows the admin requests (creating and deleting topics and
	// groups, resetting offsets).
	Admin bool `toml:"admin" comment:"may create and delete topics and groups and reset offsets"`
	// DefaultTopicPerm is the permission on a topic topic_perms does not
	// name (ParsePerm). Default "DENY".
	DefaultTopicPerm string `toml:"default_topic_perm" comment:"DENY, PUB, SUB or PUB|SUB on topics not listed"`
	// DefaultGroupPerm is the permission on a group group_perms does not
	// name. Default "DENY".
	DefaultGroupPerm string `toml:"default_group_perm" comment:"DENY, SUB on groups not listed"`
	// TopicPerms map topic names to permissions.
	TopicPerms map[string]string `toml:"topic_perms,omitempty" comment:"topic = permission"`
	// GroupPerms map consumer group names (without %RETRY%) to
	// permissions.
	GroupPerms map[string]string `toml:"group_perms,omitempty" comment:"consumer group = permission"`
}

// Problem is one invalid value of a Config: the key's path under [acl]
// and what is wrong.
type Problem struct {
	Key []string
	Msg string
}

// Problems checks every value of c and returns what is wrong, in a stable
// order; New refuses a Config that has any.
func (c *Config) Problems() []Problem {
	var out []Problem
	add := func(msg string, key ...string) { out = append(out, Problem{Key: key, Msg: msg}) }
	for i, s := range c.GlobalWhiteRemoteAddresses {
		if _, err := ParsePattern(s); err != nil {
			add(fmt.Sprintf("entry %d: %v", i+1, err), "global_white_remote_addresses")
		}
	}
	if c.Enabled && len(c.Accounts) == 0 && len(c.GlobalWhiteRemoteAddresses) == 0 {
		add("is true with no accounts and no white list, which refuses every request: add an [acl.accounts.<access key>] table", "enabled")
	}
	for _, ak := range sortedKeys(c.Accounts) {
		a := c.Accounts[ak]
		if len(ak) < MinKeyLen {
			add(fmt.Sprintf("access key %q is shorter than %d characters", ak, MinKeyLen), "accounts", ak)
		}
		if len(a.SecretKey) < MinKeyLen {
			add(fmt.Sprintf("must be at least %d characters", MinKeyLen), "accounts", ak, "secret_key")
		}
		if _, err := ParsePattern(a.WhiteRemoteAddress); err != nil {
			add(err.Error(), "accounts", ak, "white_remote_address")
		}
		for key, v := range map[string]string{"default_topic_perm": a.DefaultTopicPerm, "default_group_perm": a.DefaultGroupPerm} {
			if _, err := ParsePerm(v); err != nil {
				add(err.Error(), "accounts", ak, key)
			}
		}
		for _, table := range []struct {
			key   string
			perms map[string]string
		}{{"topic_perms", a.TopicPerms}, {"group_perms", a.GroupPerms}} {
			for _, name := range sortedKeys(table.perms) {
				if _, err := ParsePerm(table.perms[name]); err != nil {
					add(err.Error(), "accounts", ak, table.key, name)
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return fmt.Sprint(out[i].Key) < fmt.Sprint(out[j].Key) })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Policy decides requests; see the package doc. It is safe for concurrent
// use.
type Policy struct {
	global   []Pattern
	accounts map[string]*account
}

type account struct {
	signer       *signer
	white        Pattern
	admin        bool
	defaultTopic Perm
	defaultGroup Perm
	topics       map[string]Perm
	groups       map[string]Perm
}

// New returns the Policy c describes, or nil when c is not Enabled (no
// request is checked). It refuses a Config with Problems, naming the
// first.
func New(c Config) (*Policy, error) {
	if ps := c.Problems(); len(ps) > 0 {
		return nil, fmt.Errorf("acl: %v: %s", ps[0].Key, ps[0].Msg)
	}
	if !c.Enabled {
		return nil, nil
	}
	p := &Policy{accounts: make(map[string]*account, len(c.Accounts))}
	for _, s := range c.GlobalWhiteRemoteAddresses {
		pat, _ := ParsePattern(s)
		p.global = append(p.global, pat)
	}
	for ak, a := range c.Accounts {
		acc := &account{signer: newSigner(a.SecretKey), admin: a.Admin, topics: perms(a.TopicPerms), groups: perms(a.GroupPerms)}
		acc.white, _ = ParsePattern(a.WhiteRemoteAddress)
		acc.defaultTopic, _ = ParsePerm(a.DefaultTopicPerm)
		acc.defaultGroup, _ = ParsePerm(a.DefaultGroupPerm)
		p.accounts[ak] = acc
	}
	return p, nil
}

func perms(m map[string]string) map[string]Perm {
	out := make(map[string]Perm, len(m))
	for k, v := range m {
		out[k], _ = ParsePerm(v)
	}
	return out
}

// Check decides whether the request cmd from the address remote may
// proceed: nil, or an error saying why not. It is a
// remoting.ServerConfig.Guard.
func (p *Policy) Check(remote netip.Addr, cmd *remoting.Command) error {
	for _, g := range p.global {
		if g.Match(remote) {
			return nil
		}
	}
	ak := cmd.Ext(FieldAccessKey)
	if ak == "" {
		return fmt.Errorf("acl: request code %d has no AccessKey: this broker checks every request (acl.enabled); give the client an account's credentials", cmd.Code)
	}
	acc, ok := p.accounts[ak]
	if !ok {
		return fmt.Errorf("acl: request code %d: no account has AccessKey %q", cmd.Code, ak)
	}
	if acc.white.Match(remote) {
		return nil
	}
	if !acc.signer.valid(cmd) {
		return fmt.Errorf("acl: request code %d: the signature does not match AccessKey %q's secret key", cmd.Code, ak)
	}
	res, admin, err := remoting.RequestAccess(cmd)
	if err != nil {
		return fmt.Errorf("acl: request code %d: %w", cmd.Code, err)
	}
	if admin && !acc.admin {
		return fmt.Errorf("acl: request code %d needs an admin account; AccessKey %q is not one", cmd.Code, ak)
	}
	if acc.admin && len(acc.topics) == 0 && len(acc.groups) == 0 {
		return nil
	}
	for _, r := range res {
		if !r.Group && r.Name == TraceTopic && r.Need == remoting.NeedPub {
			continue
		}
		if !acc.perm(r).allows(r.Need) {
			return fmt.Errorf("acl: request code %d: AccessKey %q may not %s", cmd.Code, ak, r)
		}
	}
	return nil
}

// perm is what the account holds on r: its explicit entry, else its
// default for r's kind.
func (a *account) perm(r remoting.Resource) Perm {
	table, def := a.topics, a.defaultTopic
	if r.Group {
		table, def = a.groups, a.defaultGroup
	}
	if p, ok := table[r.Name]; ok {
		return p
	}
	return def
}
