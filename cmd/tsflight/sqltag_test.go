//go:build duckdb_arrow

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const sqlEnabled = true

// TestServeSpeaksFlightSQL: a binary built with the duckdb_arrow tag
// answers Flight SQL on the port it serves plain Flight on.
func TestServeSpeaksFlightSQL(t *testing.T) {
	p := startServer(t, nil, "--root", t.TempDir(), "--listen", "127.0.0.1:0")
	rdr := sqlDoGet(t, p.addr, "SELECT 40 + 2 AS answer")
	defer rdr.Release()
	if !rdr.Next() || rdr.RecordBatch().Column(0).ValueStr(0) != "42" {
		t.Fatalf("SELECT 40 + 2 did not answer 42 (err %v)", rdr.Err())
	}
	if strings.Contains(p.stderr.String(), "without the duckdb_arrow tag") {
		t.Fatalf("the server says it has no SQL: %s", p.stderr.String())
	}
}

// sqlDoGet runs query through a Flight SQL client of the server at addr
// and returns the reader of its first endpoint, for the caller to
// release; the client is closed when the test ends.
func sqlDoGet(t *testing.T, addr, query string) *flight.Reader {
	t.Helper()
	c, err := flightsql.NewClient(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	info, err := c.Execute(ctx, query)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := c.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	return rdr
}
