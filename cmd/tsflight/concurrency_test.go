package main

// Concurrency across processes on one root: two "tsflight serve" processes
// over the same directory take appends from eight clients at once, while
// this test process appends to the same table through the tableformat
// library. Disjoint appends must all land exactly once, seen alike by the
// library and by both servers; an overlapping round sent to both servers
// has exactly one winner. TSFLIGHT_CONC_APPENDS (default 100, 25 under the
// race detector) sets the appends per writer.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

const procTrialRows = 5 // rows per append

// procTrialAppends is the appends per writer.
func procTrialAppends(t *testing.T) int {
	t.Helper()
	if v := os.Getenv("TSFLIGHT_CONC_APPENDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TSFLIGHT_CONC_APPENDS=%q: want a positive integer", v)
		}
		return n
	}
	if raceEnabled {
		return 25
	}
	return 100
}

// trialRec is procTrialRows rows from interval block×procTrialRows on, 10 s
// apart; value = writer×1e6 + interval, so a row names its interval and
// the writer that sent it.
func trialRec(block, writer int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
	defer b.Release()
	for i := block * procTrialRows; i < (block+1)*procTrialRows; i++ {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(base + int64(i)*10_000))
		b.Field(1).(*array.Float64Builder).Append(float64(writer*1_000_000 + i))
	}
	return b.NewRecordBatch()
}

// putRec appends rec (released here) to table by one DoPut and returns the
// version of the PutResult.
func putRec(ctx context.Context, c flight.Client, table string, rec arrow.RecordBatch) (uint64, error) {
	v, _, err := putRecSegment(ctx, c, table, rec)
	return v, err
}

// putRecSegment is putRec that also returns the segment the PutResult
// names (appends grouped into one commit share it).
func putRecSegment(ctx context.Context, c flight.Client, table string, rec arrow.RecordBatch) (uint64, string, error) {
	defer rec.Release()
	stream, err := c.DoPut(ctx)
	if err != nil {
		return 0, "", err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(testSchema))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
	werr := w.Write(rec) // a refused put ends the call; Recv says why
	w.Close()
	if err := stream.CloseSend(); err != nil {
		return 0, "", err
	}
	res, err := stream.Recv()
	if err != nil {
		return 0, "", err
	}
	if werr != nil {
		return 0, "", werr
	}
	var pr struct {
		Version uint64 `json:"version"`
		Rows    uint64 `json:"rows"`
		Segment string `json:"segment"`
	}
	if err := json.Unmarshal(res.AppMetadata, &pr); err != nil {
		return 0, "", err
	}
	if pr.Rows != uint64(rec.NumRows()) {
		return 0, "", fmt.Errorf("PutResult %s: want %d rows", res.AppMetadata, rec.NumRows())
	}
	if _, err := stream.Recv(); err != io.EOF {
		return 0, "", fmt.Errorf("after the PutResult: %v, want EOF", err)
	}
	return pr.Version, pr.Segment, nil
}

// collect reads ts and value of every batch of rdr into interval → value
// and counts intervals seen more than once.
func collect(rdr array.RecordReader, into map[int64]float64) (dups int, err error) {
	for rdr.Next() {
		rec := rdr.RecordBatch()
		ts := rec.Column(rec.Schema().FieldIndices("ts")[0]).(*array.Timestamp)
		val := rec.Column(rec.Schema().FieldIndices("value")[0]).(*array.Float64)
		for i := range ts.Len() {
			iv := (int64(ts.Value(i)) - base) / 10_000
			if _, dup := into[iv]; dup {
				dups++
			}
			into[iv] = val.Value(i)
		}
	}
	return dups, rdr.Err()
}

// scanServer reads the whole table through one server, every endpoint.
func scanServer(ctx context.Context, c flight.Client, table string) (map[int64]float64, int, error) {
	info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
	if err != nil {
		return nil, 0, err
	}
	got, dups := map[int64]float64{}, 0
	for _, ep := range info.Endpoint {
		stream, err := c.DoGet(ctx, ep.Ticket)
		if err != nil {
			return nil, 0, err
		}
		rdr, err := flight.NewRecordReader(stream)
		if err != nil {
			return nil, 0, err
		}
		d, err := collect(rdr, got)
		rdr.Release()
		if err != nil {
			return nil, 0, err
		}
		dups += d
	}
	return got, dups, nil
}

// scanLibrary reads the whole table at dir through the tableformat
// library and returns its version too.
func scanLibrary(ctx context.Context, dir string) (map[int64]float64, int, uint64, error) {
	tb, err := tableformat.Open(ctx, storage.Local(dir), nil)
	if err != nil {
		return nil, 0, 0, err
	}
	st := tb.State()
	rdr, err := tb.Scan(ctx, st, tableformat.ScanOptions{})
	if err != nil {
		return nil, 0, 0, err
	}
	defer rdr.Release()
	got := map[int64]float64{}
	dups, err := collect(rdr, got)
	return got, dups, st.Version, err
}

// TestConcurrencyTwoServersOneRoot: eight clients split over two serve
// processes on one root, plus two library writers in this process, append
// disjoint time blocks at once; then all writers race for the same blocks.
func TestConcurrencyTwoServersOneRoot(t *testing.T) {
	root := t.TempDir()
	srvs := []*serverProc{
		startServer(t, nil, "--root", root, "--listen", "127.0.0.1:0"),
		startServer(t, nil, "--root", root, "--listen", "127.0.0.1:0"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	createTable(t, ctx, dial(t, srvs[0].addr), "cpu")
	dir := filepath.Join(root, "cpu")

	const flightWriters, libWriters = 8, 2
	writers := flightWriters + libWriters
	appends := procTrialAppends(t)
	clients := make([]flight.Client, flightWriters)
	for w := range clients {
		clients[w] = dial(t, srvs[w%2].addr) // each writer its own connection
	}
	var (
		mu       sync.Mutex
		acked    = map[int]uint64{}    // block → version
		segOf    = map[uint64]string{} // version → segment (grouped appends share both)
		reused   int
		failed   int
		retries  int
		errShown int
		wg       sync.WaitGroup
	)
	record := func(w, block int, v uint64, seg string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
			if errShown++; errShown <= 5 {
				t.Errorf("writer %d block %d: %v", w, block, err)
			}
			return
		}
		// Appends committed together share a version and name the same
		// segment; the same version with another segment would be two
		// commits claiming one version.
		if prev, dup := segOf[v]; dup && prev != seg {
			reused++
			t.Errorf("version %d acknowledged with segments %s and %s", v, prev, seg)
		}
		segOf[v] = seg
		acked[block] = v
	}
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var tb *tableformat.Table
			if w >= flightWriters {
				var err error
				if tb, err = tableformat.Open(ctx, storage.Local(dir), nil); err != nil {
					record(w, -1, 0, "", err)
					return
				}
			}
			for s := range appends {
				block := s*writers + w // neighbouring blocks come from different writers
				if tb == nil {
					v, seg, err := putRecSegment(ctx, clients[w], "cpu", trialRec(block, w))
					record(w, block, v, seg, err)
					continue
				}
				rec := trialRec(block, w)
				rdr, _ := array.NewRecordReader(testSchema, []arrow.RecordBatch{rec})
				res, err := tb.Append(ctx, rdr, nil)
				rdr.Release()
				rec.Release()
				if err == nil {
					mu.Lock()
					retries += res.Retries
					mu.Unlock()
					record(w, block, res.Version, res.Segment.Path, nil)
				} else {
					record(w, block, 0, "", err)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	total := writers * appends

	// Every block once, with its writer's rows, wherever it is read from.
	check := func(what string, got map[int64]float64, dups int) (lost, extra int) {
		if dups != 0 {
			t.Errorf("%s: %d intervals read twice", what, dups)
		}
		for block := range total {
			w := block % writers
			for i := block * procTrialRows; i < (block+1)*procTrialRows; i++ {
				v, ok := got[int64(i)]
				if !ok {
					lost++
				} else if v != float64(w*1_000_000+i) {
					t.Errorf("%s: interval %d holds %v, want writer %d's", what, i, v, w)
				}
			}
		}
		extra = len(got) + dups - (total*procTrialRows - lost)
		if lost != 0 || extra != 0 {
			t.Errorf("%s: %d rows lost, %d rows extra", what, lost, extra)
		}
		return lost, extra
	}
	got, dups, version, err := scanLibrary(ctx, dir)
	if err != nil {
		t.Fatalf("library scan: %v", err)
	}
	lost, extra := check("library", got, dups)
	for i, p := range srvs {
		got, dups, err := scanServer(ctx, dial(t, p.addr), "cpu")
		if err != nil {
			t.Fatalf("scan through server %d: %v", i, err)
		}
		l, e := check(fmt.Sprintf("server %d", i), got, dups)
		lost, extra = max(lost, l), max(extra, e)
	}
	t.Logf("concurrency: scenario=two-servers-one-root writers=%d+%d appends=%d ok=%d failed=%d lost=%d duplicates=%d library_retries=%d wall=%.2fs appends_per_s=%.0f",
		flightWriters, libWriters, total, len(acked), failed, lost/procTrialRows, extra/procTrialRows+reused, retries, wall.Seconds(), float64(total)/wall.Seconds())
	if failed != 0 || reused != 0 || len(acked) != total {
		t.Fatalf("%d of %d appends acknowledged, %d failed, %d versions claimed by two segments", len(acked), total, failed, reused)
	}
	// Every commit after the create holds acknowledged appends (grouped
	// appends share one), or is a compaction by the servers' background
	// maintenance (segments replaced, no new rows).
	compactions := 0
	for v := uint64(2); v <= version; v++ {
		if _, ok := segOf[v]; ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(tableformat.CommitPath(v))))
		if err != nil || !strings.Contains(string(data), `"RemoveSegment"`) {
			t.Fatalf("no append was acknowledged at version %d, and it is no compaction: %v %.300s", v, err, data)
		}
		compactions++
	}
	if version < 2 || version > uint64(total+compactions)+1 {
		t.Fatalf("library: version %d, want 2..%d (1 create + at most %d append commits + %d compactions)", version, total+compactions+1, total, compactions)
	}
	t.Logf("%d appends in %d commits, %d compactions", total, version-1-uint64(compactions), compactions)
	if t.Failed() {
		t.FailNow()
	}

	// Overlapping rounds: every Flight writer sends the same block at once,
	// half through each server; one commits, the rest are refused.
	rounds := max(appends/10, 3)
	single := 0
	winners := make([]int, rounds)
	prevWin := version
	for r := range rounds {
		block := total + r
		errs := make([]error, flightWriters)
		vers := make([]uint64, flightWriters)
		var ready, rwg sync.WaitGroup
		gate := make(chan struct{})
		ready.Add(flightWriters)
		for w := range flightWriters {
			rwg.Add(1)
			go func() {
				defer rwg.Done()
				rec := trialRec(block, w)
				ready.Done()
				<-gate
				vers[w], errs[w] = putRec(ctx, clients[w], "cpu", rec)
			}()
		}
		ready.Wait()
		close(gate)
		rwg.Wait()
		winner := -1
		for w, err := range errs {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both committed (versions %d, %d)", r, winner, w, vers[winner], vers[w])
				}
				winner = w
				continue
			}
			st, _ := status.FromError(err)
			if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "overlaps data already in the table") ||
				!strings.Contains(st.Message(), fmt.Sprintf("in %d (identity, index interval) pairs", procTrialRows)) {
				t.Errorf("round %d writer %d (server %d): %v, want FAILED_PRECONDITION naming the overlap", r, w, w%2, err)
			}
		}
		if winners[r] = winner; winner < 0 {
			t.Errorf("round %d: no put committed", r)
			continue
		}
		// The next version, unless the servers' maintenance compacted in
		// between: every version skipped must be a compaction.
		if vers[winner] <= prevWin {
			t.Errorf("round %d: winner at version %d, not after %d", r, vers[winner], prevWin)
		}
		for v := prevWin + 1; v < vers[winner]; v++ {
			data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(tableformat.CommitPath(v))))
			if err != nil || !strings.Contains(string(data), `"RemoveSegment"`) {
				t.Errorf("round %d: version %d before the winner's %d is no compaction: %v", r, v, vers[winner], err)
			}
		}
		prevWin = vers[winner]
	}
	// The library and both servers hold each round's winner's rows.
	sources := []string{"library", "server 0", "server 1"}
	held := make([]int, rounds)
	for i, what := range sources {
		var got map[int64]float64
		var dups int
		var err error
		if i == 0 {
			got, dups, _, err = scanLibrary(ctx, dir)
		} else {
			got, dups, err = scanServer(ctx, clients[i-1], "cpu")
		}
		if err != nil || dups != 0 {
			t.Fatalf("%s after the rounds: %v, %d intervals read twice", what, err, dups)
		}
		for r, w := range winners {
			block, whole := total+r, w >= 0
			for iv := block * procTrialRows; iv < (block+1)*procTrialRows; iv++ {
				whole = whole && got[int64(iv)] == float64(w*1_000_000+iv)
			}
			if whole {
				held[r]++
			} else if w >= 0 {
				t.Errorf("%s: round %d was won by writer %d, whose rows it does not hold", what, r, w)
			}
		}
	}
	for r := range rounds {
		if winners[r] >= 0 && held[r] == len(sources) {
			single++
		}
	}
	t.Logf("concurrency: scenario=two-servers-overlapping writers=%d overlap_rounds=%d single_winner=%d", flightWriters, rounds, single)
	for _, p := range srvs {
		p.stop()
	}
}
