package pluginwire

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/keelmq/keel/internal/rpcerr"
)

// The sentinels package sdk exports (sdk.ErrUnavailable and the rest,
// documented there). They are defined here so that both ends map the same
// values.
var (
	ErrUnavailable   = errors.New("unavailable")
	ErrTimeout       = errors.New("timed out")
	ErrInvalidConfig = errors.New("invalid plugin configuration")
	ErrOffset        = errors.New("offset out of range")
	ErrNotSupported  = errors.New("not supported")
	ErrFenced        = errors.New("writes fenced")
)

// errTable maps the sentinels (and the context errors) onto gRPC codes and
// wire names. The names are part of the protocol: never change them.
var errTable = rpcerr.Table{
	{Name: "unavailable", Err: ErrUnavailable, Code: codes.Unavailable},
	{Name: "timeout", Err: ErrTimeout, Code: codes.DeadlineExceeded},
	{Name: "invalid_config", Err: ErrInvalidConfig, Code: codes.InvalidArgument},
	{Name: "offset", Err: ErrOffset, Code: codes.OutOfRange},
	{Name: "not_supported", Err: ErrNotSupported, Code: codes.Unimplemented},
	{Name: "fenced", Err: ErrFenced, Code: codes.FailedPrecondition},
	{Name: "context_canceled", Err: context.Canceled, Code: codes.Canceled},
	{Name: "context_deadline", Err: context.DeadlineExceeded, Code: codes.DeadlineExceeded},
}

// ToStatus is what a server of the boundary returns for err: a gRPC status
// that FromStatus on the other end turns back into an error matching the
// same sentinels (rpcerr.Table.ToStatus).
func ToStatus(err error) error { return errTable.ToStatus(err) }

// FromStatus turns an error a client of the boundary got back into one
// matching what the server's error matched (rpcerr.Table.FromStatus).
func FromStatus(err error) error { return errTable.FromStatus(err) }
