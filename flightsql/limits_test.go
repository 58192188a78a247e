//go:build duckdb_arrow

package flightsql

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
)

// readRows runs q and counts the rows that arrive before the stream ends,
// returning the stream's error.
func (s *sqlServer) readRows(ctx context.Context, q string) (int64, error) {
	info, err := s.client.Execute(ctx, q)
	if err != nil {
		return 0, err
	}
	var rows int64
	for _, ep := range info.Endpoint {
		rdr, err := s.client.DoGet(ctx, ep.Ticket)
		if err != nil {
			return rows, err
		}
		for rdr.Next() {
			rows += rdr.RecordBatch().NumRows()
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// TestMaxResultRows: a result larger than MaxResultRows ends with
// ResourceExhausted after exactly the allowed rows; a result of exactly the
// limit, and aggregates over more rows, are untouched.
func TestMaxResultRows(t *testing.T) {
	const limit = 10000
	s := startSQLWith(t, func(o *Options) { o.MaxResultRows = limit })
	ctx := ctxT(t)
	s.makeCPU(ctx, 3) // 3 × 7200 rows

	rows, err := s.readRows(ctx, "SELECT * FROM cpu ORDER BY ts, host")
	wantCode(t, "a 21600-row result", err, codes.ResourceExhausted, "limit of 10000 rows", "--max-result-rows", "LIMIT")
	if rows != limit {
		t.Fatalf("%d rows arrived before the error, want exactly the limit %d", rows, limit)
	}

	rows, err = s.readRows(ctx, "SELECT * FROM cpu ORDER BY ts, host LIMIT 10000")
	if err != nil || rows != limit {
		t.Fatalf("a result of exactly the limit: %d rows, %v", rows, err)
	}
	if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "21600" {
		t.Fatalf("count(*) = %s, want 21600 (aggregates read more rows than they return)", got)
	}

	// Parameter rows of one execution share the budget: 3 × 7200 rows from
	// three bound parameter sets pass the limit in the second.
	prep := s.prepare(ctx, "SELECT * FROM cpu WHERE ts >= $1 AND ts < $2")
	us := tsType(arrow.Microsecond, "UTC")
	var hours [][]any
	for h := range 3 {
		from := t0.Add(time.Duration(h) * time.Hour)
		hours = append(hours, []any{from, from.Add(time.Hour)})
	}
	params := paramBatch(t, s, []arrow.Field{{Name: "from", Type: us}, {Name: "to", Type: us}}, hours)
	prep.SetParameters(params)
	params.Release()
	info, err := prep.Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := s.client.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		t.Fatal(err)
	}
	var got int64
	for rdr.Next() {
		got += rdr.RecordBatch().NumRows()
	}
	err = rdr.Err()
	rdr.Release()
	wantCode(t, "three parameter rows of 7200 rows each", err, codes.ResourceExhausted, "limit of 10000 rows")
	if got != limit {
		t.Fatalf("%d rows arrived before the error, want %d", got, limit)
	}
}

// TestMaxResultRowsRefusesNegative: a negative limit is a configuration
// error, named.
func TestMaxResultRowsRefusesNegative(t *testing.T) {
	o := DefaultOptions()
	o.MaxResultRows = -1
	_, err := New(context.Background(), nil, o)
	wantCode(t, "MaxResultRows -1", err, codes.InvalidArgument, "MaxResultRows", "-1")
}
