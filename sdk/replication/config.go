package replication

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/keelmq/keel/sdk"
)

// Defaults of Options, following RocketMQ where it has a counterpart.
const (
	DefaultBatchSize           = 256 << 10 // RocketMQ haTransferBatchSize is 32 KiB; larger batches copy faster
	DefaultHeartbeatInterval   = 2 * time.Second
	DefaultIdleTimeout         = 20 * time.Second // haHousekeepingInterval
	DefaultMaxLag              = 256 << 20        // haMaxGapNotInSync
	DefaultTimeout             = 3 * time.Second  // slaveTimeout
	DefaultSyncMetaInterval    = 10 * time.Second
	DefaultReconnectBackoff    = 200 * time.Millisecond
	DefaultReconnectBackoffMax = 5 * time.Second // RocketMQ's slave reconnects every 5 s
	DefaultHandshakeTimeout    = 10 * time.Second
)

// Ack modes (Options.AckOn).
const (
	AckReceived = "received" // the slave appended the bytes (RocketMQ's meaning: in its page cache)
	AckFlushed  = "flushed"  // the slave fsynced them before acknowledging
)

// Start fencing modes (Options.StartFenced).
const (
	StartFencedEmpty  = "empty"  // a master whose log is empty at Start refuses writes until a replica handshake or ForceWrites
	StartFencedAlways = "always" // every master Start refuses writes until a replica handshake or ForceWrites
	StartFencedNever  = "never"
)

// Options configures a Node. Zero values mean the defaults above, except
// the booleans and WaitReplicas (0: acks do not wait).
type Options struct {
	// BatchSize is about how many log bytes one DATA frame carries (at
	// least one whole record; never across a segment or epoch boundary).
	BatchSize int
	// HeartbeatInterval: a master sends a heartbeat, and a slave an ack,
	// after this long without other traffic.
	HeartbeatInterval time.Duration
	// IdleTimeout: either side closes a connection that received nothing
	// for this long. Must exceed 2 × HeartbeatInterval.
	IdleTimeout time.Duration
	// MaxLag: a replica more than this many bytes behind the master's
	// committed offset leaves the in-sync set.
	MaxLag int64
	// AckOn is AckReceived or AckFlushed.
	AckOn string
	// WaitReplicas > 0: producers' acks wait until that many in-sync
	// replicas acknowledged their record (the policy the host applies).
	WaitReplicas int
	// Timeout bounds such a wait (FLUSH_SLAVE_TIMEOUT).
	Timeout time.Duration
	// VisibleAfterReplicated: consumers on the master see only records the
	// acknowledged offset covers.
	VisibleAfterReplicated bool
	// SyncMetaInterval is how often a master sends its metadata snapshot
	// (when it changed) to each slave.
	SyncMetaInterval time.Duration
	// ReconnectBackoff is a slave's first wait before reconnecting;
	// it doubles up to ReconnectBackoffMax.
	ReconnectBackoff    time.Duration
	ReconnectBackoffMax time.Duration
	// HandshakeTimeout bounds authentication and the epoch handshake.
	HandshakeTimeout time.Duration
	// MaxFrameSize bounds a received frame's payload. It must exceed
	// BatchSize plus the largest record (default DefaultMaxFrame).
	MaxFrameSize int
	// StartFenced is StartFencedEmpty (default), StartFencedAlways or
	// StartFencedNever.
	StartFenced string
	// NodeID names this node to its peers (default: its HA address).
	NodeID string
}

// WithDefaults returns o with zero fields set to their defaults.
func (o Options) WithDefaults() Options {
	def := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	def(&o.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&o.IdleTimeout, max(DefaultIdleTimeout, 3*o.HeartbeatInterval))
	if o.MaxLag == 0 {
		o.MaxLag = DefaultMaxLag
	}
	if o.AckOn == "" {
		o.AckOn = AckReceived
	}
	def(&o.Timeout, DefaultTimeout)
	def(&o.SyncMetaInterval, DefaultSyncMetaInterval)
	def(&o.ReconnectBackoff, DefaultReconnectBackoff)
	def(&o.ReconnectBackoffMax, max(DefaultReconnectBackoffMax, o.ReconnectBackoff))
	def(&o.HandshakeTimeout, DefaultHandshakeTimeout)
	if o.MaxFrameSize == 0 {
		o.MaxFrameSize = DefaultMaxFrame
	}
	if o.StartFenced == "" {
		o.StartFenced = StartFencedEmpty
	}
	return o
}

// Validate checks o (after WithDefaults). The error wraps
// sdk.ErrInvalidConfig and names the TOML key.
func (o Options) Validate() error { return o.validate("") }

func (o Options) validate(prefix string) error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s%s: %s", sdk.ErrInvalidConfig, prefix, key, fmt.Sprintf(format, args...))
	}
	switch {
	case o.BatchSize < 1024 || o.BatchSize > 64<<20:
		return bad("batch_size", "%d is not allowed: want 1KiB..64MiB", o.BatchSize)
	case o.MaxFrameSize < o.BatchSize+DataHeaderSize+(4<<20)+(64<<10):
		return bad("max_frame_size", "%d is too small: must exceed batch_size (%d) plus the largest record (4 MiB body and properties)", o.MaxFrameSize, o.BatchSize)
	case o.MaxFrameSize > 1<<30:
		return bad("max_frame_size", "%d is too large (max 1GiB)", o.MaxFrameSize)
	case o.HeartbeatInterval < time.Millisecond:
		return bad("heartbeat_interval", "%s is not allowed: want >= 1ms", o.HeartbeatInterval)
	case o.IdleTimeout < 2*o.HeartbeatInterval:
		return bad("idle_timeout", "%s must be at least twice heartbeat_interval (%s)", o.IdleTimeout, o.HeartbeatInterval)
	case o.MaxLag < 1:
		return bad("max_lag", "%d is not allowed: want > 0 bytes", o.MaxLag)
	case o.AckOn != AckReceived && o.AckOn != AckFlushed:
		return bad("ack_on", "%q is not allowed: want %q or %q", o.AckOn, AckReceived, AckFlushed)
	case o.WaitReplicas < 0 || o.WaitReplicas > 16:
		return bad("wait_replicas", "%d is not allowed: want 1..16", o.WaitReplicas)
	case o.Timeout < time.Millisecond:
		return bad("timeout", "%s is not allowed: want >= 1ms", o.Timeout)
	case o.SyncMetaInterval < 10*time.Millisecond:
		return bad("sync_meta_interval", "%s is not allowed: want >= 10ms", o.SyncMetaInterval)
	case o.ReconnectBackoff < time.Millisecond:
		return bad("reconnect_backoff", "%s is not allowed: want >= 1ms", o.ReconnectBackoff)
	case o.ReconnectBackoffMax < o.ReconnectBackoff:
		return bad("reconnect_backoff_max", "%s is below reconnect_backoff (%s)", o.ReconnectBackoffMax, o.ReconnectBackoff)
	case o.HandshakeTimeout < time.Millisecond:
		return bad("handshake_timeout", "%s is not allowed: want >= 1ms", o.HandshakeTimeout)
	case o.StartFenced != StartFencedEmpty && o.StartFenced != StartFencedAlways && o.StartFenced != StartFencedNever:
		return bad("start_fenced", "%q is not allowed: want %q, %q or %q", o.StartFenced, StartFencedEmpty, StartFencedAlways, StartFencedNever)
	case len(o.NodeID) > MaxIDLen:
		return bad("node_id", "longer than %d bytes", MaxIDLen)
	}
	return nil
}

// Duration is a TOML duration: a string with a unit ("500ms", "10s"). A
// bare number is refused (it would be ambiguous).
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string; it must not be negative.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("want a duration with a unit such as \"500ms\" or \"10s\": %w", err)
	}
	if v < 0 {
		return fmt.Errorf("%s is negative", v)
	}
	d.Duration = v
	return nil
}

// MarshalText formats d as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }

// Size is a TOML byte size: an integer number of bytes, or a string with a
// unit ("32KiB", "256MiB", "1GiB", "512B").
type Size int64

// UnmarshalText parses a size string.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = Size(v)
	return nil
}

// ParseSize parses "<n>[B|KiB|MiB|GiB|KB|MB|GB]" (binary units; KB, MB and
// GB are read as KiB, MiB and GiB, as RocketMQ's configs mean them).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mul    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1}}
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mul = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mul {
		return 0, fmt.Errorf("size %q: want a non-negative integer with an optional unit B, KiB, MiB or GiB", s)
	}
	return n * mul, nil
}

// CommonConfig holds the keys every replication plugin built on this
// package accepts in its [<section>.config] table; plugins embed it in their
// config struct.
type CommonConfig struct {
	BatchSize           Size     `toml:"batch_size"`
	HeartbeatInterval   Duration `toml:"heartbeat_interval"`
	IdleTimeout         Duration `toml:"idle_timeout"`
	MaxLag              Size     `toml:"max_lag"`
	SyncMetaInterval    Duration `toml:"sync_meta_interval"`
	ReconnectBackoff    Duration `toml:"reconnect_backoff"`
	ReconnectBackoffMax Duration `toml:"reconnect_backoff_max"`
	HandshakeTimeout    Duration `toml:"handshake_timeout"`
	MaxFrameSize        Size     `toml:"max_frame_size"`
	StartFenced         string   `toml:"start_fenced"`
	NodeID              string   `toml:"node_id"`
}

// Options returns the Options these keys describe (zero = default).
func (c CommonConfig) Options() Options {
	return Options{
		BatchSize: int(c.BatchSize), HeartbeatInterval: c.HeartbeatInterval.Duration, IdleTimeout: c.IdleTimeout.Duration,
		MaxLag: int64(c.MaxLag), SyncMetaInterval: c.SyncMetaInterval.Duration, ReconnectBackoff: c.ReconnectBackoff.Duration,
		ReconnectBackoffMax: c.ReconnectBackoffMax.Duration, HandshakeTimeout: c.HandshakeTimeout.Duration,
		MaxFrameSize: int(c.MaxFrameSize), StartFenced: c.StartFenced, NodeID: c.NodeID,
	}
}

// DecodeConfig decodes the table cfg.Section+".config" of cfg.Document
// strictly into out, a pointer to a struct with toml tags that holds the
// defaults: an unknown key or a value of the wrong type is an error
// wrapping sdk.ErrInvalidConfig that names the file, the position when
// known, the dotted key and the keys allowed. Keys outside that table are
// not the plugin's business and are ignored. A document without the table
// leaves out unchanged.
//
// It is the one place that knows how profiles are decoded, to be replaced
// by the sdk's own strict decode helper once it exists.
func DecodeConfig(cfg sdk.Config, out any) error {
	rv := reflect.ValueOf(out)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("%w: DecodeConfig wants a pointer to a struct, got %T", sdk.ErrInvalidConfig, out)
	}
	if len(bytes.TrimSpace(cfg.Document)) == 0 {
		return nil
	}
	section := cfg.Section
	if section == "" {
		section = string(sdk.KindReplication)
	}
	var loose map[string]any
	if err := toml.Unmarshal(cfg.Document, &loose); err != nil {
		return configError(cfg, section, err, out)
	}
	// Walk to the section (it may be dotted) and check it is a table.
	path := strings.Split(section, ".")
	cur := loose
	for _, k := range path {
		v, ok := cur[k]
		if !ok {
			return nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%w: %s: [%s] must be a table", sdk.ErrInvalidConfig, cfg.File, section)
		}
		cur = m
	}
	conf, ok := cur["config"]
	if !ok {
		return nil
	}
	table, ok := conf.(map[string]any)
	if !ok {
		return fmt.Errorf("%w: %s: %s.config must be a table of settings", sdk.ErrInvalidConfig, cfg.File, section)
	}
	if err := checkUnitTypes(table, rv.Elem().Type()); err != nil {
		return fmt.Errorf("%w: %s: %s.config.%v", sdk.ErrInvalidConfig, cfg.File, section, err)
	}
	// Decode the whole document into a wrapper that accepts anything but
	// the plugin's table, which is out's type: strict decoding then checks
	// only the plugin's keys, and errors carry positions in the document.
	wrapper := reflect.New(wrapperType(loose, path, rv.Elem().Type()))
	target := wrapper.Elem()
	for range path {
		target = target.Field(0)
	}
	target.Field(0).Set(rv.Elem())
	dec := toml.NewDecoder(bytes.NewReader(cfg.Document))
	dec.DisallowUnknownFields()
	if err := dec.Decode(wrapper.Interface()); err != nil {
		return configError(cfg, section, err, out)
	}
	rv.Elem().Set(target.Field(0))
	return nil
}

// wrapperType builds a struct type for table m whose field 0 follows path
// (ending in a struct whose field 0 is "config" of type conf) and whose
// other fields accept any value.
func wrapperType(m map[string]any, path []string, conf reflect.Type) reflect.Type {
	anyT := reflect.TypeOf((*any)(nil)).Elem()
	var first reflect.StructField
	if len(path) == 0 {
		first = reflect.StructField{Name: "F0", Type: conf, Tag: tomlTag("config")}
	} else {
		sub, _ := m[path[0]].(map[string]any)
		first = reflect.StructField{Name: "F0", Type: wrapperType(sub, path[1:], conf), Tag: tomlTag(path[0])}
	}
	skip := "config"
	if len(path) > 0 {
		skip = path[0]
	}
	fields := []reflect.StructField{first}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if k != skip {
			fields = append(fields, reflect.StructField{Name: "F" + strconv.Itoa(i+1), Type: anyT, Tag: tomlTag(k)})
		}
	}
	return reflect.StructOf(fields)
}

func tomlTag(key string) reflect.StructTag { return reflect.StructTag("toml:" + strconv.Quote(key)) }

func configError(cfg sdk.Config, section string, err error, out any) error {
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		return fmt.Errorf("%w: %s:%d:%d: %s: %s (allowed keys in %s.config: %s)", sdk.ErrInvalidConfig, cfg.File, row, col,
			strings.Join(de.Key(), "."), de.Error(), section, strings.Join(allowedKeys(reflect.TypeOf(out).Elem()), ", "))
	}
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		e := sm.Errors[0]
		row, col := e.Position()
		return fmt.Errorf("%w: %s:%d:%d: unknown key %s (allowed keys in %s.config: %s)", sdk.ErrInvalidConfig, cfg.File, row, col,
			strings.Join(e.Key(), "."), section, strings.Join(allowedKeys(reflect.TypeOf(out).Elem()), ", "))
	}
	return fmt.Errorf("%w: %s: %s.config: %v", sdk.ErrInvalidConfig, cfg.File, section, err)
}

var (
	durationType = reflect.TypeOf(Duration{})
	sizeType     = reflect.TypeOf(Size(0))
)

// checkUnitTypes checks that durations are given as strings and sizes as
// integers or strings, so that a bare number is reported with its key.
func checkUnitTypes(table map[string]any, t reflect.Type) error {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Type != durationType {
			if err := checkUnitTypes(table, f.Type); err != nil {
				return err
			}
			continue
		}
		key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		v, ok := table[key]
		if !ok {
			continue
		}
		switch f.Type {
		case durationType:
			if _, ok := v.(string); !ok {
				return fmt.Errorf("%s: got %v, want a duration string with a unit such as \"500ms\" or \"10s\"", key, v)
			}
		case sizeType:
			switch v.(type) {
			case string, int64:
			default:
				return fmt.Errorf("%s: got %v, want a number of bytes or a string such as \"256MiB\"", key, v)
			}
		}
	}
	return nil
}

// allowedKeys lists the toml keys of struct type t (embedded structs
// flattened), sorted.
func allowedKeys(t reflect.Type) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			keys = append(keys, allowedKeys(f.Type)...)
			continue
		}
		if k, _, _ := strings.Cut(f.Tag.Get("toml"), ","); k != "" && k != "-" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}
