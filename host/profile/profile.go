// Package profile loads keel's TOML profiles: the file that chooses the
// storage settings, the plugins (flush strategy, replication, indexing) and
// the listeners of one `keel serve` process.
//
// # Format
//
// A profile is a TOML document with a schema version and these sections:
//
//	schema = 1
//
//	[store]          # the commitlog core (StoreConfig)
//	[flush]          # flush strategy plugin (PluginSection)
//	[replication]    # replication plugin and HA role (ReplicationSection)
//	[index]          # indexer plugin (PluginSection)
//	[server]         # RocketMQ remoting listeners and broker identity (ServerConfig)
//	[admin]          # metrics, /status, pprof (AdminConfig)
//	[acl]            # access control: accounts and permissions (acl.Config)
//
// Every section and key is optional except schema; missing keys take the
// defaults documented on each field (RocketMQ's where it has one). A plugin
// section names a builtin plugin (plugin = "sync") or an external go-plugin
// binary (path = "bin/my-repl", sha256 = "…"), and carries a [flush.config]
// (etc.) table that belongs to the plugin: the host keeps it as a generic map
// and the plugin decodes it into its own struct, just as strictly, with
// sdk.Config.Decode on what (*Profile).PluginConfig returns (in-process
// callers may use (*Profile).DecodePluginConfig, which runs the same code).
// A plugin is handed that table and nothing else of the profile: no other
// section, and no secret but its own (sdk.Config.Secret, for replication).
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
	"path/filepath"
	"slices"
	"sync"

	"github.com/keelmq/keel/host/acl"
	"github.com/keelmq/keel/sdk"
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

// Replication roles: the values of replication.role, which the host hands
// every plugin as sdk.Config.Role; the sdk's constants, named here for the
// profile.
const (
	RoleMaster = sdk.RoleMaster
	RoleSlave  = sdk.RoleSlave
)

// Process roles: the values of server.roles.
const (
	RoleNamesrv    = "namesrv"    // a name server (GET_ROUTEINFO_BY_TOPIC, REGISTER_BROKER, ...)
	RoleBroker     = "broker"     // the store, its plugins and the broker protocol
	RoleController = "controller" // a member of the raft controller group
)

// HasRole reports whether server.roles has role.
func (p *Profile) HasRole(role string) bool { return slices.Contains(p.Server.Roles, role) }

// ClusterMode reports whether this broker follows controllers
// (controller.addrs is set): the controller decides its replication role.
func (p *Profile) ClusterMode() bool { return p.HasRole(RoleBroker) && len(p.Controller.Addrs) > 0 }

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
	Controller  ControllerConfig
	Admin       AdminConfig
	// ACL is the broker's access control (package host/acl).
	ACL acl.Config

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

// ResolvePath returns path made absolute or relative to the working directory:
// an absolute path is returned unchanged; a relative one is joined to the
// profile's directory, as plugin paths are.
func (p *Profile) ResolvePath(path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(p.Dir, path)
}
