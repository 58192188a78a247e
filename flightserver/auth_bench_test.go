package flightserver

// What authentication and TLS cost. Each benchmark has four sub-benchmarks
// run with the same table and the same client code: plain (plaintext, the
// Auth middleware with authentication off, as tsflight serve without
// tokens), auth (plaintext, bearer tokens), tls and tls+auth. Compare each
// to plain from the same run; BenchmarkAuthAlternating gives the ratios
// with the modes taking turns, which a shared machine disturbs less:
//
//	nice go test -run '^$' -bench 'Auth' -benchtime 3s -count 3 ./flightserver/
//
// The server runs in a child process (this test binary re-executed, as in
// bench_test.go) with one listener per mode over one Service. DoGet and
// GetFlightInfo read the bench_test.go table (TSFLIGHT_BENCH_ROWS rows);
// DoPut writes one table per mode in a temporary root.
// BenchmarkAuthMiddleware calls the middleware directly: authentication
// without any transport.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/internal/testkit"
)

type authCall func(b *testing.B, mode string) (rows, bytes int64, took time.Duration)

// eachMode runs call as the four sub-benchmarks; with rates it reports
// MB/s and rows/s as well.
func eachMode(b *testing.B, call authCall, rates bool) {
	for _, mode := range authBenchModes {
		b.Run(mode, func(b *testing.B) {
			call(b, mode) // warm-up, not measured
			var rows, bytes int64
			for b.Loop() {
				r, n, _ := call(b, mode)
				rows += r
				bytes += n
			}
			if rates {
				b.ReportMetric(float64(bytes)/1e6/b.Elapsed().Seconds(), "MB/s")
				b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
			}
		})
	}
}

// doGet fetches the whole bench table, every endpoint in parallel, as
// BenchmarkFlightDoGet does, and checks that every fetch has the rows of
// the first.
func (e *authBenchEnv) doGet(b *testing.B, mode string) (int64, int64, time.Duration) {
	start := time.Now()
	rows, bytes, err := fetchAll(e.ctx(mode), e.clients[mode])
	took := time.Since(start)
	if err != nil {
		b.Fatalf("%s: %v", mode, err)
	}
	if e.rows == 0 {
		e.rows = rows
	}
	if rows != e.rows || rows == 0 {
		b.Fatalf("%s: fetched %d rows, want %d (as the first fetch)", mode, rows, e.rows)
	}
	return rows, bytes, took
}

// getFlightInfo plans the bench table: a small call.
func (e *authBenchEnv) getFlightInfo(b *testing.B, mode string) (int64, int64, time.Duration) {
	start := time.Now()
	info, err := e.clients[mode].GetFlightInfo(e.ctx(mode), &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"cpu"}})
	took := time.Since(start)
	if err != nil {
		b.Fatalf("%s: %v", mode, err)
	}
	if len(info.Endpoint) == 0 {
		b.Fatalf("%s: GetFlightInfo of cpu: no endpoint", mode)
	}
	return 0, 0, took
}

const authPutBatches, authPutBatchRows = 50, 10_000

// doPut appends 50 batches of 10,000 TSBS rows of new times, as one DoPut
// and one commit, to the mode's own table.
func (e *authBenchEnv) doPut(b *testing.B, mode string) (int64, int64, time.Duration) {
	b.StopTimer()
	steps := authPutBatches * authPutBatchRows / benchHosts
	batches := tsbsRows(memory.DefaultAllocator, benchHosts, e.steps[mode], steps, authPutBatchRows)
	e.steps[mode] += steps
	var bytes int64
	for _, rec := range batches {
		for _, col := range rec.Columns() {
			for _, buf := range col.Data().Buffers() {
				if buf != nil {
					bytes += int64(buf.Len())
				}
			}
		}
	}
	b.StartTimer()
	start := time.Now()
	res, err := putTable(e.ctx(mode), e.clients[mode], "put_"+strings.ReplaceAll(mode, "+", "_"), batches)
	took := time.Since(start)
	b.StopTimer()
	releaseAll(batches)
	b.StartTimer()
	if err != nil {
		b.Fatalf("%s: %v", mode, err)
	}
	if res.Rows != authPutBatches*authPutBatchRows {
		b.Fatalf("%s: PutResult %+v, want %d rows", mode, res, authPutBatches*authPutBatchRows)
	}
	return int64(res.Rows), bytes, took
}

// putTable sends batches as one DoPut to table (created on demand) and
// returns the one PutResult.
func putTable(ctx context.Context, client flight.Client, table string, batches []arrow.RecordBatch) (PutResult, error) {
	var res PutResult
	stream, err := client.DoPut(ctx)
	if err != nil {
		return res, err
	}
	cmd := fmt.Sprintf(`{"table":%q,"create":{"index_column":"time","index_type":"timestamp","granularity":"10s","entity_columns":["hostname"]}}`, table)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(batches[0].Schema()))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(cmd)})
	for _, rec := range batches {
		if err := w.Write(rec); err != nil {
			break // the server ended the call: Recv says why
		}
	}
	w.Close()
	if err := stream.CloseSend(); err != nil {
		return res, err
	}
	got := 0
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return res, err
		}
		if err := json.Unmarshal(r.AppMetadata, &res); err != nil {
			return res, fmt.Errorf("PutResult %q: %v", r.AppMetadata, err)
		}
		got++
	}
	if got != 1 {
		return res, fmt.Errorf("%d PutResults, want 1", got)
	}
	return res, nil
}

// handshake makes a Flight Handshake on the open connection with Basic
// credentials whose password is the token, as pyarrow's
// authenticate_basic_token does, and checks the answer: the bearer header
// with authentication, else the echo of the Basic header.
func (e *authBenchEnv) handshake(b *testing.B, mode string) (int64, int64, time.Duration) {
	start := time.Now()
	e.basicHandshake(b, mode, e.clients[mode])
	return 0, 0, time.Since(start)
}

// connect is what a short-lived client does first: a new connection (TCP,
// and TLS in the tls modes), a Basic Handshake, and closing it.
func (e *authBenchEnv) connect(b *testing.B, mode string) (int64, int64, time.Duration) {
	start := time.Now()
	client, err := e.dial(mode)
	if err != nil {
		b.Fatalf("%s: %v", mode, err)
	}
	e.basicHandshake(b, mode, client)
	client.Close()
	return 0, 0, time.Since(start)
}

func (e *authBenchEnv) basicHandshake(b *testing.B, mode string, client flight.Client) {
	basic := "Basic" + " " + base64.StdEncoding.EncodeToString([]byte("bench:"+e.token))
	want := basic
	if strings.HasSuffix(mode, "auth") {
		want = "Bearer" + " " + e.token
	}
	stream, err := client.Handshake(metadata.AppendToOutgoingContext(context.Background(), "authorization", basic))
	if err == nil {
		err = stream.CloseSend()
	}
	var hdr metadata.MD
	if err == nil {
		hdr, err = stream.Header()
	}
	for err == nil {
		_, err = stream.Recv()
	}
	if !errors.Is(err, io.EOF) {
		b.Fatalf("%s: handshake: %v", mode, err)
	}
	if got := hdr.Get("authorization"); len(got) != 1 || got[0] != want {
		b.Fatalf("%s: handshake answered %d authorization headers, want one: %s", mode, len(got), strings.Fields(want)[0])
	}
}

// BenchmarkAuthDoGet: one op is a fetch of the whole bench table.
func BenchmarkAuthDoGet(b *testing.B) {
	eachMode(b, startAuthBench(b, benchTable(b)).doGet, true)
}

// BenchmarkAuthGetFlightInfo: one op is a GetFlightInfo of the bench
// table on one open connection, one call after another.
func BenchmarkAuthGetFlightInfo(b *testing.B) {
	eachMode(b, startAuthBench(b, benchTable(b)).getFlightInfo, false)
}

// BenchmarkAuthDoPut: one op is one DoPut of 50 batches of 10,000 rows.
func BenchmarkAuthDoPut(b *testing.B) { eachMode(b, startAuthBench(b, b.TempDir()).doPut, true) }

// BenchmarkAuthHandshake: one op is a Basic Handshake on one open
// connection.
func BenchmarkAuthHandshake(b *testing.B) {
	eachMode(b, startAuthBench(b, b.TempDir()).handshake, false)
}

// BenchmarkAuthConnect: one op is a new connection and a Basic Handshake.
func BenchmarkAuthConnect(b *testing.B) {
	e := startAuthBench(b, b.TempDir())
	e.logTLS(b)
	eachMode(b, e.connect, false)
}

// BenchmarkAuthMiddleware: one op is one call of the unary middleware
// (GetFlightInfo) with the call's metadata already parsed, and a handler
// that does nothing: the cost of authentication alone. off is the
// middleware with authentication off (the plain modes above); bearer and
// basic carry a token among 1 or 10,000; sha256 is the hash of the token
// alone, which the lookup does once. The metadata holds what a grpc-go
// client sends besides: the middleware reads it through a copy.
func BenchmarkAuthMiddleware(b *testing.B) {
	token, err := guard.NewToken()
	if err != nil {
		b.Fatal(err)
	}
	tokenSet := func(extra int) *guard.TokenSet {
		var sb strings.Builder
		sb.WriteString(guard.HashToken(token) + " write name=bench\n")
		for i := range extra {
			other, err := guard.NewToken()
			if err != nil {
				b.Fatal(err)
			}
			fmt.Fprintf(&sb, "%s read name=other%d\n", guard.HashToken(other), i)
		}
		set, err := guard.ParseTokens(strings.NewReader(sb.String()), "bench tokens")
		if err != nil {
			b.Fatal(err)
		}
		if set.Len() != extra+1 {
			b.Fatalf("%d tokens, want %d", set.Len(), extra+1)
		}
		return set
	}
	one, many := tokenSet(0), tokenSet(10_000)
	sent := []string{":authority", "127.0.0.1:44321", "content-type", "application/grpc", "user-agent", "grpc-go/" + grpc.Version}
	bearerMD := metadata.Pairs(append(sent, "authorization", "Bearer"+" "+token)...)
	basicMD := metadata.Pairs(append(sent, "authorization", "Basic"+" "+base64.StdEncoding.EncodeToString([]byte("bench:"+token)))...)
	info := &grpc.UnaryServerInfo{FullMethod: flightService + "GetFlightInfo"}
	req := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"cpu"}}
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }
	// checked is handler that also checks the caller, for the first call.
	checked := func(want string) grpc.UnaryHandler {
		return func(ctx context.Context, req any) (any, error) {
			if p, ok := guard.PrincipalFromContext(ctx); !ok || p.Name != want {
				return nil, fmt.Errorf("principal %+v (%v), want %s", p, ok, want)
			}
			return req, nil
		}
	}
	for _, c := range []struct {
		name string
		auth *guard.Auth
		md   metadata.MD
		who  string
	}{
		{"off", guard.NewAuth(guard.AuthOptions{Classify: Scopes()}), metadata.Pairs(sent...), "anonymous"},
		{"bearer", guard.NewAuth(guard.AuthOptions{Classify: Scopes(), Tokens: func() *guard.TokenSet { return one }}), bearerMD, "bench"},
		{"bearer-10k-tokens", guard.NewAuth(guard.AuthOptions{Classify: Scopes(), Tokens: func() *guard.TokenSet { return many }}), bearerMD, "bench"},
		{"basic", guard.NewAuth(guard.AuthOptions{Classify: Scopes(), Tokens: func() *guard.TokenSet { return one }}), basicMD, "bench"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			ctx := metadata.NewIncomingContext(context.Background(), c.md)
			unary := c.auth.Middleware().Unary
			if _, err := unary(ctx, req, info, checked(c.who)); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := unary(ctx, req, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("sha256", func(b *testing.B) {
		b.ReportAllocs()
		want := sha256.Sum256([]byte(token))
		for b.Loop() {
			if sha256.Sum256([]byte(token)) != want {
				b.Fatal("SHA-256 changed")
			}
		}
	})
}

// BenchmarkAuthAlternating makes the calls of the benchmarks above in the
// four modes by turns, the order rotating from one op to the next, so that
// on a shared machine all four meet the same conditions. One op is one
// call in each mode. It reports plain's median time per call (µs) and,
// for each other mode, the median over ops of its ratio to plain in the
// same op: throughput for DoGet and DoPut (below 1: slower), time for the
// others (above 1: slower).
func BenchmarkAuthAlternating(b *testing.B) {
	read := startAuthBench(b, benchTable(b))
	write := startAuthBench(b, b.TempDir())
	for _, c := range []struct {
		name       string
		call       authCall
		throughput bool
	}{
		{"DoGet", read.doGet, true},
		{"GetFlightInfo", read.getFlightInfo, false},
		{"DoPut", write.doPut, true},
		{"Handshake", write.handshake, false},
		{"Connect", write.connect, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			var plain []float64
			ratios := map[string][]float64{}
			for _, mode := range authBenchModes {
				c.call(b, mode) // warm-up, not measured
			}
			for i := 0; b.Loop(); i++ {
				took := map[string]float64{}
				for k := range authBenchModes {
					mode := authBenchModes[(i+k)%len(authBenchModes)]
					_, _, d := c.call(b, mode)
					took[mode] = float64(d)
				}
				plain = append(plain, took["plain"])
				for _, mode := range authBenchModes[1:] {
					r := took[mode] / took["plain"]
					if c.throughput {
						r = 1 / r
					}
					ratios[mode] = append(ratios[mode], r)
				}
			}
			b.ReportMetric(testkit.Median(plain)/1e3, "plain-µs")
			for _, mode := range authBenchModes[1:] {
				b.ReportMetric(testkit.Median(ratios[mode]), mode+"/plain")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}
