package profile

import (
	"fmt"
	"path/filepath"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/host/controller"
	"github.com/keelmq/keel/host/namesrv"
	"github.com/keelmq/keel/host/remoting"
	"github.com/keelmq/keel/host/schedule"
	"github.com/keelmq/keel/host/timer"
	"github.com/keelmq/keel/host/txn"
)

// PluginNone is the builtin plugin name that selects no plugin; see Chosen.
// It is the default of [replication] plugin.
const PluginNone = "none"

// DefaultAdminAddr is the default of admin.addr, the admin HTTP listener;
// clients of the admin API (keel admin) dial it when told nothing else.
const DefaultAdminAddr = "127.0.0.1:10914"

// defaults returns the document with every default, for a profile called name.
//
// A default some other package already owns (the store's in core, the
// remoting listeners' in host/remoting) is taken from there, so that the
// profile and a caller leaving the field zero get the same value.
func defaults(name string) document {
	return document{
		Schema: SchemaVersion,
		Store: StoreConfig{
			Dir:                    filepath.Join("data", name),
			SegmentSize:            core.DefaultSegmentSize,
			MaxMessageSize:         core.DefaultMaxMessageSize,
			CQEntriesPerFile:       core.DefaultCQEntriesPerFile,
			FileReservedTime:       Duration(core.DefaultRetention),
			DeleteWhen:             fmt.Sprintf("%02d", core.DefaultDeleteHour),
			DiskMaxUsedRatio:       core.DefaultDiskMaxUsedRatio,
			DiskCleanForciblyRatio: core.DefaultCleanForciblyRatio,
			DiskWarningRatio:       core.DefaultWarningRatio,
			ReadCache:              0,
			CheckCRCOnRecover:      true,
			RecoveryTail:           core.DefaultRecoveryTail,
			StallTimeout:           Duration(core.DefaultStallTimeout),
			AutoCreateTopics:       true,
			EnablePropertyFilter:   true,
			DefaultQueues:          remoting.DefaultQueueNums,
			MessageDelayLevel:      schedule.DefaultLevels,
			TimerEnable:            true,
			TimerMaxDelay:          Duration(timer.DefaultMaxDelay),
			TimerPrecision:         Duration(timer.DefaultPrecision),

			// Transactions (host/txn).
			TransactionCheckInterval: Duration(txn.DefaultCheckInterval),
			TransactionTimeout:       Duration(txn.DefaultTimeout),
			TransactionCheckMax:      txn.DefaultMaxChecks,
		},
		Flush:       PluginSection{Plugin: "async"},
		Replication: ReplicationSection{Plugin: PluginNone, Role: RoleMaster},
		Index:       PluginSection{Plugin: "hash"},
		Server: ServerConfig{
			NamesrvAddr:    "127.0.0.1:9876",
			BrokerAddr:     "127.0.0.1:10911",
			HAAddr:         "127.0.0.1:10912",
			BrokerName:     remoting.DefaultBrokerName,
			Cluster:        remoting.DefaultCluster,
			BrokerID:       0,
			MaxConnections: 4096,
			MaxFrameSize:   remoting.DefaultMaxFrame,
			IdleTimeout:    Duration(remoting.DefaultIdleTimeout),
			// 16 frames of the largest size; a fraction of a typical
			// host's memory, and far above what a steady load holds.
			RequestBufferBudget: remoting.DefaultRequestBudget,
			Roles:               []string{RoleNamesrv, RoleBroker},
			RegisterInterval:    Duration(namesrv.DefaultRegisterInterval),
		},
		Controller: ControllerConfig{
			Addr:             "127.0.0.1:9878",
			RaftAddr:         "127.0.0.1:9880",
			NodeID:           "c0",
			HeartbeatTimeout: Duration(controller.DefaultHeartbeatTimeout),
		},
		Admin: AdminConfig{Addr: DefaultAdminAddr},
	}
}
