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
