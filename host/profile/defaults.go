package profile

import (
	"path/filepath"
	"time"

	"github.com/keelmq/keel/core"
)

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
