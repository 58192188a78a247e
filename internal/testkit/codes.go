package testkit

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Context returns a context that ends after two minutes or when t ends,
// whichever comes first: what a server test's calls run under.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// WantCode fails t unless err carries the gRPC code and its message
// contains every fragment; what names the call in the failure.
func WantCode(t testing.TB, what string, err error, code codes.Code, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want %v", what, code)
	}
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("%s: code %v (%s), want %v", what, st.Code(), st.Message(), code)
	}
	for _, f := range fragments {
		if !strings.Contains(st.Message(), f) {
			t.Fatalf("%s: message %q does not mention %q", what, st.Message(), f)
		}
	}
}

// BadCodes are the codes no client input may get from a server: they
// mean a bug (Internal, Unknown), damage (DataLoss) or a server that is
// not well.
var BadCodes = []codes.Code{codes.Internal, codes.Unknown, codes.DataLoss, codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.Canceled}

// CheckCode is the fuzz targets' check of a refusal: err must carry a gRPC
// status whose code is not one of BadCodes. It returns the code.
func CheckCode(t testing.TB, what string, err error) codes.Code {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%s: error without a gRPC status: %v", what, err)
	}
	if slices.Contains(BadCodes, st.Code()) {
		t.Fatalf("%s: code %v: %s", what, st.Code(), st.Message())
	}
	return st.Code()
}
