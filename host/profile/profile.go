// Package profile loads keel's TOML profiles: the file that chooses the
// storage settings, the plugins (flush strategy, replication, indexing) and
// the listeners of one `keel serve` process.
//
// # Format
//
// A profile is a TOML document with a schema version and six sections:
//
//	schema = 1
//
//	[store]          # the commitlog core (StoreConfig)
//	[flush]          # flush strategy plugin (PluginSection)
//	[replication]    # replication plugin and HA role (ReplicationSection)
//	[index]          # indexer plugin (PluginSection)
//	[server]         # RocketMQ remoting listeners and broker identity (ServerConfig)
//	[admin]          # metrics, /status, pprof (AdminConfig)
//
// Every section and key is optional except schema; missing keys take the
// defaults documented on each field (RocketMQ's where it has one). A plugin
// section names a builtin plugin (plugin = "sync") or an external go-plugin
// binary (path = "bin/my-repl", sha256 = "…"), and carries a [flush.config]
// (etc.) table that belongs to the plugin: the host keeps it as a generic map
// and the plugin decodes it into its own struct, just as strictly, with
// sdk.Config.Decode on what (*Profile).PluginConfig returns (in-process
// callers may use (*Profile).DecodePluginConfig, which runs the same code).
//
// # Errors
//
// Decoding is strict: an unknown key, a value of the wrong type and an
// invalid value each fail with an *Error (or an ErrorList of them) that gives
// FILE:LINE:COL, the key's dotted path and what is allowed. Values are checked
// after decoding too (ranges, ordering of ratios, role consistency); those
// errors point at the value in the file, or name the --set override that set
// it.
//
// Durations ("500ms", "72h"), sizes ("4MiB", "1GiB", or a byte count) and
// ratios (0.75 or "75%") use the Duration, Size and Ratio types. They, Error
// and the strict decoder live in sdk/config, where plugins (which must not
// import host/) find them; this package aliases them.
package profile

import (
	"bytes"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/sdk/config"
)

// SchemaVersion is the profile schema this package reads. A profile must say
// `schema = 1` at top level; any other value is refused, so a profile written
// for a future keel fails loudly instead of being half understood.
const SchemaVersion = 1

// Plugin sections, the names DecodePluginConfig accepts.
const (
	SectionFlush       = "flush"
	SectionReplication = "replication"
	SectionIndex       = "index"
)

// Replication roles.
const (
	RoleMaster = "master"
	RoleSlave  = "slave"
)

// StoreConfig is the [store] section: the commitlog core's settings. Defaults
// follow RocketMQ's MessageStoreConfig (see
// /work/shared/reference/rocketmq-store.md §1.3, §7.6, §8.1).
type StoreConfig struct {
	// Dir is the data directory. Default "data/<profile name>", relative to
	// the working directory; `keel serve --data DIR` overrides it.
	Dir string `toml:"dir" comment:"data directory (relative to the working directory)"`
	// SegmentSize is the size of each commitlog segment file. Default 1GiB
	// (RocketMQ mappedFileSizeCommitLog); 64KiB to 16GiB.
	SegmentSize Size `toml:"segment_size" comment:"commitlog segment file size (RocketMQ mappedFileSizeCommitLog)"`
	// MaxMessageSize is the largest message body accepted. Default 4MiB
	// (RocketMQ maxMessageSize); must be smaller than SegmentSize.
	MaxMessageSize Size `toml:"max_message_size" comment:"largest message body accepted (RocketMQ maxMessageSize)"`
	// CQEntriesPerFile is the number of 20-byte entries per consume queue
	// file. Default 300000 (RocketMQ); 1 to 50,000,000.
	CQEntriesPerFile int `toml:"cq_entries_per_file" comment:"20-byte entries per consume queue file"`
	// FileReservedTime is how long a full segment is kept after its last
	// write. Default "72h" (RocketMQ fileReservedTime).
	FileReservedTime Duration `toml:"file_reserved_time" comment:"keep a full segment this long after its last write (RocketMQ fileReservedTime)"`
	// DeleteWhen lists the hours of day (00-23, ';'-separated) at which
	// expired segments are deleted. Default "04" (RocketMQ deleteWhen).
	DeleteWhen string `toml:"delete_when" comment:"hours of day (00-23, ';'-separated) when expired segments are deleted"`
	// DiskMaxUsedRatio: above this disk usage, segments are deleted even
	// before they expire. Default 0.75 (RocketMQ diskMaxUsedSpaceRatio).
	DiskMaxUsedRatio Ratio `toml:"disk_max_used_ratio" comment:"disk usage above which old segments are deleted early"`
	// DiskCleanForciblyRatio: above this usage, deletion ignores age and the
	// deleteWhen hour. Default 0.85 (RocketMQ diskSpaceCleanForciblyRatio).
	DiskCleanForciblyRatio Ratio `toml:"disk_clean_forcibly_ratio" comment:"disk usage above which deletion ignores age"`
	// DiskWarningRatio: above this usage, appends are refused (disk full).
	// Default 0.90 (RocketMQ diskSpaceWarningLevelRatio). The three ratios
	// must satisfy max_used <= clean_forcibly <= warning, each in (0, 1].
	DiskWarningRatio Ratio `toml:"disk_warning_ratio" comment:"disk usage above which appends are refused"`
	// ReadCache is the size of the read cache; 0 (the default) turns it off.
	ReadCache Size `toml:"read_cache" comment:"read cache size, 0 = off"`
	// CheckCRCOnRecover makes crash recovery verify each record's body CRC.
	// Default true (RocketMQ checkCRCOnRecover).
	CheckCRCOnRecover bool `toml:"check_crc_on_recover" comment:"verify body CRCs during crash recovery"`
	// RecoveryTail bounds what a crash recovery re-reads: how far the log
	// may run ahead of the durable checkpoint (core.Options.RecoveryTail).
	// The store flushes and checkpoints behind the writer at a quarter of
	// it and stalls appends at the whole of it. Default 256MiB; 1MiB to
	// 64GiB, or 0 to turn the bound off.
	RecoveryTail Size `toml:"recovery_tail" comment:"crash recovery re-reads at most this much; appends stall beyond it (0 = unbounded)"`
	// StallTimeout is how long an append waits in a write stall before it
	// fails with SERVICE_NOT_AVAILABLE ("store busy"; nothing is written,
	// the producer retries). Default "5s"; 1ms to 1h.
	StallTimeout Duration `toml:"stall_timeout" comment:"an append stalled this long fails (SERVICE_NOT_AVAILABLE, store busy)"`
	// AutoCreateTopics creates a topic on its first SEND. Default true.
	AutoCreateTopics bool `toml:"auto_create_topics" comment:"create topics on first send"`
	// DefaultQueues is the queue count of an auto-created topic. Default 4
	// (RocketMQ defaultTopicQueueNums); 1 to 1024.
	DefaultQueues int `toml:"default_queues" comment:"queues of an auto-created topic"`
}

// DeleteHours returns the hours of day listed in DeleteWhen. It is valid only
// on a profile that Load accepted.
func (s StoreConfig) DeleteHours() []int {
	var out []int
	for _, part := range strings.Split(s.DeleteWhen, ";") {
		if h, err := strconv.Atoi(strings.TrimSpace(part)); err == nil {
			out = append(out, h)
		}
	}
	return out
}

// PluginSection is a [flush] or [index] section: which plugin, and its
// configuration. Exactly one of Plugin and Path is set after loading.
type PluginSection struct {
	// Plugin names a builtin from the host's catalog ("sync", "async",
	// "hash", "none", ...). Defaults: flush "async", index "hash". Setting
	// path without plugin clears the default.
	Plugin string `toml:"plugin,omitempty" comment:"builtin plugin name"`
	// Path is an external go-plugin binary, absolute or relative to the
	// profile's directory (see Profile.ResolvePath).
	Path string `toml:"path,omitempty" comment:"external plugin binary (relative to the profile's directory)"`
	// SHA256 optionally pins the binary at Path: 64 hex digits.
	SHA256 string `toml:"sha256,omitempty" comment:"pin the external binary's SHA-256"`
	// Config is the plugin's own [<section>.config] table, undecoded. Use
	// Profile.DecodePluginConfig to decode it; nil when absent or empty.
	Config map[string]any `toml:"config,omitempty" comment:"the plugin's own settings"`
}

// Chosen reports whether a plugin section naming plugin (a builtin) and
// path (an external binary) selects a plugin: an external binary, or a
// builtin other than "none".
func Chosen(plugin, path string) bool { return path != "" || (plugin != "" && plugin != "none") }

// ReplicationSection is the [replication] section: the replication plugin,
// this broker's HA role, and the plugin's configuration.
type ReplicationSection struct {
	// Plugin names a builtin ("none", "async", "sync", ...). Default "none".
	Plugin string `toml:"plugin,omitempty" comment:"builtin plugin name"`
	// Path is an external go-plugin binary (see PluginSection.Path).
	Path string `toml:"path,omitempty" comment:"external plugin binary (relative to the profile's directory)"`
	// SHA256 optionally pins the binary at Path.
	SHA256 string `toml:"sha256,omitempty" comment:"pin the external binary's SHA-256"`
	// Role is "master" (default) or "slave".
	Role string `toml:"role" comment:"master or slave"`
	// MasterAddr is the master's HA address (host:port, non-zero port). A
	// slave requires it; a master must not set it.
	MasterAddr string `toml:"master_addr,omitempty" comment:"slave only: the master's HA address"`
	// Secret is the shared secret HA peers authenticate with. Empty means
	// unauthenticated (Load adds a warning when a replication plugin runs).
	Secret string `toml:"secret,omitempty" comment:"shared secret for HA authentication"`
	// Config is the plugin's own [replication.config] table, undecoded.
	Config map[string]any `toml:"config,omitempty" comment:"the plugin's own settings"`
}

// ServerConfig is the [server] section: the RocketMQ remoting listeners and
// the broker's identity. A listen address is host:port; port 0 picks a free
// port; an empty host listens on all interfaces.
type ServerConfig struct {
	// NamesrvAddr is the name server address. Default "127.0.0.1:9876".
	NamesrvAddr string `toml:"namesrv_addr" comment:"name server address"`
	// BrokerAddr is the broker's listen address. Default "127.0.0.1:10911".
	BrokerAddr string `toml:"broker_addr" comment:"broker listen address"`
	// HAAddr is the HA (replication) listen address. Default
	// "127.0.0.1:10912" (RocketMQ haListenPort).
	HAAddr string `toml:"ha_addr" comment:"HA (replication) listen address"`
	// BrokerName names the master/slave group. Default "broker-a".
	BrokerName string `toml:"broker_name" comment:"broker group name"`
	// Cluster is the cluster name. Default "DefaultCluster".
	Cluster string `toml:"cluster" comment:"cluster name"`
	// BrokerID is 0 for a master, >= 1 for a slave. Default: 0 for a master,
	// 1 for a slave.
	BrokerID int `toml:"broker_id" comment:"0 = master, >= 1 = slave"`
	// MaxConnections caps concurrent client connections. Default 4096.
	MaxConnections int `toml:"max_connections" comment:"maximum concurrent client connections"`
	// MaxFrameSize caps one remoting frame. Default "16MiB"; must exceed
	// store.max_message_size and fit the 32-bit frame length.
	MaxFrameSize Size `toml:"max_frame_size" comment:"largest remoting frame accepted"`
	// RequestBufferBudget bounds the bytes of client requests held in
	// memory at once, across every connection of the name server and
	// broker listeners: a connection whose next frame does not fit waits
	// before reading it (TCP back-pressure). Default "256MiB", or
	// max_frame_size when that is larger; at least max_frame_size, so that
	// any accepted frame fits.
	RequestBufferBudget Size `toml:"request_buffer_budget" comment:"memory for requests in flight, all connections together"`
	// IdleTimeout closes a connection idle this long; "0s" never does.
	// Default "120s" (RocketMQ channelExpiredTimeout and the Go client's
	// read deadline).
	IdleTimeout Duration `toml:"idle_timeout" comment:"close connections idle this long (0s = never)"`
	// SlaveBrokerAddr, on a master, is its slave's broker address, listed in
	// topic routes. Optional.
	SlaveBrokerAddr string `toml:"slave_broker_addr,omitempty" comment:"master only: the slave's broker address, listed in routes"`
}

// AdminConfig is the [admin] section: the HTTP listener for /metrics,
// /status and /debug/pprof.
type AdminConfig struct {
	// Addr is the admin listen address. Default "127.0.0.1:10914".
	Addr string `toml:"addr" comment:"admin HTTP listen address (/metrics, /status, /debug/pprof)"`
}

// document is the TOML shape of a profile.
type document struct {
	Schema      int                `toml:"schema"`
	Store       StoreConfig        `toml:"store"`
	Flush       PluginSection      `toml:"flush"`
	Replication ReplicationSection `toml:"replication"`
	Index       PluginSection      `toml:"index"`
	Server      ServerConfig       `toml:"server"`
	Admin       AdminConfig        `toml:"admin"`
}

// Profile is a loaded, validated profile with every default filled in.
//
// The exported fields are plain data; callers may read them freely and may
// adjust them before use (for example `keel serve --data` sets Store.Dir),
// but Effective reports the fields as they are. The methods are safe for
// concurrent use.
type Profile struct {
	// Name is the profile's name: its file name without directory and
	// extension ("configs/profiles/sync-flush.toml" gives "sync-flush").
	Name string
	// File is the file name given to Load or LoadBytes; errors start with it.
	File string
	// Dir is the directory relative plugin paths resolve against: the
	// profile file's directory.
	Dir string

	// Schema is the profile's schema version (always SchemaVersion).
	Schema      int
	Store       StoreConfig
	Flush       PluginSection
	Replication ReplicationSection
	Index       PluginSection
	Server      ServerConfig
	Admin       AdminConfig

	// Warnings are problems that do not stop the profile from loading (an
	// unauthenticated HA link, for example), one sentence each.
	Warnings []string

	src      *config.Source
	data     []byte // the file as read, which src indexes
	overlays []*overlay

	mu      sync.Mutex
	plugins map[string]any // section -> config value decoded by DecodePluginConfig
}

// overlay is one --set override: a one-line TOML document decoded on top of
// the file.
type overlay struct {
	src  *config.Source
	doc  []byte   // the one-line document src indexes
	path []string // the key it sets
}

// defaults returns the document with every default, for a profile called name.
func defaults(name string) document {
	return document{
		Schema: SchemaVersion,
		Store: StoreConfig{
			Dir:                    filepath.Join("data", name),
			SegmentSize:            1 << 30,
			MaxMessageSize:         4 << 20,
			CQEntriesPerFile:       300000,
			FileReservedTime:       Duration(72 * time.Hour),
			DeleteWhen:             "04",
			DiskMaxUsedRatio:       0.75,
			DiskCleanForciblyRatio: 0.85,
			DiskWarningRatio:       0.90,
			ReadCache:              0,
			CheckCRCOnRecover:      true,
			RecoveryTail:           core.DefaultRecoveryTail,
			StallTimeout:           Duration(core.DefaultStallTimeout),
			AutoCreateTopics:       true,
			DefaultQueues:          4,
		},
		Flush:       PluginSection{Plugin: "async"},
		Replication: ReplicationSection{Plugin: "none", Role: RoleMaster},
		Index:       PluginSection{Plugin: "hash"},
		Server: ServerConfig{
			NamesrvAddr:    "127.0.0.1:9876",
			BrokerAddr:     "127.0.0.1:10911",
			HAAddr:         "127.0.0.1:10912",
			BrokerName:     "broker-a",
			Cluster:        "DefaultCluster",
			BrokerID:       0,
			MaxConnections: 4096,
			MaxFrameSize:   16 << 20,
			IdleTimeout:    Duration(120 * time.Second),
			// 16 frames of the largest size; a fraction of a typical
			// host's memory, and far above what a steady load holds.
			RequestBufferBudget: 256 << 20,
		},
		Admin: AdminConfig{Addr: "127.0.0.1:10914"},
	}
}

// Load reads the profile at path, applies overrides and validates the result.
//
// Each override is "key=value" with a dotted key, as given to `keel serve
// --set`: "store.segment_size=64MiB", "flush.config.interval=1s". The value
// is read as a TOML value if it is one (8, true, 0.5, "quoted", [1, 2],
// {a = 1}) and as a string otherwise (64MiB, 127.0.0.1:10911). Overrides are
// applied in order after the file, so a later one wins; an override of a
// plugin's config key reaches the plugin through DecodePluginConfig. The
// schema cannot be overridden.
//
// On success every field holds its effective value. On failure the error is
// an *Error, or an ErrorList when there are several problems of one kind
// (unknown keys, validation failures), and no Profile is returned. An error
// reading the file is returned wrapped, not as an *Error.
func Load(path string, overrides []string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading profile: %w", err)
	}
	return LoadBytes(path, data, overrides)
}

// LoadBytes is Load for a profile already in memory. name stands for the
// file: errors start with it, the profile's Name is its base name without
// extension, and relative plugin paths resolve against its directory.
func LoadBytes(name string, data []byte, overrides []string) (*Profile, error) {
	if name == "" {
		name = "profile"
	}
	data = bytes.Clone(data) // decoders keep subslices; never alias the caller's buffer
	base := filepath.Base(name)
	pname := strings.TrimSuffix(base, filepath.Ext(base))
	if pname == "" || pname == "." || pname == string(filepath.Separator) {
		pname = "profile"
	}
	p := &Profile{Name: pname, File: name, Dir: filepath.Dir(name)}

	src, err := config.NewSource(name, data, "")
	if err != nil {
		return nil, err
	}
	p.src, p.data = src, data
	if err := checkSchema(src); err != nil {
		return nil, err
	}
	for _, arg := range overrides {
		ov, err := parseOverride(name, arg)
		if err != nil {
			return nil, err
		}
		p.overlays = append(p.overlays, ov)
	}

	doc := defaults(pname)
	fresh := func() any { d := defaults(pname); return &d }
	if errs := src.Decode(&doc, fresh); errs != nil {
		return nil, errs.Err()
	}
	for _, ov := range p.overlays {
		if errs := ov.src.Decode(&doc, fresh); errs != nil {
			for _, e := range errs {
				if strings.HasPrefix(e.Msg, "want a string") {
					e.Msg += " (quote the value to pass a string)"
				}
			}
			return nil, errs.Err()
		}
	}

	p.Schema = doc.Schema
	p.Store, p.Flush, p.Replication, p.Index = doc.Store, doc.Flush, doc.Replication, doc.Index
	p.Server, p.Admin = doc.Server, doc.Admin
	p.normalize()
	if errs := p.validate(); len(errs) > 0 {
		return nil, errs.Err()
	}
	return p, nil
}

// checkSchema requires `schema = SchemaVersion` at top level.
func checkSchema(src *config.Source) error {
	v, ok := src.Lookup([]string{"schema"})
	if !ok {
		return &Error{File: src.File(), Key: "schema", Msg: fmt.Sprintf("missing schema version: add `schema = %d` at the top of the profile", SchemaVersion)}
	}
	at := func(msg string) error {
		return &Error{File: src.File(), Line: v.Line, Col: v.Col, Key: "schema", Msg: msg}
	}
	if v.Kind != "integer" {
		return at(fmt.Sprintf("want the integer %d, got %s", SchemaVersion, v.Describe()))
	}
	if n, err := strconv.ParseInt(v.Text, 0, 64); err != nil || n != SchemaVersion {
		return at(fmt.Sprintf("unsupported schema version %s: this keel reads schema = %d", v.Text, SchemaVersion))
	}
	return nil
}

// parseOverride turns "key=value" into a one-line TOML document.
func parseOverride(file, arg string) (*overlay, error) {
	fail := func(key, msg string) error {
		return &Error{File: file, Override: arg, Key: key, Msg: msg}
	}
	k, v, ok := strings.Cut(arg, "=")
	if !ok {
		return nil, fail("", "want key=value, e.g. store.segment_size=64MiB")
	}
	path, err := config.ParseKey(strings.TrimSpace(k))
	if err != nil {
		return nil, fail("", fmt.Sprintf("invalid key %q: want a dotted key such as store.segment_size", strings.TrimSpace(k)))
	}
	key := config.FormatKey(path)
	if path[0] == "schema" {
		return nil, fail(key, "the schema version cannot be overridden")
	}
	v = strings.TrimSpace(v)
	line := []byte(key + " = " + v + "\n")
	if !singleKeyValue(line) {
		line = []byte(key + " = " + config.Quote(v) + "\n")
	}
	src, err := config.NewSource(file, line, arg)
	if err != nil {
		return nil, err
	}
	return &overlay{src: src, doc: line, path: path}, nil
}

// singleKeyValue reports whether doc is exactly one valid key-value.
func singleKeyValue(doc []byte) bool {
	var p unstable.Parser
	p.Reset(doc)
	if !p.NextExpression() || p.Expression().Kind != unstable.KeyValue {
		return false
	}
	return !p.NextExpression() && p.Error() == nil
}

// present reports whether the file or an override sets path (or a key below
// or above it).
func (p *Profile) present(path []string) bool {
	if p.src.Has(path) {
		return true
	}
	for _, ov := range p.overlays {
		if hasPrefix(path, ov.path) || hasPrefix(ov.path, path) {
			return true
		}
	}
	return false
}

// normalize applies the defaults that depend on other keys.
func (p *Profile) normalize() {
	clear := func(section string, plugin *string, path string) {
		if path != "" && !p.present([]string{section, "plugin"}) {
			*plugin = ""
		}
	}
	clear(SectionFlush, &p.Flush.Plugin, p.Flush.Path)
	clear(SectionIndex, &p.Index.Plugin, p.Index.Path)
	clear(SectionReplication, &p.Replication.Plugin, p.Replication.Path)
	for _, m := range []*map[string]any{&p.Flush.Config, &p.Index.Config, &p.Replication.Config} {
		if len(*m) == 0 {
			*m = nil
		}
	}
	if p.Replication.Role == RoleSlave && !p.present([]string{"server", "broker_id"}) {
		p.Server.BrokerID = 1
	}
	if !p.present([]string{"server", "request_buffer_budget"}) && p.Server.RequestBufferBudget < p.Server.MaxFrameSize {
		p.Server.RequestBufferBudget = p.Server.MaxFrameSize
	}
}

// Errorf returns an *Error about the key dottedKey ("flush.config.interval"),
// placed where its value was set: at the value in the file, at the --set
// override that set it last, or with no position when the key holds its
// default. Plugins use it to report validation failures after
// DecodePluginConfig with the same precision as decoding errors.
func (p *Profile) Errorf(dottedKey string, format string, args ...any) error {
	path, err := config.ParseKey(dottedKey)
	if err != nil {
		return &Error{File: p.File, Key: dottedKey, Msg: fmt.Sprintf(format, args...)}
	}
	return p.errorAt(path, fmt.Sprintf(format, args...))
}

func (p *Profile) errorAt(path []string, msg string) *Error {
	for i := len(p.overlays) - 1; i >= 0; i-- {
		if hasPrefix(path, p.overlays[i].path) {
			return &Error{File: p.File, Override: p.overlays[i].src.Override(), Key: config.FormatKey(path), Msg: msg}
		}
	}
	e := &Error{File: p.File, Key: config.FormatKey(path), Msg: msg}
	if line, col, ok := p.src.ValuePos(path); ok {
		e.Line, e.Col = line, col
	}
	return e
}

// ResolvePath returns path made absolute or relative to the working directory:
// an absolute path is returned unchanged; a relative one is joined to the
// profile's directory, as plugin paths are.
func (p *Profile) ResolvePath(path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(p.Dir, path)
}

var (
	pluginNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)
	hexRE        = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	hostnameRE   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$`)
)

// validate checks every value and relation between values.
func (p *Profile) validate() ErrorList {
	var errs ErrorList
	fail := func(key string, format string, args ...any) {
		path, _ := config.ParseKey(key)
		errs = append(errs, p.errorAt(path, fmt.Sprintf(format, args...)))
	}

	st := &p.Store
	if st.Dir == "" {
		fail("store.dir", "must not be empty")
	}
	const minSegment, maxSegment = Size(64 << 10), Size(16 << 30)
	if st.SegmentSize < minSegment || st.SegmentSize > maxSegment {
		fail("store.segment_size", "%s is out of range (want %s to %s)", st.SegmentSize, minSegment, maxSegment)
	}
	switch {
	case st.MaxMessageSize <= 0:
		fail("store.max_message_size", "must be positive")
	case st.MaxMessageSize >= st.SegmentSize:
		if p.blame("store.max_message_size", "store.segment_size") == "store.segment_size" {
			fail("store.segment_size", "%s must be larger than store.max_message_size (%s)", st.SegmentSize, st.MaxMessageSize)
		} else {
			fail("store.max_message_size", "%s must be smaller than store.segment_size (%s)", st.MaxMessageSize, st.SegmentSize)
		}
	}
	if st.CQEntriesPerFile < 1 || st.CQEntriesPerFile > 50_000_000 {
		fail("store.cq_entries_per_file", "%d is out of range (want 1 to 50000000)", st.CQEntriesPerFile)
	}
	if rt := st.RecoveryTail; rt != 0 && (rt < 1<<20 || rt > 64<<30) {
		fail("store.recovery_tail", "%s is out of range (want 1MiB to 64GiB, or 0 for no bound)", rt)
	}
	if d := time.Duration(st.StallTimeout); d < time.Millisecond || d > time.Hour {
		fail("store.stall_timeout", "%s is out of range (want 1ms to 1h)", st.StallTimeout)
	}
	if msg := checkDeleteWhen(st.DeleteWhen); msg != "" {
		fail("store.delete_when", "%s", msg)
	}
	ratios := []struct {
		key string
		v   Ratio
	}{
		{"store.disk_max_used_ratio", st.DiskMaxUsedRatio},
		{"store.disk_clean_forcibly_ratio", st.DiskCleanForciblyRatio},
		{"store.disk_warning_ratio", st.DiskWarningRatio},
	}
	ratiosOK := true
	for _, r := range ratios {
		if !(r.v > 0 && r.v <= 1) {
			fail(r.key, "%g is out of range (want more than 0 and at most 1)", float64(r.v))
			ratiosOK = false
		}
	}
	if ratiosOK {
		for i := 0; i+1 < len(ratios); i++ {
			lo, hi := ratios[i], ratios[i+1]
			if lo.v > hi.v {
				fail(p.blame(lo.key, hi.key), "ratios must be ordered disk_max_used_ratio <= disk_clean_forcibly_ratio <= disk_warning_ratio, but %s = %g > %s = %g",
					strings.TrimPrefix(lo.key, "store."), float64(lo.v), strings.TrimPrefix(hi.key, "store."), float64(hi.v))
			}
		}
	}
	if st.DefaultQueues < 1 || st.DefaultQueues > 1024 {
		fail("store.default_queues", "%d is out of range (want 1 to 1024)", st.DefaultQueues)
	}

	p.validatePlugin(SectionFlush, p.Flush.Plugin, p.Flush.Path, p.Flush.SHA256, fail)
	p.validatePlugin(SectionIndex, p.Index.Plugin, p.Index.Path, p.Index.SHA256, fail)
	r := &p.Replication
	p.validatePlugin(SectionReplication, r.Plugin, r.Path, r.SHA256, fail)
	switch r.Role {
	case RoleMaster:
		if r.MasterAddr != "" {
			fail("replication.master_addr", `only a slave sets master_addr (role is "master")`)
		}
	case RoleSlave:
		if r.MasterAddr == "" {
			fail("replication.role", `a slave needs replication.master_addr, the master's HA address (host:port)`)
		} else if msg := checkAddr(r.MasterAddr, false); msg != "" {
			fail("replication.master_addr", "%s", msg)
		}
		if r.Plugin == "none" {
			fail("replication.role", `a slave needs a replication plugin to receive the master's log, but replication.plugin is "none"`)
		}
	default:
		fail("replication.role", `invalid role %q (want "master" or "slave")`, r.Role)
	}
	if r.Plugin != "none" && r.Secret == "" {
		p.Warnings = append(p.Warnings, "replication.secret is empty: HA connections are not authenticated")
	}

	sv := &p.Server
	listeners := []struct{ key, addr string }{
		{"server.namesrv_addr", sv.NamesrvAddr},
		{"server.broker_addr", sv.BrokerAddr},
		{"server.ha_addr", sv.HAAddr},
		{"admin.addr", p.Admin.Addr},
	}
	for i, l := range listeners {
		if msg := checkAddr(l.addr, true); msg != "" {
			fail(l.key, "%s", msg)
			continue
		}
		for _, prev := range listeners[:i] {
			if sameListener(prev.addr, l.addr) {
				fail(l.key, "%s is already used by %s", l.addr, prev.key)
			}
		}
	}
	if sv.BrokerName == "" || strings.ContainsAny(sv.BrokerName, " \t\r\n") {
		fail("server.broker_name", "%q must be non-empty, without spaces", sv.BrokerName)
	}
	if sv.Cluster == "" || strings.ContainsAny(sv.Cluster, " \t\r\n") {
		fail("server.cluster", "%q must be non-empty, without spaces", sv.Cluster)
	}
	switch {
	case r.Role == RoleMaster && sv.BrokerID != 0:
		fail("server.broker_id", "a master has broker_id 0, not %d", sv.BrokerID)
	case r.Role == RoleSlave && sv.BrokerID < 1:
		fail("server.broker_id", "a slave has broker_id 1 or more, not %d", sv.BrokerID)
	}
	if sv.MaxConnections < 1 {
		fail("server.max_connections", "%d is out of range (want at least 1)", sv.MaxConnections)
	}
	switch {
	case sv.MaxFrameSize > math.MaxInt32:
		fail("server.max_frame_size", "%s is too large (a frame length is 32-bit: at most %d bytes)", sv.MaxFrameSize, math.MaxInt32)
	case sv.MaxFrameSize <= st.MaxMessageSize:
		if p.blame("server.max_frame_size", "store.max_message_size") == "store.max_message_size" {
			fail("store.max_message_size", "%s must be smaller than server.max_frame_size (%s)", st.MaxMessageSize, sv.MaxFrameSize)
		} else {
			fail("server.max_frame_size", "%s must be larger than store.max_message_size (%s)", sv.MaxFrameSize, st.MaxMessageSize)
		}
	}
	if sv.RequestBufferBudget < sv.MaxFrameSize {
		if p.blame("server.request_buffer_budget", "server.max_frame_size") == "server.max_frame_size" {
			fail("server.max_frame_size", "%s must not exceed server.request_buffer_budget (%s): a frame larger than the budget could never be read", sv.MaxFrameSize, sv.RequestBufferBudget)
		} else {
			fail("server.request_buffer_budget", "%s is smaller than server.max_frame_size (%s): a frame larger than the budget could never be read", sv.RequestBufferBudget, sv.MaxFrameSize)
		}
	}
	if sv.SlaveBrokerAddr != "" {
		if r.Role != RoleMaster {
			fail("server.slave_broker_addr", "only a master lists its slave's address")
		} else if msg := checkAddr(sv.SlaveBrokerAddr, false); msg != "" {
			fail("server.slave_broker_addr", "%s", msg)
		}
	}
	errs.Sort()
	return errs
}

// blame picks which of two related keys a relational error is reported on:
// the one set last (an override beats the file, a later key in the file beats
// an earlier one), or the first when the user set neither.
func (p *Profile) blame(a, b string) string {
	pa, _ := config.ParseKey(a)
	pb, _ := config.ParseKey(b)
	rank := func(path []string) int {
		for i := len(p.overlays) - 1; i >= 0; i-- {
			if hasPrefix(path, p.overlays[i].path) {
				return 1<<30 + i
			}
		}
		if n, ok := p.src.Order(path); ok {
			return 1 + n
		}
		return 0
	}
	if rank(pb) > rank(pa) {
		return b
	}
	return a
}

// validatePlugin checks a plugin section's choice of plugin.
func (p *Profile) validatePlugin(section, plugin, path, sum string, fail func(string, string, ...any)) {
	switch {
	case plugin != "" && path != "":
		fail(section+".path", "set either plugin (a builtin) or path (an external binary), not both (plugin is %q)", plugin)
	case plugin == "" && path == "":
		fail(section+".plugin", `missing plugin: set plugin = "<builtin name>" or path = "<external binary>"`)
	case plugin != "" && !pluginNameRE.MatchString(plugin):
		fail(section+".plugin", "invalid plugin name %q (want lower-case letters, digits, '.', '_', '-')", plugin)
	}
	if sum != "" {
		switch {
		case path == "":
			fail(section+".sha256", "sha256 pins an external binary; set path too")
		case !hexRE.MatchString(sum):
			fail(section+".sha256", "invalid sha256 %q (want 64 hex digits)", sum)
		}
	}
}

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

// DecodePluginConfig decodes the table <section>.config of the profile (the
// file, then every --set override under it; an override of the whole table
// replaces what came before, as it does in the host's copy) into v, a
// non-nil pointer to the plugin's config struct, as strictly as the host's
// own sections: an unknown key, a wrong type or an invalid value fails with
// an *Error (or ErrorList) carrying the file's line and column and the key's
// full dotted path ("flush.config.interval"). Keys absent from the table
// leave v's fields untouched, so fill v with defaults first; when the
// section has no config at all, v is unchanged and the result is nil. Fields
// of type Duration, Size and Ratio, and any field implementing
// unstable.Unmarshaler, see the raw TOML value; fields implementing
// encoding.TextUnmarshaler see strings.
//
// It is config.DecodeSection on PluginConfig(section).Document, so a plugin
// calling sdk.Config.Decode on what PluginConfig returns gets exactly the
// same values and the same error text.
//
// On error v may be partly written. On success the profile remembers v, and
// Effective prints the plugin's config from it (defaults included); v must
// not be modified concurrently with a call to Effective.
func (p *Profile) DecodePluginConfig(section string, v any) error {
	switch section {
	case SectionFlush, SectionIndex, SectionReplication:
	default:
		return fmt.Errorf("decoding %s.config: unknown plugin section %q (want %q, %q or %q)", section, section, SectionFlush, SectionReplication, SectionIndex)
	}
	if err := config.DecodeSection(p.File, p.PluginConfig(section).Document, section, v); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plugins == nil {
		p.plugins = map[string]any{}
	}
	p.plugins[section] = v
	return nil
}

// Effective returns the profile as TOML with every default filled in, in a
// form Load reads back to an equal profile: what `keel profile check` prints.
// A plugin section's config is the value last decoded by DecodePluginConfig
// (with the plugin's defaults) when there is one, else the table as written.
// The output includes replication.secret; see EffectiveRedacted.
func (p *Profile) Effective() ([]byte, error) {
	return p.effective(false)
}

// secretKeys are the profile keys whose values are secrets. This list is
// the one place that says so: EffectiveRedacted redacts them, and
// IsSecretKey tells everything else that shows profile values (the admin
// API's /debug/pprof/cmdline, which shows `--set key=value`).
var secretKeys = []string{"replication.secret"}

// IsSecretKey reports whether the dotted profile key (as given to --set,
// "replication.secret", or with TOML quoting as `replication."secret"`)
// holds a secret whose value must never be shown: whether it is one of
// secretKeys. A key that does not parse is treated as a secret.
func IsSecretKey(dotted string) bool {
	path, err := config.ParseKey(strings.TrimSpace(dotted))
	if err != nil {
		return true
	}
	k := strings.Join(path, ".")
	for _, s := range secretKeys {
		if k == s {
			return true
		}
	}
	return false
}

// EffectiveRedacted is Effective with the secret keys (secretKeys)
// replaced by "(redacted)" when set, for printing.
func (p *Profile) EffectiveRedacted() ([]byte, error) {
	return p.effective(true)
}

func (p *Profile) effective(redact bool) ([]byte, error) {
	doc := document{
		Schema: p.Schema, Store: p.Store, Flush: p.Flush, Replication: p.Replication,
		Index: p.Index, Server: p.Server, Admin: p.Admin,
	}
	// secretKeys: replication.secret is the one secret field.
	if redact && doc.Replication.Secret != "" {
		doc.Replication.Secret = "(redacted)"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for section, dst := range map[string]*map[string]any{
		SectionFlush: &doc.Flush.Config, SectionIndex: &doc.Index.Config, SectionReplication: &doc.Replication.Config,
	} {
		v, ok := p.plugins[section]
		if !ok {
			continue
		}
		m, err := toMap(v)
		if err != nil {
			return nil, fmt.Errorf("writing effective profile: %s.config: %w", section, err)
		}
		*dst = m
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# Effective profile %q: every default filled in.\n\n", p.Name)
	if err := toml.NewEncoder(&buf).Encode(doc); err != nil {
		return nil, fmt.Errorf("writing effective profile: %w", err)
	}
	return buf.Bytes(), nil
}

// toMap converts a plugin config value to the generic table the host keeps.
func toMap(v any) (map[string]any, error) {
	b, err := toml.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := toml.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}
