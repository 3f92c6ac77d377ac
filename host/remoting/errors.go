package remoting

import (
	"errors"

	"github.com/keelmq/keel/core"
	"github.com/keelmq/keel/core/record"
	"github.com/keelmq/keel/sdk"
)

// Errors a Backend returns to select the broker's response code, beside
// core's own sentinels, which it returns unwrapped. A Backend wraps them with
// the specifics (fmt.Errorf("...: %w", ErrX)); the broker turns an error
// into a response code and remark with one table (errorCodes, below).
var (
	// ErrServiceUnavailable means the store cannot take writes now for a
	// reason unrelated to the message: disk full, read-only after an I/O
	// error, closed, or this broker is a slave. It becomes
	// SERVICE_NOT_AVAILABLE (14), which producers retry on another broker.
	// Nothing was stored.
	ErrServiceUnavailable = errors.New("service not available")
	// ErrMessageIllegal means the message itself was rejected (too large,
	// bad topic, properties too long). It becomes MESSAGE_ILLEGAL (13).
	// Errors wrapping record.ErrInvalid, record.ErrTooLarge or
	// record.ErrPropertiesTooLong are treated the same. Nothing was stored.
	ErrMessageIllegal = errors.New("message illegal")
	// ErrNotFound means ReadMessage found no message at the offset (never
	// written, not a record boundary, or removed by retention): it is
	// core's ErrOffset, so the store's errors need no rewrapping.
	ErrNotFound = core.ErrOffset
	// ErrNotSupported means the Backend lacks the capability (e.g.
	// QueryMessages with no key index loaded). It becomes
	// REQUEST_CODE_NOT_SUPPORTED (3). It is the sdk's sentinel, so a
	// plugin's answer needs no rewrapping.
	ErrNotSupported = sdk.ErrNotSupported
	// ErrCorrupt means the stored bytes of a record are damaged (bad CRC,
	// impossible lengths, a TOTALSIZE that disagrees with the consume
	// queue). The record is never served as if it were whole: the answer
	// is SYSTEM_ERROR with a remark naming the offset and the damage.
	ErrCorrupt = errors.New("stored record is damaged")
)

// errorCode is one row of errorCodes: an error wrapping err is answered
// code, with remark prefix+err.Error().
type errorCode struct {
	err    error
	code   int16
	prefix string
}

// unavailable prefixes the remark of the store's own refusals, as the
// remark of a refusal wrapping ErrServiceUnavailable begins.
const unavailable = "service not available: "

// errorCodes is the one table that turns an error from a Backend into a
// response code: the first row whose err the error wraps wins; an error
// wrapping none is SYSTEM_ERROR. It recognises core's sentinels directly
// (the host returns the store's errors as they are), with the remarks
// clients have always seen for them.
var errorCodes = []errorCode{
	{ErrServiceUnavailable, ServiceNotAvailable, ""},
	{ErrMessageIllegal, MessageIllegal, ""},
	{core.ErrMessage, MessageIllegal, ErrMessageIllegal.Error() + ": "},
	{core.ErrDiskFull, ServiceNotAvailable, unavailable + "the broker's disk is full: "},
	// A write stall that outlasted store.stall_timeout: the disk or the
	// dispatcher is behind; nothing was written.
	{core.ErrBusy, ServiceNotAvailable, unavailable},
	{core.ErrReadOnly, ServiceNotAvailable, unavailable},
	{core.ErrClosed, ServiceNotAvailable, unavailable},
	{record.ErrInvalid, MessageIllegal, ""},
	{record.ErrTooLarge, MessageIllegal, ""},
	{record.ErrPropertiesTooLong, MessageIllegal, ""},
	{ErrNotSupported, RequestCodeNotSupported, ""},
	{ErrCorrupt, SystemError, ""},
}

// errorResponse returns the response code errorCodes gives err, and its
// remark.
func errorResponse(err error) (code int16, remark string) {
	for _, r := range errorCodes {
		if errors.Is(err, r.err) {
			return r.code, r.prefix + err.Error()
		}
	}
	return SystemError, err.Error()
}
