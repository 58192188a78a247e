package main

import (
	"context"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// query runs q through the ADBC Go driver, prepared or not, and returns
// the answer's schema and its int64 or int32 values.
func query(t *testing.T, cnxn adbc.Connection, q string, prepare bool) (*arrow.Schema, []int64) {
	t.Helper()
	ctx := context.Background()
	stmt, err := cnxn.NewStatement()
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	if err := stmt.SetSqlQuery(q); err != nil {
		t.Fatal(err)
	}
	if prepare {
		if err := stmt.Prepare(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rdr, _, err := stmt.ExecuteQuery(ctx)
	if err != nil {
		t.Fatalf("%q: %v", q, err)
	}
	defer rdr.Release()
	var out []int64
	for rdr.Next() {
		switch c := rdr.RecordBatch().Column(0).(type) {
		case *array.Int64:
			out = append(out, c.Int64Values()...)
		case *array.Int32:
			for _, v := range c.Int32Values() {
				out = append(out, int64(v))
			}
		default:
			t.Fatalf("%q: column of %s", q, c.DataType())
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return rdr.Schema(), out
}

// TestAnyStatement: a plain statement of any text gets one row, n = 1;
// the prepared SELECT 1 still gets its int32 1, and another prepared
// text is refused.
func TestAnyStatement(t *testing.T) {
	srv, err := start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve()
	defer srv.Shutdown()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	db, err := adbcflightsql.NewDriver(mem).NewDatabase(map[string]string{adbc.OptionKeyURI: "grpc+tcp://" + srv.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cnxn, err := db.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer cnxn.Close()
	for _, q := range []string{"SELECT count(*) AS n FROM cpu WHERE time >= '2016-01-01T00:00:00Z'", "not even SQL"} {
		sc, got := query(t, cnxn, q, false)
		if sc.NumFields() != 1 || sc.Field(0).Name != "n" || len(got) != 1 || got[0] != 1 {
			t.Errorf("%q: schema %v, values %v; want n int64, [1]", q, sc, got)
		}
	}
	if sc, got := query(t, cnxn, "SELECT 1", true); sc.Field(0).Type.ID() != arrow.INT32 || len(got) != 1 || got[0] != 1 {
		t.Errorf("prepared SELECT 1: schema %v, values %v", sc, got)
	}
	stmt, err := cnxn.NewStatement()
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	stmt.SetSqlQuery("SELECT 2")
	if err := stmt.Prepare(context.Background()); err == nil {
		t.Error("prepared SELECT 2 is accepted")
	} else if e, ok := err.(adbc.Error); !ok || e.Code != adbc.StatusInvalidArgument {
		t.Errorf("prepared SELECT 2: %v, want InvalidArgument", err)
	}
	cnxn.Close()
	db.Close()
	mem.AssertSize(t, 0)
}
