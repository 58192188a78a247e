//go:build duckdb_arrow

package flightsql

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
)

// BenchmarkSelect1 is the per-query fixed cost of Flight SQL through
// arrow-go's client against a real server on loopback, over a root with
// two tables: a statement prepared, executed, fetched and closed each time
// (what an ADBC cursor does for each new query); one prepared "SELECT 1"
// executed again; one prepared "SELECT ? + 1" bound to a new value and
// executed again.
func BenchmarkSelect1(b *testing.B) {
	s := startSQLServer(b, sqlStart{})
	ctx := context.Background()
	s.makeCPU(ctx, 2)
	b.Run("prepare_execute_close", func(b *testing.B) {
		for b.Loop() {
			p, err := s.client.Prepare(ctx, "SELECT 1")
			if err != nil {
				b.Fatal(err)
			}
			s.benchFetch(b, ctx, p, 1)
			if err := p.Close(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reexecute", func(b *testing.B) {
		p, err := s.client.Prepare(ctx, "SELECT 1")
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		for b.Loop() {
			s.benchFetch(b, ctx, p, 1)
		}
	})
	b.Run("reexecute_param", func(b *testing.B) {
		p, err := s.client.Prepare(ctx, "SELECT ? + 1")
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		sc := arrow.NewSchema([]arrow.Field{{Name: "p", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
		i := int64(0)
		for b.Loop() {
			i++
			bld := array.NewRecordBuilder(s.cliMem, sc)
			bld.Field(0).(*array.Int64Builder).Append(i)
			rec := bld.NewRecordBatch()
			bld.Release()
			p.SetParameters(rec)
			rec.Release()
			s.benchFetch(b, ctx, p, i+1)
		}
	})
}

// benchFetch executes p and checks its one value.
func (s *sqlServer) benchFetch(b *testing.B, ctx context.Context, p *flightsql.PreparedStatement, want int64) {
	info, err := p.Execute(ctx)
	if err != nil {
		b.Fatal(err)
	}
	r, err := s.fetch(ctx, info)
	if err != nil {
		b.Fatal(err)
	}
	defer r.release()
	if r.rows != 1 {
		b.Fatalf("%d rows, want 1", r.rows)
	}
	var got int64
	switch c := r.recs[0].Column(0).(type) {
	case *array.Int32:
		got = int64(c.Value(0))
	case *array.Int64:
		got = c.Value(0)
	}
	if got != want {
		b.Fatalf("answer %d, want %d", got, want)
	}
}
