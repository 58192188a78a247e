package flightserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The small-put benchmarks measure what a pipeline that appends all day
// sees: one DoPut of one row per host for 100 hosts, durable before it is
// acknowledged, to a server in another process. The peer, measured in the
// same run on the same disk, is the floor any durable append pays: create,
// write and fsync one file of the segment's size and fsync its directory.

const smallPutHosts = 100

// smallPuts prepares n puts of one row per host, each at the next step.
func smallPuts(n, first int) [][]arrow.RecordBatch {
	puts := make([][]arrow.RecordBatch, n)
	for i := range n {
		puts[i] = tsbsRows(memory.DefaultAllocator, smallPutHosts, first+i, 1, smallPutHosts)
	}
	return puts
}

// durableFileFloor is the median time to create, write and fsync a file of
// size bytes in dir and fsync dir, over n files.
func durableFileFloor(b *testing.B, dir string, size, n int) time.Duration {
	b.Helper()
	data := make([]byte, size)
	took := make([]time.Duration, 0, n)
	for i := range n {
		start := time.Now()
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("floor-%d", i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		d, err := os.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			b.Fatal(err)
		}
		d.Close()
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	return took[len(took)/2]
}

// segmentBytes is the mean size of the Parquet segments under root's cpu table.
func segmentBytes(root string) int {
	files, _ := filepath.Glob(filepath.Join(root, "cpu", "data", "_managed", "append", "*.parquet"))
	var total int64
	for _, f := range files {
		if fi, err := os.Stat(f); err == nil {
			total += fi.Size()
		}
	}
	if len(files) == 0 {
		return 16 << 10
	}
	return int(total / int64(len(files)))
}

// BenchmarkFlightSmallPut: one op is one durable DoPut of 100 rows from a
// single writer. Reports the p50 and p99 latency and the last tenth's
// median over the first tenth's; then, in the same run, the p50 of the same
// puts to a server that decodes and discards them (the transport's share)
// and the disk floor, with the ratios.
func BenchmarkFlightSmallPut(b *testing.B) {
	root := b.TempDir()
	srv := startBenchServer(b, "tsflight", root)
	ctx := context.Background()
	if err := putStream(ctx, srv.client, tsbsRows(memory.DefaultAllocator, smallPutHosts, 0, 1, smallPutHosts)); err != nil {
		b.Fatal(err) // creates the table
	}
	puts := smallPuts(b.N, 1)
	defer func() {
		for _, p := range puts {
			releaseAll(p)
		}
	}()
	b.ResetTimer()
	took := sendSmallPuts(b, []*benchServer{srv}, puts)
	b.StopTimer()
	reportLatencies(b, took)

	peer := startBenchServer(b, "discard", b.TempDir())
	n := min(b.N, 2000)
	peerTook := sendSmallPuts(b, []*benchServer{peer}, puts[:n])
	floor := durableFileFloor(b, b.TempDir(), segmentBytes(root), 200)
	b.ReportMetric(ms(median(peerTook)), "discard-p50-ms")
	b.ReportMetric(ms(floor), "floor-ms")
	b.ReportMetric(ms(median(took))/ms(median(peerTook)+floor), "p50/(discard+floor)")
}

// BenchmarkFlightSmallPutWriters: 8 writers, each on its own connection,
// send 100-row DoPuts to one table at once; one op is one put. Reports the
// aggregate rows per second and the per-put p50; then the same against a
// server that decodes and discards the puts, and the ratio of the rates.
func BenchmarkFlightSmallPutWriters(b *testing.B) {
	const writers = 8
	srv := startBenchServer(b, "tsflight", b.TempDir())
	ctx := context.Background()
	if err := putStream(ctx, srv.client, tsbsRows(memory.DefaultAllocator, smallPutHosts, 0, 1, smallPutHosts)); err != nil {
		b.Fatal(err)
	}
	conns := make([]*benchServer, writers)
	for w := range writers {
		conns[w] = srv.dial(b)
	}
	puts := smallPuts(b.N, 1)
	defer func() {
		for _, p := range puts {
			releaseAll(p)
		}
	}()
	b.ResetTimer()
	took, commits := sendSmallPutsVersions(b, conns, puts)
	b.StopTimer()
	rate := float64(b.N*smallPutHosts) / b.Elapsed().Seconds()
	b.ReportMetric(rate, "rows/s")
	b.ReportMetric(float64(b.N)/float64(commits), "puts/commit")
	b.ReportMetric(ms(median(took)), "p50-ms")

	peer := startBenchServer(b, "discard", b.TempDir())
	for w := range writers {
		conns[w] = peer.dial(b)
	}
	start := time.Now()
	sendSmallPuts(b, conns, puts)
	peerRate := float64(b.N*smallPutHosts) / time.Since(start).Seconds()
	b.ReportMetric(peerRate, "discard-rows/s")
	b.ReportMetric(rate/peerRate, "rate/discard")
}

// sendSmallPuts sends puts, one writer per connection, each writer taking
// the next put when its last one is acknowledged; it returns each put's
// latency.
func sendSmallPuts(b *testing.B, conns []*benchServer, puts [][]arrow.RecordBatch) []time.Duration {
	took, _ := sendSmallPutsVersions(b, conns, puts)
	return took
}

// sendSmallPutsVersions is sendSmallPuts that also returns how many
// distinct versions the puts' results name (the commits they made).
func sendSmallPutsVersions(b *testing.B, conns []*benchServer, puts [][]arrow.RecordBatch) ([]time.Duration, int) {
	b.Helper()
	took := make([]time.Duration, len(puts))
	versions := make([]uint64, len(puts))
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(puts) {
					return
				}
				start := time.Now()
				v, err := putVersion(c.client, puts[i])
				if err != nil {
					errs <- err
					return
				}
				took[i], versions[i] = time.Since(start), v
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	slices.Sort(versions)
	return took, len(slices.Compact(versions))
}

// putVersion sends batches as one DoPut to table cpu (created on demand)
// and returns the version its PutResult names (0 from the discard server).
func putVersion(client flight.Client, batches []arrow.RecordBatch) (uint64, error) {
	stream, err := client.DoPut(context.Background())
	if err != nil {
		return 0, err
	}
	desc := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"table":"cpu","create":{"index_column":"time","index_type":"timestamp","granularity":"10s","entity_columns":["hostname"]}}`)}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(batches[0].Schema()))
	w.SetFlightDescriptor(desc)
	for _, rec := range batches {
		if err := w.Write(rec); err != nil {
			return 0, err
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	if err := stream.CloseSend(); err != nil {
		return 0, err
	}
	var res PutResult
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return res.Version, nil
		}
		if err != nil {
			return 0, err
		}
		if err := json.Unmarshal(msg.AppMetadata, &res); err != nil {
			return 0, err
		}
	}
}

func reportLatencies(b *testing.B, took []time.Duration) {
	b.Helper()
	tenth := max(1, len(took)/10)
	first, last := median(took[:tenth]), median(took[len(took)-tenth:])
	b.ReportMetric(ms(median(took)), "p50-ms")
	b.ReportMetric(ms(quantile(took, 0.99)), "p99-ms")
	b.ReportMetric(ms(last)/ms(first), "last/first")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(d []time.Duration) time.Duration { return quantile(d, 0.5) }

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// discardServer is the ceiling of a DoPut: a Flight server in Go that
// decodes every batch of the stream, as tsflight's DoPut does, and answers
// with a PutResult, writing nothing.
type discardServer struct{ flight.BaseFlightServer }

func (discardServer) DoPut(stream flight.FlightService_DoPutServer) error {
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		return err
	}
	defer rdr.Release()
	var rows int64
	for rdr.Next() {
		rows += rdr.RecordBatch().NumRows()
	}
	if err := rdr.Err(); err != nil {
		return err
	}
	return stream.Send(&flight.PutResult{AppMetadata: []byte(fmt.Sprintf(`{"rows":%d}`, rows))})
}
