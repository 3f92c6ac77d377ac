// Package rpcerr carries error identity across keel's plugin process
// boundary. An error crossing it becomes a gRPC status whose message is the
// error's text and whose details name every registered sentinel the error
// matched with errors.Is; on the other side FromStatus rebuilds an *Error
// with the same text that matches the same sentinels.
//
// The sentinel table is passed in (package internal/pluginwire holds keel's,
// with the sentinels package sdk exports).
package rpcerr

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/keelmq/keel/internal/pluginpb"
)

// Sentinel is one error whose identity survives the boundary.
type Sentinel struct {
	// Name is its wire name; it must never change once released.
	Name string
	// Err is the sentinel value tested with errors.Is.
	Err error
	// Code is the gRPC code an error matching it travels with (the first
	// matching entry of the table decides the code).
	Code codes.Code
}

// Table is an ordered list of sentinels. Order matters for the gRPC code
// only: the first entry an error matches gives its code.
type Table []Sentinel

// Error is an error rebuilt from a gRPC status: its text is the original
// error's text, and errors.Is matches every sentinel the original matched.
type Error struct {
	// Code is the gRPC status code it travelled with.
	Code codes.Code
	msg  string
	errs []error
}

// Error returns the original error's text.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the sentinels the original error matched.
func (e *Error) Unwrap() []error { return e.errs }

// ToStatus converts err into an error carrying a gRPC status (nil for nil).
// The status message is err.Error(); the code is that of the first
// sentinel in t that err matches, codes.Unknown when it matches none (or
// the code of a status error that matched none); the details list every
// sentinel matched.
func (t Table) ToStatus(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Unknown
	var names []string
	for _, s := range t {
		if errors.Is(err, s.Err) {
			if names == nil {
				code = s.Code
			}
			names = append(names, s.Name)
		}
	}
	if names == nil {
		var re *Error
		if errors.As(err, &re) {
			code = re.Code
		} else if st, ok := status.FromError(err); ok && st.Code() != codes.OK {
			code = st.Code()
		}
	}
	st := status.New(code, err.Error())
	if len(names) > 0 {
		if withDetail, derr := st.WithDetails(&pluginpb.ErrorDetail{Sentinels: names}); derr == nil {
			st = withDetail
		}
	}
	return st.Err()
}

// FromStatus converts an error returned by a gRPC call back into an error
// matching what the sender's error matched (nil for nil). A status with
// sentinel details becomes an *Error with the status message as text
// (unknown sentinel names, from a newer peer, are ignored). A status
// without details (a transport failure, or a deadline that expired on the
// caller's side) is mapped by code: Unavailable to the table's
// codes.Unavailable sentinel, Unimplemented to the codes.Unimplemented
// sentinel (an older peer lacking the RPC), Canceled and DeadlineExceeded
// to the context errors. An error that is not a status is returned as is.
func (t Table) FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	if st.Code() == codes.OK {
		return nil
	}
	var errs []error
	sawDetail := false
	for _, d := range st.Details() {
		ed, ok := d.(*pluginpb.ErrorDetail)
		if !ok {
			continue
		}
		sawDetail = true
		for _, name := range ed.GetSentinels() {
			for _, s := range t {
				if s.Name == name {
					errs = appendOnce(errs, s.Err)
				}
			}
		}
	}
	if !sawDetail {
		switch st.Code() {
		case codes.Canceled:
			errs = append(errs, context.Canceled)
		case codes.DeadlineExceeded:
			errs = append(errs, context.DeadlineExceeded)
		case codes.Unavailable, codes.Unimplemented:
			for _, s := range t {
				if s.Code == st.Code() {
					errs = append(errs, s.Err)
					break
				}
			}
		}
	}
	return &Error{Code: st.Code(), msg: st.Message(), errs: errs}
}

func appendOnce(errs []error, e error) []error {
	for _, x := range errs {
		if x == e {
			return errs
		}
	}
	return append(errs, e)
}
