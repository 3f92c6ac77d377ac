// Package pluginrpc is the host end of keel's plugin process boundary:
// Dial starts a plugin binary (one that calls sdk.Serve) through
// hashicorp/go-plugin and returns a Client whose FlushStrategy, Replicator
// and Indexer are sdk plugins running in that process; while one is
// started, the Host it was given is served back to the process over a
// brokered gRPC connection (hostServer).
//
// It is keel's own (host and sdk/plugintest use it); plugin authors see
// only sdk.Serve. What both ends share is in internal/pluginwire.
//
// Files: dial.go starts and connects the process, client.go is the
// running process, remote.go the sdk plugins over gRPC, hostserver.go the
// Host served to the plugin, wire.go the host end's conversions, hclog.go
// the plugin's logs into slog.
package pluginrpc
