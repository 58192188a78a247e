//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tsflight/tsflight/flightserver"
)

// gapsServer is a real listener over a root holding table "g": one host,
// one row every other second from t0, so that [t0, t0+2n s) has n gaps
// of one second each.
func gapsServer(tb testing.TB, gaps int) (*flightsql.Client, *Server, func()) {
	tb.Helper()
	fo := flightserver.DefaultOptions(tb.TempDir())
	svc, err := flightserver.New(fo)
	if err != nil {
		tb.Fatal(err)
	}
	so := DefaultOptions()
	so.Threads = 2
	sql, err := New(context.Background(), svc, so)
	if err != nil {
		tb.Fatal(err)
	}
	srv := flight.NewServerWithMiddleware(nil, svc.GRPCOptions()...)
	srv.RegisterFlightService(sql.Service())
	if err := srv.Init("127.0.0.1:0"); err != nil {
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve() }()
	cl, err := flightsql.NewClient(srv.Addr().String(), nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		tb.Fatal(err)
	}
	stop := func() {
		cl.Close()
		srv.Shutdown()
		<-served
		sql.Close()
	}
	var recs []arrow.RecordBatch
	for lo := 0; lo < gaps; lo += 50_000 {
		rec := everyOtherSecond(memory.DefaultAllocator, lo, min(lo+50_000, gaps))
		defer rec.Release()
		recs = append(recs, rec)
	}
	rdr, err := array.NewRecordReader(cpuSchema, recs)
	if err != nil {
		tb.Fatal(err)
	}
	defer rdr.Release()
	ctx := context.Background()
	_, err = cl.ExecuteIngest(ctx, rdr, &flightsql.ExecuteIngestOpts{Table: "g", Options: cpuOpts,
		TableDefinitionOptions: &flightsql.TableDefinitionOptions{
			IfNotExist: flightsql.TableDefinitionOptionsTableNotExistOptionCreate,
			IfExists:   flightsql.TableDefinitionOptionsTableExistsOptionFail}})
	if err != nil {
		stop()
		tb.Fatal(err)
	}
	return cl, sql, stop
}

// gapsQuery counts the gaps of "g" over [t0, t0+2n s).
func gapsQuery(n int) string {
	return fmt.Sprintf("SELECT count(*), sum(intervals) FROM ts_gaps('g', %s, %s)", fmtTime(t0), fmtTime(t0.Add(time.Duration(2*n)*time.Second)))
}

// runScalar runs q and returns its first row rendered.
func runScalar(ctx context.Context, cl *flightsql.Client, q string) (string, error) {
	info, err := cl.Execute(ctx, q)
	if err != nil {
		return "", err
	}
	rdr, err := cl.DoGet(ctx, info.Endpoint[0].Ticket)
	if err != nil {
		return "", err
	}
	defer rdr.Release()
	out := ""
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() > 0 && out == "" {
			for c := 0; c < int(rec.NumCols()); c++ {
				if c > 0 {
					out += "|"
				}
				out += rec.Column(c).ValueStr(0)
			}
		}
	}
	return out, rdr.Err()
}

// BenchmarkTsGaps200k: one ts_gaps query over 200,000 gaps; ns/gap is
// the cost per gap (run with -benchtime=1x or a few x: one iteration was
// about 40 s before issue 17).
func BenchmarkTsGaps200k(b *testing.B) {
	const n = 200_000
	cl, _, stop := gapsServer(b, n)
	defer stop()
	ctx := context.Background()
	q := gapsQuery(n)
	want := fmt.Sprintf("%d|%d", n, n)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := runScalar(ctx, cl, q)
		if err != nil || got != want {
			b.Fatalf("%s = %q, %v; want %s", q, got, err, want)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/gap")
}

// everyOtherSecond is rows lo to hi-1 of host a at every other second from
// t0 (row i at t0 + 2i s, usage i): a gap of a second after each.
func everyOtherSecond(mem memory.Allocator, lo, hi int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, cpuSchema)
	defer b.Release()
	for i := lo; i < hi; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(2*i) * time.Second).UnixMicro()))
		b.Field(1).(*array.StringBuilder).Append("a")
		b.Field(2).(*array.Float64Builder).Append(float64(i))
	}
	return b.NewRecordBatch()
}
