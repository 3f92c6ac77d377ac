// Package pluginlane carries one gRPC service's calls over a plain unix
// socket, without HTTP/2: the lane between an external plugin and its host
// that the plugin's Host calls take (ReadLog, AppendLog,
// ReportReplication, the committed-offset watch, ...) when both ends have
// it. A Host call over the brokered gRPC connection costs about 200 µs of
// round trip and CPU on a 2-core machine; over a lane it is one small
// frame each way.
//
// The lane is a transport, not a second protocol: the client implements
// grpc.ClientConnInterface, so the generated client (pluginpb.NewHostClient)
// runs on it unchanged, and the server dispatches to the generated
// grpc.ServiceDesc's handlers with the same server implementation gRPC
// serves. Requests and responses are the same protobuf messages; errors
// are the same gRPC statuses, details included, so pluginwire.FromStatus
// reads them as it reads gRPC's.
//
// # Contract
//
//   - One server accepts exactly one connection, from a client that
//     presents the server's random token (NewServer makes both; the host
//     passes them to the plugin in its StartRequest). The socket file is
//     removed once that connection is accepted, or when the server closes.
//   - Unary methods and server-streaming methods are supported (one
//     request, any number of responses). A client- or bidi-streaming
//     method is refused with codes.Unimplemented, as is an unknown method.
//   - Each call runs in its own goroutine on the server, so a blocking call
//     (a wait for the committed offset) never delays another; calls made
//     concurrently may run in any order, as over gRPC.
//   - A call's context deadline travels with it; the client's context
//     ending cancels the server's (a cancel frame), and the call returns
//     the context's status (codes.Canceled or codes.DeadlineExceeded).
//   - When the connection fails, every call in flight and every later one
//     returns codes.Unavailable naming the cause; the server cancels every
//     handler's context.
//
// # Frames
//
// Every frame is a little-endian uint32 length (of what follows it),
// a type byte and a uint32 call id, then the type's body:
//
//	hello  (client→server, id 0) the token; answered by a reply, code 0
//	call   (client→server) uint8 name length, the full method name
//	       ("/keel.plugin.v1.Host/ReadLog"), int64 timeout in ns (0: none),
//	       the request message
//	reply  (server→client) uint32 gRPC code; code 0: the response
//	       message; otherwise a google.rpc.Status message
//	push   (server→client) one message of a server stream
//	end    (server→client) a stream's status, as in reply (code 0: done)
//	cancel (client→server) no body: the client gave up on the call
//
// A frame longer than MaxFrame, of an unknown type, or with a malformed
// body ends the connection with an error naming it.
package pluginlane
