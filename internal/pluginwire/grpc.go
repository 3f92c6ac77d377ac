package pluginwire

import (
	"math"

	"google.golang.org/grpc"
)

// MaxMsg lifts gRPC's 4 MiB default message limit on both ends: ReadLog
// and AppendLog carry up to a segment's worth of bytes when asked to.
const MaxMsg = math.MaxInt32

// ServerOptions are the options of every gRPC server of the boundary (the
// plugin's services and the host's Host service).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(MaxMsg), grpc.MaxSendMsgSize(MaxMsg)}
}

// CallOptions is the dial option of every gRPC client of the boundary.
func CallOptions() grpc.DialOption {
	return grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMsg), grpc.MaxCallSendMsgSize(MaxMsg))
}
