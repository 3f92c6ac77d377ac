package pluginlane

import (
	"encoding/binary"
	"fmt"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// appendStatus encodes err as a reply or end frame's body: its gRPC code,
// then (when not OK) the whole status, details included. A nil err is
// code 0 with nothing after it.
func appendStatus(b []byte, err error) []byte {
	st := status.Convert(err)
	b = binary.LittleEndian.AppendUint32(b, uint32(st.Code()))
	if st.Code() == codes.OK {
		return b
	}
	enc, merr := proto.Marshal(st.Proto())
	if merr != nil {
		enc, _ = proto.Marshal(status.New(st.Code(), st.Message()).Proto())
	}
	return append(b, enc...)
}

// decodeStatus is appendStatus's reverse for a non-OK code: the status
// error the server returned.
func decodeStatus(code uint32, rest []byte) error {
	var p spb.Status
	if err := proto.Unmarshal(rest, &p); err != nil {
		return status.Errorf(codes.Internal, "plugin lane: undecodable status (code %d): %v", code, err)
	}
	if p.Code != int32(code) {
		return status.Errorf(codes.Internal, "plugin lane: status code %d in a frame of code %d", p.Code, code)
	}
	if code == uint32(codes.OK) {
		return fmt.Errorf("plugin lane: decodeStatus called for OK")
	}
	return status.FromProto(&p).Err()
}
