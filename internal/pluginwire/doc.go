// Package pluginwire is what both ends of keel's plugin process boundary
// share: the go-plugin handshake and plugin set, the gRPC message limits,
// the error vocabulary that keeps its identity across the boundary, and
// the conversions of the types both ends send (positions, epochs).
//
// The plugin end is package sdk (sdk.Serve); the host end is package
// internal/pluginrpc (the go-plugin client and the Host server). sdk
// imports this package, so this package never imports sdk: the sdk
// sentinels are defined here and exported by sdk under their sdk names,
// and the shared types are core's (sdk.Positions is core.Positions,
// sdk.Epoch is epoch.Entry). The conversions of the types only one end
// sends live with that end.
package pluginwire
