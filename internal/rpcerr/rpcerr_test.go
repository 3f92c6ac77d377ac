package rpcerr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"pgregory.net/rapid"

	"github.com/keelmq/keel/internal/pluginpb"
)

var (
	errA = errors.New("a failed")
	errB = errors.New("b failed")
	errC = errors.New("c failed")
)

var table = Table{
	{Name: "a", Err: errA, Code: codes.Unavailable},
	{Name: "b", Err: errB, Code: codes.OutOfRange},
	{Name: "c", Err: errC, Code: codes.Unimplemented},
	{Name: "ctx_canceled", Err: context.Canceled, Code: codes.Canceled},
	{Name: "ctx_deadline", Err: context.DeadlineExceeded, Code: codes.DeadlineExceeded},
}

func TestRoundTripKeepsIdentityAndText(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		// An error wrapping a random subset of sentinels, with a random
		// message around them.
		var wrapped []error
		for _, s := range table {
			if rapid.Bool().Draw(t, "wrap "+s.Name) {
				wrapped = append(wrapped, s.Err)
			}
		}
		msg := rapid.String().Draw(t, "msg")
		var err error = errors.New(msg)
		for _, w := range wrapped {
			err = fmt.Errorf("%w: %w", err, w)
		}
		got := table.FromStatus(table.ToStatus(err))
		if got.Error() != err.Error() {
			t.Fatalf("text %q, want %q", got, err)
		}
		for _, s := range table {
			if errors.Is(got, s.Err) != errors.Is(err, s.Err) {
				t.Fatalf("errors.Is(_, %s) = %v after the round trip, %v before", s.Name, errors.Is(got, s.Err), errors.Is(err, s.Err))
			}
		}
		// The code is the first matching sentinel's.
		st, _ := status.FromError(table.ToStatus(err))
		want := codes.Unknown
		for _, s := range table {
			if errors.Is(err, s.Err) {
				want = s.Code
				break
			}
		}
		if st.Code() != want {
			t.Fatalf("code %v, want %v", st.Code(), want)
		}
		// A second crossing (host → plugin → host) changes nothing.
		again := table.FromStatus(table.ToStatus(got))
		if again.Error() != err.Error() {
			t.Fatalf("second crossing: text %q", again)
		}
		for _, s := range table {
			if errors.Is(again, s.Err) != errors.Is(err, s.Err) {
				t.Fatalf("second crossing: identity of %s changed", s.Name)
			}
		}
	})
}

func TestNil(t *testing.T) {
	if table.ToStatus(nil) != nil || table.FromStatus(nil) != nil {
		t.Fatal("nil not kept")
	}
	if table.FromStatus(status.Error(codes.OK, "")) != nil {
		t.Fatal("OK status is not nil")
	}
}

func TestStatusWithoutDetails(t *testing.T) {
	for _, tc := range []struct {
		code codes.Code
		want error
	}{
		{codes.Unavailable, errA},   // transport failure: the Unavailable sentinel
		{codes.Unimplemented, errC}, // older peer without the RPC
		{codes.Canceled, context.Canceled},
		{codes.DeadlineExceeded, context.DeadlineExceeded},
		{codes.Internal, nil},
	} {
		err := table.FromStatus(status.Error(tc.code, "transport says no"))
		if err.Error() != "transport says no" {
			t.Errorf("%v: text %q", tc.code, err)
		}
		for _, s := range table {
			if errors.Is(err, s.Err) != (s.Err == tc.want) {
				t.Errorf("%v: errors.Is(%s) = %v", tc.code, s.Name, errors.Is(err, s.Err))
			}
		}
		var re *Error
		if !errors.As(err, &re) || re.Code != tc.code {
			t.Errorf("%v: not an *Error with the code: %#v", tc.code, err)
		}
	}
}

func TestNonStatusErrorPassesThrough(t *testing.T) {
	e := errors.New("plain")
	if got := table.FromStatus(e); got != e {
		t.Fatalf("got %v", got)
	}
}

func TestUnknownSentinelNamesIgnored(t *testing.T) {
	st, _ := status.New(codes.Unavailable, "from the future").WithDetails(&pluginpb.ErrorDetail{Sentinels: []string{"quantum", "a"}})
	err := table.FromStatus(st.Err())
	if !errors.Is(err, errA) || errors.Is(err, errB) || err.Error() != "from the future" {
		t.Fatalf("got %v", err)
	}
}

// FuzzFromStatus: whatever status (code, message, detail bytes) arrives,
// FromStatus never panics, keeps the message, and only yields table
// sentinels.
func FuzzFromStatus(f *testing.F) {
	d, _ := anypb.New(&pluginpb.ErrorDetail{Sentinels: []string{"a", "b"}})
	f.Add(uint32(codes.Unavailable), "host gone", d.Value, d.TypeUrl)
	f.Add(uint32(codes.OutOfRange), "offset 7 out of range", []byte{0x0a, 0x01, 'b'}, "type.googleapis.com/keel.plugin.v1.ErrorDetail")
	f.Add(uint32(99), "", []byte{0xff, 0xff}, "type.googleapis.com/keel.plugin.v1.ErrorDetail")
	f.Add(uint32(codes.Internal), "x", []byte{}, "type.googleapis.com/google.protobuf.Empty")
	f.Fuzz(func(t *testing.T, code uint32, msg string, detail []byte, typeURL string) {
		p := status.New(codes.Code(code), msg).Proto()
		p.Details = append(p.Details, &anypb.Any{TypeUrl: typeURL, Value: detail})
		err := table.FromStatus(status.ErrorProto(p))
		if codes.Code(code) == codes.OK {
			return
		}
		if err == nil || err.Error() != status.FromProto(p).Message() {
			t.Fatalf("message not kept: %v", err)
		}
		var re *Error
		if !errors.As(err, &re) {
			t.Fatalf("not an *Error: %T", err)
		}
		for _, e := range re.Unwrap() {
			found := false
			for _, s := range table {
				found = found || s.Err == e
			}
			if !found {
				t.Fatalf("unexpected wrapped error %v", e)
			}
		}
	})
}
