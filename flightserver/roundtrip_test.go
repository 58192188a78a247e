package flightserver

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/tsflight/tsflight/internal/testkit"
)

// TestRoundTrip creates a table, appends a TSBS-like stream in several
// puts of several batches, and reads it back through every surface:
// ListFlights, describe-table, GetFlightInfo + parallel DoGet, GetSchema.
func TestRoundTrip(t *testing.T) {
	ts, ctx := startWithCPU(t)

	// Three puts over consecutive windows, each in batches of 700 rows.
	var model []row
	for i, steps := range []int{1000, 1000, 500} {
		rows := genRows(t0.Add(timeOfStep(len(model)/4)), steps, 4)
		ts.mustPut(ctx, pathDesc("cpu"), rows, 700, uint64(2+i))
		model = append(model, rows...)
	}
	tableDir := filepath.Join(ts.root, "cpu")
	bytesOnDisk := onDiskBytes(t, tableDir)

	// ListFlights: one table with its rows, bytes and schema.
	infos := listFlights(t, ts)
	if len(infos) != 1 {
		t.Fatalf("ListFlights: %d flights, want 1", len(infos))
	}
	li := infos[0]
	if d := li.FlightDescriptor; d.Type != flight.DescriptorPATH || !reflect.DeepEqual(d.Path, []string{"cpu"}) {
		t.Fatalf("ListFlights descriptor %v, want PATH [cpu]", d)
	}
	if li.TotalRecords != int64(len(model)) || li.TotalBytes != bytesOnDisk {
		t.Fatalf("ListFlights: %d rows and %d bytes, want %d and %d", li.TotalRecords, li.TotalBytes, len(model), bytesOnDisk)
	}
	if s := ts.schemaOf(li.Schema); !s.Equal(tsbsSchema) {
		t.Fatalf("ListFlights schema %s, want %s", s, tsbsSchema)
	}

	// describe-table.
	desc := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	want := map[string]any{
		"table": "cpu", "version": 4.0, "protocol_version": 7.0,
		"reader_features": []any{}, "writer_features": []any{},
		"format": map[string]any{"protocol": 7.0, "reader_features": []any{}, "writer_features": []any{}, "needs_upgrade": false},
		"schema": []any{
			map[string]any{"name": "ts", "type": "timestamp[ns, tz=UTC]", "nullable": false},
			map[string]any{"name": "hostname", "type": "utf8", "nullable": false},
			map[string]any{"name": "usage_user", "type": "int64", "nullable": true},
			map[string]any{"name": "usage_system", "type": "int64", "nullable": true},
			map[string]any{"name": "usage_idle", "type": "int64", "nullable": true},
		},
		"index":    map[string]any{"column": "ts", "type": "timestamp", "granularity": "10s", "entity_columns": []any{"hostname"}, "timezone": nil},
		"segments": 3.0, "rows": float64(len(model)), "bytes": float64(bytesOnDisk),
		// This server runs no maintenance (RunMaintenance).
		"maintenance": map[string]any{"enabled": false, "paused": false, "pending": 0.0, "small_segments": 0.0, "small_bytes": 0.0,
			"min_small_segments": 0.0, "running": false, "runs": 0.0, "merged": 0.0},
		"properties": map[string]any{},
	}
	if _, ok := desc["created_at"].(string); !ok {
		t.Fatalf("describe-table: created_at %v is not a string", desc["created_at"])
	}
	delete(desc, "created_at")
	if !reflect.DeepEqual(desc, want) {
		got, _ := json.Marshal(desc)
		exp, _ := json.Marshal(want)
		t.Fatalf("describe-table:\n got %s\nwant %s", got, exp)
	}

	// GetFlightInfo on the PATH descriptor: one endpoint per segment (up
	// to the cap), no locations; fetching them all in parallel gives back
	// exactly what was put.
	info := ts.info(ctx, pathDesc("cpu"))
	wantEndpoints := min(3, runtime.GOMAXPROCS(0))
	if len(info.Endpoint) != wantEndpoints {
		t.Fatalf("%d endpoints, want %d", len(info.Endpoint), wantEndpoints)
	}
	for i, ep := range info.Endpoint {
		if len(ep.Location) != 0 {
			t.Fatalf("endpoint %d has locations %v; want none (reuse the connection)", i, ep.Location)
		}
	}
	if info.TotalRecords != int64(len(model)) || info.TotalBytes != bytesOnDisk {
		t.Fatalf("FlightInfo: %d rows and %d bytes, want %d and %d", info.TotalRecords, info.TotalBytes, len(model), bytesOnDisk)
	}
	got, err := ts.fetchAll(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if !got.schema.Equal(tsbsSchema) {
		t.Fatalf("DoGet schema %s, want %s", got.schema, tsbsSchema)
	}
	if s, w := sumUser(got.rows), sumUser(model); s != w {
		t.Fatalf("sum(usage_user) = %d, want %d", s, w)
	}
	sameRows(t, "whole table", got.rows, model)

	// GetSchema answers both descriptor forms.
	sr, err := ts.client.GetSchema(ctx, pathDesc("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	if s := ts.schemaOf(sr.Schema); !s.Equal(tsbsSchema) {
		t.Fatalf("GetSchema PATH: %s", s)
	}
	sr, err = ts.client.GetSchema(ctx, cmdDesc(t, map[string]any{"table": "cpu", "columns": []string{"usage_idle", "ts"}}))
	if err != nil {
		t.Fatal(err)
	}
	wantProj := arrow.NewSchema([]arrow.Field{tsbsSchema.Field(4), tsbsSchema.Field(0)}, nil)
	if s := ts.schemaOf(sr.Schema); !s.Equal(wantProj) {
		t.Fatalf("GetSchema CMD: %s, want %s", s, wantProj)
	}

	// ListActions describes every action.
	var names []string
	for _, a := range testkit.ListActions(t, ctx, ts.client) {
		if a.Description == "" {
			t.Fatalf("action %s has no description", a.Type)
		}
		names = append(names, a.Type)
	}
	if !reflect.DeepEqual(names, []string{ActionCreateTable, ActionDescribeTable, ActionCoverage, ActionGaps, ActionCoverageGrid, ActionAddColumns, ActionSetProperties, ActionVacuum, ActionCheck, ActionMaintenance, ActionCompact, ActionRollback, ActionUpgrade, ActionLast}) {
		t.Fatalf("ListActions: %v", names)
	}
}

// TestRoundTripStandardCodec runs the round trip with arrow-go's own DoGet
// writer (servers that do not install Service.GRPCOptions).
func TestRoundTripStandardCodec(t *testing.T) { TestRoundTrip(t) }
