package meta

import (
	"fmt"
	"time"
)

// DataVersion identifies one state of a metadata table, as RocketMQ's
// DataVersion does. Two tables with equal versions are assumed to hold the
// same content; replication skips copying a table whose version equals the
// source's. The zero value is a valid (initial) version.
type DataVersion struct {
	// StateVersion identifies the lineage of the table (for example a
	// broker's incarnation); Next leaves it unchanged.
	StateVersion int64 `json:"stateVersion"`
	// Timestamp is the wall-clock time of the last change, in Unix
	// milliseconds.
	Timestamp int64 `json:"timestamp"`
	// Counter counts changes; Next increments it.
	Counter int64 `json:"counter"`
}

// Next returns the version following v: the same StateVersion, the current
// time as Timestamp and Counter+1. The result never equals v.
func (v DataVersion) Next() DataVersion {
	return DataVersion{StateVersion: v.StateVersion, Timestamp: time.Now().UnixMilli(), Counter: v.Counter + 1}
}

// Equal reports whether v and o are the same version (all three fields
// equal).
func (v DataVersion) Equal(o DataVersion) bool { return v == o }

// String formats v for logs and errors.
func (v DataVersion) String() string {
	return fmt.Sprintf("{state=%d ts=%d counter=%d}", v.StateVersion, v.Timestamp, v.Counter)
}

// newVersion is the version of a table that has never been written: counter
// 0 and the current time, so that two fresh tables on different brokers are
// unlikely to compare equal.
func newVersion() DataVersion { return DataVersion{Timestamp: time.Now().UnixMilli()} }
