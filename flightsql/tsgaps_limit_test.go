//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/flightserver"
)

// TestTsGapsReturnsEveryGap: ts_gaps returns every gap of its range, more
// than the gaps action lists by default, and a range with more gaps than
// one call may return is RESOURCE_EXHAUSTED naming the bound, never a
// silently shortened answer.
func TestTsGapsReturnsEveryGap(t *testing.T) {
	n := flightserver.DefaultGapsLimit + 500
	cl, _, stop := gapsServer(t, n)
	defer stop()
	ctx := context.Background()
	got, err := runScalar(ctx, cl, gapsQuery(n))
	if want := fmt.Sprintf("%d|%d", n, n); err != nil || got != want {
		t.Fatalf("%s = %q, %v; want %s", gapsQuery(n), got, err, want)
	}
	saved := tsGapsMax
	tsGapsMax = n - 1
	defer func() { tsGapsMax = saved }()
	_, err = runScalar(ctx, cl, gapsQuery(n))
	wantCode(t, "ts_gaps beyond its bound", err, codes.ResourceExhausted, "ts_gaps", fmt.Sprintf("more than %d gaps", n-1), "narrow the range")
}

// TestTsGapsRefusesFarBeyondItsBound: through a real listener, a ts_gaps
// range holding thousands of times more gaps than the (lowered) maximum is
// RESOURCE_EXHAUSTED naming the maximum (the table layer stops walking at
// the gap after it), while a range at the maximum is answered in full.
func TestTsGapsRefusesFarBeyondItsBound(t *testing.T) {
	const n, most = 50_000, 10
	cl, _, stop := gapsServer(t, n)
	defer stop()
	saved := tsGapsMax
	tsGapsMax = most
	defer func() { tsGapsMax = saved }()
	ctx := context.Background()
	_, err := runScalar(ctx, cl, gapsQuery(n))
	wantCode(t, "ts_gaps over 5,000 times its bound", err, codes.ResourceExhausted, "ts_gaps", fmt.Sprintf("more than %d gaps", most), "narrow the range")
	got, err := runScalar(ctx, cl, gapsQuery(most))
	if want := fmt.Sprintf("%d|%d", most, most); err != nil || got != want {
		t.Fatalf("%s = %q, %v; want %s", gapsQuery(most), got, err, want)
	}
}
