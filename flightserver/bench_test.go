package flightserver

// Flight benchmarks. The server runs in a child process (this test binary
// re-executed), so client work and server work are separate processes, as
// clients are in production, and the server's peak RSS can be read from
// /proc. Run:
//
//	go test -run '^$' -bench 'Flight' -benchtime 5x ./flightserver/
//
// The DoGet target is a ratio to an in-memory Flight server; on a shared
// machine the one to trust is BenchmarkFlightDoGetRatio, which runs both
// servers at once and alternates fetches between them:
//
//	go test -run '^$' -bench 'FlightDoGetRatio' -benchtime 10x ./flightserver/
//
// arrow-go's in-memory server is itself slower than C++: the ceiling users
// compare with is pyarrow's C++ Flight server, in
// BenchmarkFlightDoGetPyArrow (bench_pyarrow_test.go).
//
// TSFLIGHT_BENCH_ROWS sets the table size for the DoGet benchmarks
// (default 2,000,000; 20,000,000 for the RSS target).
// TSFLIGHT_BENCH_ENDPOINTS overrides Options.MaxEndpoints of the server,
// TSFLIGHT_BENCH_BATCHROWS Options.BatchRows, TSFLIGHT_BENCH_WRITEBUF the
// gRPC write buffer size,
// TSFLIGHT_BENCH_PARALLELISM Options.ScanParallelism,
// TSFLIGHT_BENCH_SCAN_CACHE_MIB Options.ScanCacheBytes (default 0, no
// cache: the benchmarks measure decoding unless they ask), and
// TSFLIGHT_BENCH_GOALLOC=1 makes scans use the Go allocator (not the pool);
// TSFLIGHT_BENCH_HEAPPROF=FILE makes the server write a heap profile at
// each new peak of its in-use heap; TSFLIGHT_BENCH_CPUPROF=FILE a CPU
// profile of its whole life; TSFLIGHT_BENCH_MEMSTATS=1 makes it print its
// peak heap figures when it stops; TSFLIGHT_BENCH_MEMLIMIT_MIB sets its
// soft memory limit (as tsflight serve --memory-limit does) and
// TSFLIGHT_BENCH_GOGC its GC percentage (default RecommendedGCPercent, as
// tsflight serve).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tsflight/tsflight/bench/tsbs"
	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat"
)

// TestMain lets the benchmarks re-execute this binary as a server.
func TestMain(m *testing.M) {
	switch mode := os.Getenv("TSFLIGHT_BENCH_MODE"); mode {
	case "tsflight", "memory", "memory-zerocopy", "discard":
		benchServe(mode, os.Getenv("TSFLIGHT_BENCH_ROOT"))
		return
	}
	os.Exit(m.Run())
}

// benchServe runs a server until SIGTERM: the tsflight service over root,
// or an in-memory Flight server that streams the same table's batches,
// pre-loaded, as the transport ceiling.
func benchServe(mode, root string) {
	opts := DefaultOptions(root)
	if v, err := strconv.Atoi(os.Getenv("TSFLIGHT_BENCH_ENDPOINTS")); err == nil {
		opts.MaxEndpoints = v
	}
	if v, err := strconv.Atoi(os.Getenv("TSFLIGHT_BENCH_BATCHROWS")); err == nil {
		opts.BatchRows = v
	}
	if os.Getenv("TSFLIGHT_BENCH_GOALLOC") != "" {
		opts.ScanAlloc = memory.DefaultAllocator
	}
	if v, err := strconv.Atoi(os.Getenv("TSFLIGHT_BENCH_PARALLELISM")); err == nil {
		opts.ScanParallelism = v
	}
	if v, err := strconv.ParseInt(os.Getenv("TSFLIGHT_BENCH_SCAN_CACHE_MIB"), 10, 64); err == nil {
		opts.ScanCacheBytes = v << 20
	}
	// As tsflight serve does.
	debug.SetGCPercent(RecommendedGCPercent)
	if v, err := strconv.Atoi(os.Getenv("TSFLIGHT_BENCH_GOGC")); err == nil {
		debug.SetGCPercent(v)
	}
	if v, err := strconv.ParseInt(os.Getenv("TSFLIGHT_BENCH_MEMLIMIT_MIB"), 10, 64); err == nil {
		debug.SetMemoryLimit(v << 20)
	}
	// As tsflight serve does.
	SetHeapFloor(RecommendedHeapFloor)
	if v, err := strconv.ParseInt(os.Getenv("TSFLIGHT_BENCH_HEAP_FLOOR_MIB"), 10, 64); err == nil {
		SetHeapFloor(v << 20)
	}
	svc, err := New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(64 << 20), grpc.MaxSendMsgSize(64 << 20)}
	if os.Getenv("TSFLIGHT_BENCH_COPY") == "" {
		gopts = append(gopts, svc.GRPCOptions()...)
	}
	if v, err := strconv.Atoi(os.Getenv("TSFLIGHT_BENCH_WRITEBUF")); err == nil {
		gopts = append(gopts, grpc.WriteBufferSize(v)) // after GRPCOptions: overrides
	}
	srv := flight.NewServerWithMiddleware(nil, gopts...)
	switch mode {
	case "tsflight":
		srv.RegisterFlightService(svc)
	case "discard":
		srv.RegisterFlightService(&discardServer{})
	default:
		mem, err := loadInMemory(svc, "cpu")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		mem.zeroCopy = mode == "memory-zerocopy" && svc.zeroCopy.Load()
		srv.RegisterFlightService(mem)
	}
	if err := srv.Init("127.0.0.1:0"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("ADDR %s\n", srv.Addr())
	if prof := os.Getenv("TSFLIGHT_BENCH_CPUPROF"); prof != "" && mode != "discard" {
		if f, err := os.Create(prof); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	if prof := os.Getenv("TSFLIGHT_BENCH_HEAPPROF"); prof != "" {
		go func() {
			var peak uint64
			for range time.Tick(50 * time.Millisecond) {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak+8<<20 {
					peak = ms.HeapInuse
					if f, err := os.Create(prof); err == nil {
						pprof.WriteHeapProfile(f)
						f.Close()
					}
				}
			}
		}()
	}
	var peak runtime.MemStats
	if os.Getenv("TSFLIGHT_BENCH_MEMSTATS") != "" {
		go func() {
			for range time.Tick(10 * time.Millisecond) {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peak.HeapInuse = max(peak.HeapInuse, ms.HeapInuse)
				peak.HeapSys = max(peak.HeapSys, ms.HeapSys-ms.HeapReleased)
				peak.NumGC, peak.Sys = ms.NumGC, ms.Sys
			}
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		<-sig
		if os.Getenv("TSFLIGHT_BENCH_MEMSTATS") != "" {
			fmt.Fprintf(os.Stderr, "\nserver memstats: peak heap in use %d MiB, peak heap held %d MiB, sys %d MiB, %d GCs\n",
				peak.HeapInuse>>20, peak.HeapSys>>20, peak.Sys>>20, peak.NumGC)
		}
		srv.Shutdown()
	}()
	_ = srv.Serve()
	pprof.StopCPUProfile()
}

// memoryServer streams pre-loaded batches for any ticket.
type memoryServer struct {
	flight.BaseFlightServer
	zeroCopy bool
	schema   *arrow.Schema
	batches  []arrow.RecordBatch
}

func loadInMemory(svc *Service, table string) (*memoryServer, error) {
	ctx := context.Background()
	tb, err := svc.Table(ctx, table)
	if err != nil {
		return nil, err
	}
	rdr, err := tb.Scan(ctx, nil, tableformat.ScanOptions{BatchRows: svc.opts.BatchRows, Alloc: memory.DefaultAllocator})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	m := &memoryServer{schema: rdr.Schema()}
	b := NewBatcher(int64(svc.opts.BatchRows), 0)
	defer b.Release()
	keep := func(group []arrow.RecordBatch) error {
		defer releaseAll(group)
		rec, err := ConcatBatches(group, memory.DefaultAllocator)
		if err == nil {
			m.batches = append(m.batches, rec)
		}
		return err
	}
	for rdr.Next() {
		if err := b.Add(rdr.RecordBatch(), keep); err != nil {
			return nil, err
		}
	}
	if err := b.Flush(keep); err != nil {
		return nil, err
	}
	return m, rdr.Err()
}

// memoryParts is how many endpoints the in-memory server offers, like
// tsflight's default (GOMAXPROCS).
func memoryParts() int { return runtime.GOMAXPROCS(0) }

func (m *memoryServer) GetFlightInfo(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	info := &flight.FlightInfo{Schema: flight.SerializeSchema(m.schema, memory.DefaultAllocator), FlightDescriptor: desc, TotalRecords: -1, TotalBytes: -1}
	for i := range memoryParts() {
		info.Endpoint = append(info.Endpoint, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: []byte(strconv.Itoa(i))}})
	}
	return info, nil
}

// DoGet streams every memoryParts()-th batch, starting at the ticket's.
func (m *memoryServer) DoGet(tkt *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	part, err := strconv.Atoi(string(tkt.GetTicket()))
	if err != nil {
		return err
	}
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if m.zeroCopy {
		w = &zeroCopyWriter{stream: stream, mem: memory.DefaultAllocator, schema: m.schema}
	} else {
		w = flight.NewRecordWriter(stream, ipc.WithSchema(m.schema))
	}
	defer w.Close()
	for i := part; i < len(m.batches); i += memoryParts() {
		if err := w.Write(m.batches[i]); err != nil {
			return err
		}
	}
	return nil
}

// benchServer is a running server child process.
type benchServer struct {
	cmd    *exec.Cmd
	addr   string
	client flight.Client
}

func startBenchServer(b *testing.B, mode, root string, env ...string) *benchServer {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "TSFLIGHT_BENCH_MODE="+mode, "TSFLIGHT_BENCH_ROOT="+root), env...)
	return startProcServer(b, cmd)
}

// startProcServer starts cmd, a Flight server that prints "ADDR host:port"
// on its first line of output once it serves, and connects to it; it is
// stopped when the benchmark ends.
func startProcServer(b *testing.B, cmd *exec.Cmd) *benchServer {
	b.Helper()
	s := &benchServer{cmd: cmd, addr: testkit.StartChild(b, cmd, "ADDR ")}
	s.client = s.dial(b).client
	b.Cleanup(s.stop)
	return s
}

// dial opens another connection to the server (the returned value's client
// only; it is closed when the benchmark ends).
func (s *benchServer) dial(b *testing.B) *benchServer {
	b.Helper()
	client, err := flight.NewClientWithMiddleware(s.addr, nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		s.cmd.Process.Kill()
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	return &benchServer{cmd: s.cmd, addr: s.addr, client: client}
}

// peakRSS is the child's peak resident set size in MiB (VmHWM).
func (s *benchServer) peakRSS() float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			kb, _ := strconv.Atoi(strings.Fields(l)[1])
			return float64(kb) / 1024
		}
	}
	return -1
}

func (s *benchServer) stop() {
	s.client.Close()
	testkit.StopProcess(s.cmd, 10*time.Second)
}

// tsbsRows is hosts × steps rows of bench/tsbs's cpu-only data (seed 7,
// from TSBS's start, spanning whole days) from step first, in batches of
// at most batchRows rows that also end where an hour does; the caller
// releases them.
func tsbsRows(mem memory.Allocator, hosts, first, steps, batchRows int) []arrow.RecordBatch {
	perDay := int(24 * time.Hour / tsbs.DefaultStep)
	days := (first + steps + perDay - 1) / perDay
	p := tsbs.Params{Hosts: hosts, Start: tsbs.TSBSStart, Duration: time.Duration(days) * 24 * time.Hour, Seed: 7, BatchRows: batchRows}
	recs, err := testkit.TSBSSteps(mem, p, first, steps)
	if err != nil {
		panic(fmt.Sprintf("tsbsRows: %v", err))
	}
	return recs
}

// putStream sends batches as one DoPut to table cpu (created on demand).
func putStream(ctx context.Context, client flight.Client, batches []arrow.RecordBatch) error {
	stream, err := client.DoPut(ctx)
	if err != nil {
		return err
	}
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"table":"cpu","create":{"index_column":"time","index_type":"timestamp","granularity":"10s","entity_columns":["hostname"]}}`)}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(batches[0].Schema()))
	w.SetFlightDescriptor(desc)
	for _, rec := range batches {
		if err := w.Write(rec); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if err.Error() == "EOF" || strings.HasSuffix(err.Error(), "EOF") {
				return nil
			}
			return err
		}
	}
}

const benchHosts, benchStepsPerPut = 1000, 200 // 200,000 rows per DoPut

// BenchmarkFlightDoPut: one op is one DoPut of 200,000 TSBS cpu-only rows
// (64K-row batches) to a server in another process; commits are durable.
func BenchmarkFlightDoPut(b *testing.B) {
	srv := startBenchServer(b, "tsflight", b.TempDir())
	mem := memory.DefaultAllocator
	puts := make([][]arrow.RecordBatch, b.N)
	for i := range b.N {
		puts[i] = tsbsRows(mem, benchHosts, i*benchStepsPerPut, benchStepsPerPut, 1<<16)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if err := putStream(ctx, srv.client, puts[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*benchHosts*benchStepsPerPut)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(srv.peakRSS(), "server-peak-MiB")
	for _, p := range puts {
		releaseAll(p)
	}
}

// benchTable builds (once per root) a table of TSFLIGHT_BENCH_ROWS rows.
func benchTable(b *testing.B) string {
	rows := 2_000_000
	if v := os.Getenv("TSFLIGHT_BENCH_ROWS"); v != "" {
		rows, _ = strconv.Atoi(v)
	}
	root := filepath.Join(os.TempDir(), fmt.Sprintf("tsflight-bench-%d", rows))
	if _, err := os.Stat(filepath.Join(root, "cpu", "_timeseries_log", "CURRENT")); err == nil {
		return root
	}
	os.RemoveAll(root)
	srv := startBenchServer(b, "tsflight", root)
	steps := rows / benchHosts
	for first := 0; first < steps; first += benchStepsPerPut {
		batches := tsbsRows(memory.DefaultAllocator, benchHosts, first, min(benchStepsPerPut, steps-first), 1<<16)
		if err := putStream(context.Background(), srv.client, batches); err != nil {
			b.Fatal(err)
		}
		releaseAll(batches)
	}
	srv.stop()
	return root
}

// fetchAll reads every endpoint of the whole table in parallel and returns
// rows and IPC body bytes received.
func fetchAll(ctx context.Context, client flight.Client) (int64, int64, error) {
	info, err := client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"cpu"}})
	if err != nil {
		return 0, 0, err
	}
	type res struct {
		rows, bytes int64
		err         error
	}
	ch := make(chan res, len(info.Endpoint))
	for _, ep := range info.Endpoint {
		go func() {
			var r res
			stream, err := client.DoGet(ctx, ep.Ticket)
			if err != nil {
				ch <- res{err: err}
				return
			}
			rdr, err := flight.NewRecordReader(stream)
			if err != nil {
				ch <- res{err: err}
				return
			}
			defer rdr.Release()
			for rdr.Next() {
				rec := rdr.RecordBatch()
				r.rows += rec.NumRows()
				for _, col := range rec.Columns() {
					for _, buf := range col.Data().Buffers() {
						if buf != nil {
							r.bytes += int64(buf.Len())
						}
					}
				}
			}
			r.err = rdr.Err()
			ch <- r
		}()
	}
	var rows, bytes int64
	for range info.Endpoint {
		r := <-ch
		if r.err != nil {
			err = r.err
		}
		rows += r.rows
		bytes += r.bytes
	}
	return rows, bytes, err
}

func benchDoGet(b *testing.B, mode string) {
	root := benchTable(b)
	srv := startBenchServer(b, mode, root)
	ctx := context.Background()
	var rows, bytes int64
	b.ResetTimer()
	for range b.N {
		r, n, err := fetchAll(ctx, srv.client)
		if err != nil {
			b.Fatal(err)
		}
		rows += r
		bytes += n
	}
	b.StopTimer()
	b.ReportMetric(float64(bytes)/1e6/b.Elapsed().Seconds(), "MB/s")
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(srv.peakRSS(), "server-peak-MiB")
}

// BenchmarkFlightDoGet streams the whole table from tsflight (Parquet →
// Arrow → Flight). BenchmarkFlightDoGetInMemory streams the same batches
// from memory with arrow-go's Flight writer, as a plain in-memory Flight
// server does: the transport ceiling. BenchmarkFlightDoGetInMemoryZeroCopy
// does the same through tsflight's zero-copy codec, a stricter ceiling.
// Compare their MB/s.
func BenchmarkFlightDoGet(b *testing.B)                 { benchDoGet(b, "tsflight") }
func BenchmarkFlightDoGetInMemory(b *testing.B)         { benchDoGet(b, "memory") }
func BenchmarkFlightDoGetInMemoryZeroCopy(b *testing.B) { benchDoGet(b, "memory-zerocopy") }

// BenchmarkFlightDoGetRatio alternates whole-table fetches from tsflight
// and from the in-memory server (the transport ceiling), both running at
// once, and reports each one's median MB/s and their ratio: on a shared,
// noisy machine the alternation exposes both to the same conditions.
// One op is one fetch from each.
func BenchmarkFlightDoGetRatio(b *testing.B) {
	root := benchTable(b)
	ts := startBenchServer(b, "tsflight", root)
	mem := startBenchServer(b, "memory", root)
	ctx := context.Background()
	var tsRate, memRate []float64
	fetch := func(srv *benchServer) float64 {
		start := time.Now()
		_, n, err := fetchAll(ctx, srv.client)
		if err != nil {
			b.Fatal(err)
		}
		return float64(n) / 1e6 / time.Since(start).Seconds()
	}
	b.ResetTimer()
	for i := range b.N {
		testkit.Alternate(i,
			func() { tsRate = append(tsRate, fetch(ts)) },
			func() { memRate = append(memRate, fetch(mem)) })
	}
	b.StopTimer()
	median := testkit.Median
	b.ReportMetric(median(tsRate), "tsflight-MB/s")
	b.ReportMetric(median(memRate), "memory-MB/s")
	b.ReportMetric(median(tsRate)/median(memRate), "ratio")
	b.ReportMetric(ts.peakRSS(), "tsflight-peak-MiB")
	b.ReportMetric(0, "ns/op")
}
