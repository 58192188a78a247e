package flightserver

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tsflight/tsflight/tableformat"
)

// plansDuring returns how many scans the process planned while f ran (the
// test runs alone: it is not parallel, so no parallel test runs with it).
func plansDuring(f func()) uint64 {
	before := tableformat.ScanPlansMade()
	f()
	return tableformat.ScanPlansMade() - before
}

// TestPlansOncePerRequest: over a real server, GetFlightInfo and GetSchema
// plan the scan once, and each DoGet of an endpoint plans once: it cuts the
// part its ticket names from its one plan and reads it without planning
// again. The endpoints together return the rows of the request.
func TestPlansOncePerRequest(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.MaxEndpoints = 3 })
	ctx := ctxT(t)
	model := flatten(loadWindows(t, ts, "cpu", 5))
	from := timeOfStep(1500)
	for _, c := range []struct {
		name string
		desc *flight.FlightDescriptor
		want []row
	}{
		{"whole table", pathDesc("cpu"), model},
		{"range and entity", cmdDesc(t, map[string]any{"table": "cpu", "start": rfc(from), "entity": map[string]string{"hostname": "host_1"}}),
			filterRows(model, func(r row) bool { return r.ts >= t0.Add(from).UnixNano() && r.host == "host_1" })},
	} {
		var info *flight.FlightInfo
		if n := plansDuring(func() { info = ts.info(ctx, c.desc) }); n != 1 {
			t.Fatalf("%s: GetFlightInfo planned %d scans, want 1", c.name, n)
		}
		if n := plansDuring(func() {
			if _, err := ts.client.GetSchema(ctx, c.desc); err != nil {
				t.Fatalf("%s: GetSchema: %v", c.name, err)
			}
		}); n != 1 {
			t.Fatalf("%s: GetSchema planned %d scans, want 1", c.name, n)
		}
		if len(info.Endpoint) < 2 {
			t.Fatalf("%s: %d endpoints, want several", c.name, len(info.Endpoint))
		}
		var got []row
		for i, ep := range info.Endpoint {
			var part *fetched
			n := plansDuring(func() {
				var err error
				if part, err = ts.doGet(ctx, ep.Ticket); err != nil {
					t.Fatalf("%s: DoGet of endpoint %d: %v", c.name, i, err)
				}
			})
			if n != 1 {
				t.Fatalf("%s: DoGet of endpoint %d planned %d scans, want 1", c.name, i, n)
			}
			got = append(got, part.rows...)
		}
		sameRows(t, c.name, got, c.want)
	}
}
