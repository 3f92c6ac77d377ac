package namesrv

import (
	"errors"
	"fmt"
	"time"

	"github.com/keelmq/keel/core/meta"
)

// MasterID is the broker id of a group's master, as in RocketMQ's
// MixAll.MASTER_ID.
const MasterID int64 = 0

// ErrInvalid is wrapped by every error that rejects a registration,
// unregistration or request header because it breaks a documented rule.
// Nothing is changed when it is returned.
var ErrInvalid = errors.New("namesrv: invalid request")

// Registration is one broker's REGISTER_BROKER request, decoded: the same
// type whether it arrived over the wire or through Server.RegisterBroker.
type Registration struct {
	// Cluster is the cluster name (header clusterName). Required.
	Cluster string
	// BrokerName names the broker group (master and slaves share it).
	// Required.
	BrokerName string
	// BrokerAddr is the client-facing "host:port", exactly as clients must
	// dial it. Required; it identifies the broker within Cluster.
	BrokerAddr string
	// BrokerID is 0 (MasterID) for the master, > 0 for a slave.
	BrokerID int64
	// HAServerAddr is the broker's replication listener; slaves learn their
	// master's from the answer. May be empty.
	HAServerAddr string
	// HeartbeatTimeout is how long the name server keeps the broker after
	// its last registration (header heartbeatTimeoutMillis); 0 means the
	// server's Config.ExpireAfter.
	HeartbeatTimeout time.Duration
	// Topics is the broker's whole topic table, by topic name. Every entry
	// must pass meta.TopicConfig.Validate and have its key as TopicName.
	Topics map[string]meta.TopicConfig
	// DataVersion is the topic table's version (QUERY_DATA_VERSION compares
	// it).
	DataVersion meta.DataVersion
	// FilterServers is RocketMQ's filterServerList, kept as received.
	FilterServers []string
}

// RegisterResult is the answer to a registration (RocketMQ's
// RegisterBrokerResult without the KV table): for a slave, its group's
// master address and that master's HA address when the master is
// registered; empty otherwise.
type RegisterResult struct {
	HAServerAddr string
	MasterAddr   string
}

// validate checks what the registry relies on. Errors wrap ErrInvalid.
func (r *Registration) validate() error {
	if err := validateIdentity(r.Cluster, r.BrokerName, r.BrokerAddr, r.BrokerID); err != nil {
		return err
	}
	if r.HeartbeatTimeout < 0 {
		return fmt.Errorf("%w: negative heartbeat timeout %v", ErrInvalid, r.HeartbeatTimeout)
	}
	for name, tc := range r.Topics {
		if tc.TopicName != name {
			return fmt.Errorf("%w: topic table key %q holds topic %q", ErrInvalid, name, tc.TopicName)
		}
		if err := tc.Validate(); err != nil {
			return fmt.Errorf("%w: topic %q: %v", ErrInvalid, name, err)
		}
	}
	return nil
}

// validateIdentity checks a broker's identity fields. Errors wrap
// ErrInvalid.
func validateIdentity(cluster, name, addr string, id int64) error {
	switch {
	case cluster == "":
		return fmt.Errorf("%w: empty cluster name", ErrInvalid)
	case name == "":
		return fmt.Errorf("%w: empty broker name", ErrInvalid)
	case addr == "":
		return fmt.Errorf("%w: empty broker address", ErrInvalid)
	case id < 0:
		return fmt.Errorf("%w: broker id %d is negative", ErrInvalid, id)
	}
	return nil
}
