package pluginwire

import "github.com/keelmq/keel/internal/pluginpb"

// The servers of the boundary answer through these: the value, or err
// as a status (ToStatus).

// BytesReply answers b, or err.
func BytesReply(b []byte, err error) (*pluginpb.Bytes, error) {
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pluginpb.Bytes{Data: b}, nil
}

// OffsetReply answers off, or err.
func OffsetReply(off int64, err error) (*pluginpb.Offset, error) {
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pluginpb.Offset{Offset: off}, nil
}

// EmptyReply answers success, or err.
func EmptyReply(err error) (*pluginpb.Empty, error) {
	if err != nil {
		return nil, ToStatus(err)
	}
	return &pluginpb.Empty{}, nil
}

// The clients of the boundary take a call's result through these: the
// reply's value, or the status as an error (FromStatus).

// BytesResult returns r's data, or err.
func BytesResult(r *pluginpb.Bytes, err error) ([]byte, error) {
	if err != nil {
		return nil, FromStatus(err)
	}
	return r.GetData(), nil
}

// OffsetResult returns r's offset, or err.
func OffsetResult(r *pluginpb.Offset, err error) (int64, error) {
	if err != nil {
		return 0, FromStatus(err)
	}
	return r.GetOffset(), nil
}

// EmptyResult returns err.
func EmptyResult(_ *pluginpb.Empty, err error) error { return FromStatus(err) }
