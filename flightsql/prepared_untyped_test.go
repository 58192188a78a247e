//go:build duckdb_arrow

package flightsql

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestPreparedUntypedSchemaMatchesStream: a statement whose result types
// depend on its parameters ("SELECT ? + 1") describes, once its values are
// bound, the same schema in its FlightInfo as every batch its DoGet
// streams, names included (DuckDB calls the unbound column "unknown" and
// the bound one "($1 + 1)"; the ADBC Python driver refused the stream as
// "inconsistent schema").
func TestPreparedUntypedSchemaMatchesStream(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	cases := []struct {
		q      string
		fields []arrow.Field
		rows   [][]any
		want   string
		names  string // of the first and last column
	}{
		{"SELECT ? + 1", []arrow.Field{{Name: "p", Type: arrow.PrimitiveTypes.Int64}}, [][]any{{int64(41)}}, "[42]", "($1 + 1) ($1 + 1)"},
		{"SELECT ? AS a, ? + 1, 'x' AS b", []arrow.Field{{Name: "p", Type: arrow.BinaryTypes.String}, {Name: "q", Type: arrow.PrimitiveTypes.Int64}},
			[][]any{{"s", int64(1)}, {"t", int64(2)}}, "[s|2|x t|3|x]", "a b"},
		// One parameter row: the names of the run started ahead.
		{"SELECT ? AS v, ? AS v", []arrow.Field{{Name: "p", Type: arrow.PrimitiveTypes.Int64}, {Name: "q", Type: arrow.PrimitiveTypes.Int64}},
			[][]any{{int64(1), int64(2)}}, "[1|2]", "v v"},
		// Several rows, typed by parameters: repeated names are DuckDB's
		// in a subquery.
		{"SELECT ? AS v, ? AS v", []arrow.Field{{Name: "p", Type: arrow.PrimitiveTypes.Int64}, {Name: "q", Type: arrow.PrimitiveTypes.Int64}},
			[][]any{{int64(1), int64(2)}, {int64(3), int64(4)}}, "[1|2 3|4]", "v v_1"},
		{"SELECT ?, ?", []arrow.Field{{Name: "p", Type: arrow.PrimitiveTypes.Int64}, {Name: "q", Type: arrow.PrimitiveTypes.Int64}},
			[][]any{{int64(7), int64(8)}}, "[7|8]", "$1 $2"},
	}
	for _, c := range cases {
		p := s.prepare(ctx, c.q)
		info, r, err := s.execPrepared(ctx, p, paramBatch(t, s, c.fields, c.rows))
		if err != nil {
			t.Fatalf("%s: %v", c.q, err)
		}
		want := s.schemaOf(info.Schema)
		if !r.schema.Equal(want) {
			t.Errorf("%s: stream schema %v, FlightInfo schema %v", c.q, r.schema, want)
		}
		for i, rec := range r.recs {
			if !rec.Schema().Equal(want) {
				t.Errorf("%s: batch %d schema %v, FlightInfo schema %v", c.q, i, rec.Schema(), want)
			}
		}
		if got, want := fmt.Sprint(want.Fields()[0].Name, " ", want.Fields()[len(want.Fields())-1].Name), c.names; got != want {
			t.Errorf("%s: first and last column names %q, want %q", c.q, got, want)
		}
		if got := fmt.Sprint(r.rowsOf()); got != c.want {
			t.Errorf("%s: rows %s, want %s", c.q, got, c.want)
		}
		for _, f := range want.Fields() {
			if f.Name == "unknown" {
				t.Errorf("%s: FlightInfo names a column %q (DuckDB's name before binding), schema %v", c.q, f.Name, want)
			}
		}
		r.release()
	}
}
