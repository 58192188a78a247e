//go:build duckdb_arrow

package flightsql

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

// checkTable asserts that SQL sees exactly the rows of sent (in ts, host
// order) in table, with sent's column names and types.
func (s *sqlServer) checkTable(ctx context.Context, table string, sent ...arrow.RecordBatch) {
	s.t.Helper()
	var want []string
	for _, rec := range sent {
		want = append(want, recRows(rec)...)
	}
	sort.Strings(want) // ts first, then host: the ISO timestamps sort in time order
	sc := sent[0].Schema()
	order := sc.Field(0).Name
	if sc.NumFields() > 1 {
		order += ", " + sc.Field(1).Name
	}
	r := s.mustQuery(ctx, "SELECT * FROM "+table+" ORDER BY "+order)
	if got := s.scalar(ctx, "SELECT count(*) FROM "+table); got != fmt.Sprint(len(want)) {
		s.t.Fatalf("%s: count = %s, want %d", table, got, len(want))
	}
	if r.schema.NumFields() != sc.NumFields() {
		s.t.Fatalf("%s: SQL schema %v, want the columns of %v", table, r.schema, sc)
	}
	for i, f := range sc.Fields() {
		g := r.schema.Field(i)
		if g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) {
			s.t.Fatalf("%s: column %d is %s %s, want %s %s", table, i, g.Name, g.Type, f.Name, f.Type)
		}
	}
	if got := r.rowsOf(); !slices.Equal(got, want) {
		s.t.Fatalf("%s: %d rows differ from the %d sent (first %v, want %v)", table, len(got), len(want), head(got), head(want))
	}
}

// describeTable runs the describe-table action.
func (s *sqlServer) describeTable(ctx context.Context, table string) map[string]any {
	s.t.Helper()
	return s.mustActionJSON(ctx, "describe-table", map[string]any{"table": table})
}

func indexOf(d map[string]any) string {
	ix, _ := d["index"].(map[string]any)
	return fmt.Sprintf("%v/%v/%v/%v/%v", ix["column"], ix["type"], ix["granularity"], ix["entity_columns"], ix["timezone"])
}

// stepBatch is cpuBatch with rows step apart: n rows per host from start;
// usage is the row's second offset from t0 plus the host number.
func stepBatch(mem memory.Allocator, start time.Time, n int, step time.Duration, hosts ...string) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, cpuSchema)
	defer b.Release()
	for i := 0; i < n; i++ {
		ts := start.Add(time.Duration(i) * step)
		for h, host := range hosts {
			b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
			b.Field(1).(*array.StringBuilder).Append(host)
			b.Field(2).(*array.Float64Builder).Append(ts.Sub(t0).Seconds() + float64(h))
		}
	}
	return b.NewRecordBatch()
}

func TestIngestCreateWithOptions(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	// At most one row per series and granularity interval (10 s here).
	a := stepBatch(s.cliMem, t0, 60, 10*time.Second, "a", "b")
	defer a.Release()
	b := stepBatch(s.cliMem, t0.Add(10*time.Minute), 60, 10*time.Second, "a", "b", "c")
	defer b.Release()
	n, err := s.ingest(ctx, "m1", "create", map[string]string{
		"tsflight.granularity":    "10s",
		"tsflight.entity_columns": "host",
		"tsflight.index_column":   "ts",
		"tsflight.timezone":       "Europe/Berlin",
	}, a, b)
	if err != nil {
		t.Fatalf("ingest create: %v", err)
	}
	if n != 120+180 {
		t.Fatalf("ingest create: %d rows, want 300", n)
	}
	s.checkTable(ctx, "m1", a, b)
	d := s.describeTable(ctx, "m1")
	if got := indexOf(d); got != "ts/timestamp/10s/[host]/Europe/Berlin" {
		t.Fatalf("index %s, want ts/timestamp/10s/[host]/Europe/Berlin", got)
	}
	// One ingest is one segment, one commit.
	if got := jsonUint(t, d, "segments"); got != 1 {
		t.Fatalf("segments = %d, want 1", got)
	}
	if segs := s.segmentFiles("m1"); len(segs) != 1 {
		t.Fatalf("segment files %v, want 1", segs)
	}
}

func TestIngestCreateWithHeaders(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	// One row a minute: fine at 1m or 1s granularity, refused at 1h.
	rec := stepBatch(s.cliMem, t0, 120, time.Minute, "a", "b")
	defer rec.Release()
	hctx := metadata.AppendToOutgoingContext(ctx,
		"x-tsflight-granularity", "1h", // overridden by the next value (the last wins)
		"x-tsflight-granularity", "1m",
		"x-tsflight-entity-columns", "host",
		"x-tsflight-index-column", "ts")
	n, err := s.ingest(hctx, "m2", "create", nil, rec)
	if err != nil {
		t.Fatalf("ingest create with headers: %v", err)
	}
	if n != 240 {
		t.Fatalf("%d rows, want 240", n)
	}
	s.checkTable(ctx, "m2", rec)
	if got := indexOf(s.describeTable(ctx, "m2")); got != "ts/timestamp/1m/[host]/<nil>" {
		t.Fatalf("index %s, want ts/timestamp/1m/[host]/<nil>", got)
	}

	// Options win over headers.
	hctx = metadata.AppendToOutgoingContext(ctx, "x-tsflight-granularity", "1h", "x-tsflight-entity-columns", "host")
	if _, err := s.ingest(hctx, "m3", "create", map[string]string{"tsflight.granularity": "1s"}, rec); err != nil {
		t.Fatalf("ingest create with options and headers: %v", err)
	}
	if got := indexOf(s.describeTable(ctx, "m3")); got != "ts/timestamp/1s/[host]/<nil>" {
		t.Fatalf("index %s, want ts/timestamp/1s/[host]/<nil>", got)
	}
	s.checkTable(ctx, "m3", rec)
}

func TestIngestModes(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	h := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Hour) }
	var sent []arrow.RecordBatch
	defer func() {
		for _, r := range sent {
			r.Release()
		}
	}()
	batch := func(i int) arrow.RecordBatch {
		r := cpuBatch(s.cliMem, h(i), 60, "a", "b")
		sent = append(sent, r)
		return r
	}

	// create_append on a new table creates it.
	r0 := batch(0)
	if n, err := s.ingest(ctx, "m", "create_append", cpuOpts, r0); err != nil || n != 120 {
		t.Fatalf("create_append (new): %d, %v", n, err)
	}
	s.checkTable(ctx, "m", r0)
	// append adds.
	r1 := batch(1)
	if n, err := s.ingest(ctx, "m", "append", nil, r1); err != nil || n != 120 {
		t.Fatalf("append: %d, %v", n, err)
	}
	s.checkTable(ctx, "m", r0, r1)
	// create_append on an existing table appends (options for creation
	// are not needed).
	r2 := batch(2)
	if n, err := s.ingest(ctx, "m", "create_append", nil, r2); err != nil || n != 120 {
		t.Fatalf("create_append (existing): %d, %v", n, err)
	}
	s.checkTable(ctx, "m", r0, r1, r2)
	if got := jsonUint(t, s.describeTable(ctx, "m"), "segments"); got != 3 {
		t.Fatalf("segments = %d, want 3", got)
	}
	files := s.tableFiles("m")

	// Refusals change nothing.
	r3 := batch(3)
	_, err := s.ingest(ctx, "m", "create", cpuOpts, r3)
	wantCode(t, "create on an existing table", err, codes.AlreadyExists, "m")
	_, err = s.ingest(ctx, "nosuch", "append", nil, r3)
	wantCode(t, "append to a missing table", err, codes.NotFound, "nosuch")
	if _, err := os.Stat(filepath.Join(s.root, "nosuch")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("append to a missing table left %s: %v", filepath.Join(s.root, "nosuch"), err)
	}
	_, err = s.ingest(ctx, "m", "replace", cpuOpts, r3)
	wantCode(t, "replace", err, codes.Unimplemented, "replace")
	_, err = s.ingest(ctx, "fresh", "replace", cpuOpts, r3)
	wantCode(t, "replace (new table)", err, codes.Unimplemented, "replace")
	// Rows overlapping what the table holds: the whole stream is refused.
	_, err = s.ingest(ctx, "m", "append", nil, r2)
	if err == nil {
		t.Fatal("appending rows already present: no error")
	}
	s.checkTable(ctx, "m", r0, r1, r2)
	if got := s.tableFiles("m"); !slices.Equal(got, files) {
		t.Fatalf("refused ingests changed the table's files:\n%v\nwant\n%v", got, files)
	}
}

func TestIngestCreateErrors(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	rec := cpuBatch(s.cliMem, t0, 10, "a")
	defer rec.Release()

	twoTS := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "ts2", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "v", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	two := twoTSBatch(s.cliMem, twoTS)
	defer two.Release()

	cases := []struct {
		name  string
		table string
		rec   arrow.RecordBatch
		opts  map[string]string
		tweak func(*flightsql.ExecuteIngestOpts)
		code  codes.Code
		frags []string
	}{
		{"no granularity", "g1", rec, map[string]string{"tsflight.entity_columns": "host"}, nil, codes.InvalidArgument, []string{"tsflight.granularity", "x-tsflight-granularity"}},
		{"bad granularity", "g2", rec, map[string]string{"tsflight.granularity": "often"}, nil, codes.InvalidArgument, []string{"often"}},
		{"two timestamp columns", "g3", two, map[string]string{"tsflight.granularity": "1s"}, nil, codes.InvalidArgument, []string{"tsflight.index_column", "ts, ts2"}},
		{"float index column", "g4", rec, map[string]string{"tsflight.granularity": "1s", "tsflight.index_column": "usage"}, nil, codes.InvalidArgument, []string{"usage", "float64"}},
		{"missing index column", "g5", rec, map[string]string{"tsflight.granularity": "1s", "tsflight.index_column": "nope"}, nil, codes.InvalidArgument, []string{"nope"}},
		{"missing entity column", "g6", rec, map[string]string{"tsflight.granularity": "1s", "tsflight.entity_columns": "nope"}, nil, codes.InvalidArgument, []string{"nope"}},
		{"unknown option", "g7", rec, map[string]string{"tsflight.granularity": "1s", "tsflight.bogus": "x"}, nil, codes.InvalidArgument, []string{"tsflight.bogus"}},
		{"temporary", "g8", rec, cpuOpts, func(o *flightsql.ExecuteIngestOpts) { o.Temporary = true }, codes.InvalidArgument, []string{"temporary"}},
		{"other catalog", "g9", rec, cpuOpts, func(o *flightsql.ExecuteIngestOpts) { o.Catalog = strp("other") }, codes.NotFound, []string{"other"}},
		{"other schema", "g10", rec, cpuOpts, func(o *flightsql.ExecuteIngestOpts) { o.Schema = strp("other") }, codes.NotFound, []string{"other"}},
		{"bad table name", "../escape", rec, cpuOpts, nil, codes.InvalidArgument, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.ingestWith(ctx, c.table, "create", c.opts, c.tweak, c.rec)
			wantCode(t, c.name, err, c.code, c.frags...)
			if _, err := os.Stat(filepath.Join(s.root, c.table)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused create left %s behind (%v)", c.table, err)
			}
		})
	}
	// The right catalog and schema, given explicitly, are fine; so is
	// naming the index column among two timestamps.
	n, err := s.ingestWith(ctx, "g11", "create", cpuOpts, func(o *flightsql.ExecuteIngestOpts) {
		o.Catalog, o.Schema = strp("tsflight"), strp("main")
	}, rec)
	if err != nil || n != 10 {
		t.Fatalf("create in tsflight.main: %d, %v", n, err)
	}
	s.checkTable(ctx, "g11", rec)
	n, err = s.ingest(ctx, "g12", "create", map[string]string{"tsflight.granularity": "1s", "tsflight.index_column": "ts2"}, two)
	if err != nil || n != two.NumRows() {
		t.Fatalf("create with index ts2: %d, %v", n, err)
	}
	if got := indexOf(s.describeTable(ctx, "g12")); got != "ts2/timestamp/1s/[]/<nil>" {
		t.Fatalf("index %s", got)
	}
	// Nothing but the two created tables exists.
	entries, err := os.ReadDir(s.root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if fmt.Sprint(names) != "[g11 g12]" {
		t.Fatalf("root holds %v, want [g11 g12]", names)
	}
}

func twoTSBatch(mem memory.Allocator, sc *arrow.Schema) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	for i := 0; i < 5; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(i) * time.Second).UnixMicro()))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(10*i) * time.Second).UnixMicro()))
		b.Field(2).(*array.Float64Builder).Append(float64(i))
	}
	return b.NewRecordBatch()
}

// ingestWith is s.ingest with a hook on the command.
func (s *sqlServer) ingestWith(ctx context.Context, table, mode string, opts map[string]string, tweak func(*flightsql.ExecuteIngestOpts), batches ...arrow.RecordBatch) (int64, error) {
	rdr, err := array.NewRecordReader(batches[0].Schema(), batches)
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	o := &flightsql.ExecuteIngestOpts{Table: table, Options: opts, TableDefinitionOptions: &flightsql.TableDefinitionOptions{}}
	switch mode {
	case "create":
		o.TableDefinitionOptions.IfNotExist, o.TableDefinitionOptions.IfExists = flightsql.TableDefinitionOptionsTableNotExistOptionCreate, flightsql.TableDefinitionOptionsTableExistsOptionFail
	case "append":
		o.TableDefinitionOptions.IfNotExist, o.TableDefinitionOptions.IfExists = flightsql.TableDefinitionOptionsTableNotExistOptionFail, flightsql.TableDefinitionOptionsTableExistsOptionAppend
	}
	if tweak != nil {
		tweak(o)
	}
	return s.client.ExecuteIngest(ctx, rdr, o)
}

// breakingReader yields batches, then cancels the call and fails: a
// client that breaks off mid-stream.
type breakingReader struct {
	refs    atomic.Int64
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	next    int
	cur     arrow.RecordBatch
	cancel  context.CancelFunc
	err     error
}

func (r *breakingReader) Retain() { r.refs.Add(1) }
func (r *breakingReader) Release() {
	if r.refs.Add(-1) == 0 {
		for _, b := range r.batches {
			b.Release()
		}
		r.batches = nil
	}
}
func (r *breakingReader) Schema() *arrow.Schema { return r.schema }
func (r *breakingReader) Next() bool {
	if r.next < len(r.batches) {
		r.cur = r.batches[r.next]
		r.next++
		return true
	}
	// Give the server time to take in what was sent, then break off.
	time.Sleep(300 * time.Millisecond)
	r.cancel()
	r.err = errors.New("the client broke off")
	r.cur = nil
	return false
}
func (r *breakingReader) RecordBatch() arrow.RecordBatch { return r.cur }
func (r *breakingReader) Record() arrow.RecordBatch      { return r.cur }
func (r *breakingReader) Err() error                     { return r.err }

func TestIngestBrokenStreamCommitsNothing(t *testing.T) {
	s, ctx := startCPU(t, 2)
	files := s.tableFiles("cpu")
	segs := s.segmentFiles("cpu")
	version := jsonUint(t, s.describeTable(ctx, "cpu"), "version")

	for _, mode := range []string{"append", "create_append"} {
		t.Run(mode, func(t *testing.T) {
			// 20 batches of 7200 rows (hours 2..) sent, then the call is
			// cancelled before the stream ends.
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			rdr := &breakingReader{schema: cpuSchema, cancel: cancel}
			rdr.refs.Store(1)
			for i := 0; i < 20; i++ {
				rdr.batches = append(rdr.batches, cpuBatch(s.cliMem, t0.Add(2*time.Hour+time.Duration(i)*time.Hour), 3600, "a", "b"))
			}
			o := &flightsql.ExecuteIngestOpts{Table: "cpu", TableDefinitionOptions: &flightsql.TableDefinitionOptions{
				IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionFail,
				IfExists:   flightsql.TableDefinitionOptionsTableExistsOptionAppend,
			}}
			if mode == "create_append" {
				o.TableDefinitionOptions.IfNotExist = flightsql.TableDefinitionOptionsTableNotExistOptionCreate
			}
			_, err := s.client.ExecuteIngest(cctx, rdr, o)
			rdr.Release()
			if err == nil {
				t.Fatal("a broken-off ingest succeeded")
			}
			// The server notices, stops and removes what it wrote: poll
			// until the table's files are those of before.
			deadline := time.Now().Add(10 * time.Second)
			for !slices.Equal(s.tableFiles("cpu"), files) && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if got := s.tableFiles("cpu"); !slices.Equal(got, files) {
				t.Fatalf("files after a broken-off ingest:\n%v\nwant\n%v", got, files)
			}
			if got := s.segmentFiles("cpu"); !slices.Equal(got, segs) {
				t.Fatalf("segment files %v, want %v", got, segs)
			}
			if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "14400" {
				t.Fatalf("count = %s, want 14400 (nothing committed)", got)
			}
			d := s.describeTable(ctx, "cpu")
			if v := jsonUint(t, d, "version"); v != version {
				t.Fatalf("version %d, want %d (no commit)", v, version)
			}
			if n := jsonUint(t, d, "segments"); n != 2 {
				t.Fatalf("segments %d, want 2", n)
			}
		})
	}
	// The table still takes a whole ingest.
	rec := cpuBatch(s.cliMem, t0.Add(2*time.Hour), 3600, "a", "b")
	defer rec.Release()
	if n, err := s.ingest(ctx, "cpu", "append", nil, rec); err != nil || n != 7200 {
		t.Fatalf("ingest after the broken ones: %d, %v", n, err)
	}
	if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "21600" {
		t.Fatalf("count = %s, want 21600", got)
	}
}

func TestIngestTypesRoundTrip(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "t", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "dev", Type: arrow.BinaryTypes.String},
		{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(s.cliMem, sc)
	for i := 0; i < 50; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(i) * time.Minute).UnixMicro()))
		b.Field(1).(*array.StringBuilder).Append([]string{"x", "y"}[i%2])
		if i%7 == 3 {
			for c := 2; c < 6; c++ {
				b.Field(c).AppendNull()
			}
			continue
		}
		b.Field(2).(*array.Int64Builder).Append(int64(i*i) - 100)
		b.Field(3).(*array.Float64Builder).Append(float64(i) / 8)
		b.Field(4).(*array.BooleanBuilder).Append(i%3 == 0)
		b.Field(5).(*array.StringBuilder).Append(fmt.Sprintf("s'%d\"é", i))
	}
	rec := b.NewRecordBatch()
	b.Release()
	defer rec.Release()
	n, err := s.ingest(ctx, "typed", "create", map[string]string{"tsflight.granularity": "1m", "tsflight.entity_columns": "dev"}, rec)
	if err != nil || n != 50 {
		t.Fatalf("ingest: %d, %v", n, err)
	}
	s.checkTable(ctx, "typed", rec)
	// Through plain Flight too: the same table, the same rows.
	info, err := s.client.Client.GetFlightInfo(ctx, pathDescriptor("typed"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ep := range info.Endpoint {
		_, recs, err := s.readFlight(ctx, ep.Ticket)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, recRows(recs...)...)
		for _, r := range recs {
			r.Release()
		}
	}
	sort.Strings(got)
	want := recRows(rec)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("plain Flight read %d rows differing from the %d ingested", len(got), len(want))
	}
}
