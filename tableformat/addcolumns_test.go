package tableformat

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/tsflight/tsflight/tableformat/storage"
)

func TestAddColumnsErrors(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	f64 := DataType{Kind: TypeFloat64}
	// No schema yet.
	if _, err := e.tb.AddColumns(e.ctx, []Field{{Name: "x", Type: f64, Nullable: true}}); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "no schema yet") {
		t.Fatalf("schemaless: %v", err)
	}
	e.mustAppend(t, row{0, "h", 1})
	cases := []struct {
		name   string
		fields []Field
		msg    string
	}{
		{"none", nil, "at least one column"},
		{"blank", []Field{{Name: "  ", Type: f64, Nullable: true}}, "blank name"},
		{"duplicate", []Field{{Name: "x", Type: f64, Nullable: true}, {Name: "x", Type: f64, Nullable: true}}, `"x" is listed twice`},
		{"existing", []Field{{Name: "v", Type: f64, Nullable: true}}, `"v" already exists`},
		{"non-nullable", []Field{{Name: "x", Type: f64}}, `"x" must be nullable`},
		{"int96", []Field{{Name: "x", Type: DataType{Kind: TypeInt96}, Nullable: true}}, "no Arrow equivalent"},
		{"other", []Field{{Name: "x", Type: DataType{Kind: TypeOther, Other: "X"}, Nullable: true}}, "no Arrow equivalent"},
		{"bad decimal", []Field{{Name: "x", Type: DataType{Kind: TypeDecimal, Precision: 0}, Nullable: true}}, "invalid Decimal"},
		{"empty struct", []Field{{Name: "x", Type: DataType{Kind: TypeStruct}, Nullable: true}}, "no fields"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := e.tb.State().Version
			_, err := e.tb.AddColumns(e.ctx, c.fields)
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("got %v, want ErrInvalidInput mentioning %q", err, c.msg)
			}
			if e.tb.State().Version != before {
				t.Fatal("a refused add-columns committed")
			}
		})
	}
	// A stale handle conflicts.
	other := mustOpen(t, storage.Local(e.dir), nil)
	e.mustAppend(t, row{100, "h", 1})
	if _, err := other.AddColumns(e.ctx, []Field{{Name: "x", Type: f64, Nullable: true}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale add-columns: %v, want ErrConflict", err)
	}
}

// TestAddColumnsThenAppend: the feature is declared in the same commit,
// later appends may omit the new nullable column or supply it, and old
// segments scan as null for it.
func TestAddColumnsThenAppend(t *testing.T) {
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "h", 1})
	nested := DataType{Kind: TypeStruct, Fields: []Field{{Name: "a", Type: DataType{Kind: TypeInt64}, Nullable: true}}}
	v, err := e.tb.AddColumns(e.ctx, []Field{{Name: "score", Type: DataType{Kind: TypeFloat64}, Nullable: true}, {Name: "meta", Type: nested, Nullable: true}})
	if err != nil || v != 3 {
		t.Fatalf("add-columns: %d %v", v, err)
	}
	c, err := e.tb.log.readCommit(3)
	if err != nil || len(c.Actions) != 1 || c.Actions[0].ActionName() != "UpdateTableMeta" {
		t.Fatalf("commit 3: %+v %v", c, err)
	}
	m := e.tb.State().Meta
	if strings.Join(m.ReaderFeatures, ",") != FeatureSchemaAddColumns || len(m.WriterFeatures) != 0 {
		t.Fatalf("features %v / %v", m.ReaderFeatures, m.WriterFeatures)
	}
	// Omit both new columns.
	if _, err := e.append(row{10, "h", 2}); err != nil {
		t.Fatalf("append omitting added columns: %v", err)
	}
	// Supply score.
	s := arrow.NewSchema(append(inSchema().Fields(), arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), nil)
	b := array.NewRecordBuilder(e.mem, s)
	b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(20e9).UnixNano()))
	b.Field(1).(*array.StringBuilder).Append("h")
	b.Field(2).(*array.Int64Builder).Append(3)
	b.Field(3).(*array.Float64Builder).Append(0.5)
	rdr := readerOf(t, s, b.NewRecordBatch())
	b.Release()
	if _, err := e.tb.Append(e.ctx, rdr, e.opts()); err != nil {
		t.Fatalf("append with score: %v", err)
	}
	rdr.Release()
	// Scan: three rows, score null, null, 0.5.
	out, err := e.tb.Scan(e.ctx, e.tb.State(), ScanOptions{Columns: []string{"v", "score"}, Alloc: e.mem})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	got := map[int64]string{}
	for out.Next() {
		rec := out.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			got[rec.Column(0).(*array.Int64).Value(i)] = rec.Column(1).ValueStr(i)
		}
	}
	if err := out.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[1] != "(null)" || got[2] != "(null)" || got[3] != "0.5" {
		t.Fatalf("scanned scores %v", got)
	}
	// A key column can still not be omitted.
	ks := arrow.NewSchema([]arrow.Field{inSchema().Field(0), inSchema().Field(2)}, nil)
	kb := array.NewRecordBuilder(e.mem, ks)
	kb.Field(0).(*array.TimestampBuilder).Append(1)
	kb.Field(1).(*array.Int64Builder).Append(1)
	krdr := readerOf(t, ks, kb.NewRecordBatch())
	kb.Release()
	defer krdr.Release()
	if _, err := e.tb.Append(e.ctx, krdr, e.opts()); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), `key column "host"`) {
		t.Fatalf("append without entity: %v", err)
	}
}
