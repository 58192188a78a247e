package flightserver

// Concurrency trials through a real server: eight clients, each on its own
// gRPC connection, append small batches by DoPut while readers scan the
// table over and over. Disjoint appends must all commit exactly once;
// overlapping ones have exactly one winner per interval; every scan sees
// whole commits only. TSFLIGHT_CONC_APPENDS (default 100) sets the appends
// per writer. Each trial logs one "concurrency: scenario=…" summary line.

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

const (
	trialWriters   = 8
	trialReaders   = 3
	trialBatchRows = 8 // rows per append; the row's index in its batch is usage_idle
)

// trialAppends is the appends per writer: TSFLIGHT_CONC_APPENDS, else 100,
// or 25 under the race detector (which makes appends about seven times
// slower).
func trialAppends(t *testing.T) int {
	t.Helper()
	s := os.Getenv("TSFLIGHT_CONC_APPENDS")
	if s == "" {
		if raceBuild() {
			return 25
		}
		return 100
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("TSFLIGHT_CONC_APPENDS=%q: want a positive integer", s)
	}
	return n
}

// raceBuild reports whether the test binary was built with -race.
func raceBuild() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, kv := range bi.Settings {
		if kv.Key == "-race" {
			return kv.Value == "true"
		}
	}
	return false
}

// ownClient is ts with a client on a new gRPC connection of its own, closed
// when the test ends; its put, doGet and fetchAll go over that connection.
func (ts *testServer) ownClient() *testServer {
	ts.t.Helper()
	c, err := flight.NewClientWithMiddleware(ts.srv.Addr().String(), nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		ts.t.Fatalf("client: %v", err)
	}
	ts.t.Cleanup(func() { c.Close() })
	own := *ts
	own.client = c
	return &own
}

// batchKey names one append: writer and sequence number, stored in every
// row of it as usage_user and usage_system.
type batchKey struct{ writer, seq int }

// trial is a concurrency scenario's data: batch (w, s) holds
// trialBatchRows rows; row i is at place(w, s, i) with usage_user w,
// usage_system s and usage_idle i, so any row names its batch and place.
type trial struct {
	writers, appends int
	place            func(w, s, i int) (host string, step int)
}

func (tr *trial) row(w, s, i int) row {
	host, step := tr.place(w, s, i)
	return row{ts: t0.Add(timeOfStep(step)).UnixNano(), host: host, user: int64(w), system: int64(s), idle: int64(i)}
}

func (tr *trial) rows(w, s int) []row {
	out := make([]row, trialBatchRows)
	for i := range out {
		out[i] = tr.row(w, s, i)
	}
	return out
}

// wholeBatches checks that rows are whole batches of tr, each at most once
// and each row where its batch puts it, and returns the batches. A batch
// with missing rows is torn; a row seen twice is a duplicate.
func (tr *trial) wholeBatches(rows []row) ([]batchKey, error) {
	seen := map[batchKey]uint64{} // bit i: row i seen
	for _, r := range rows {
		w, s, i := int(r.user), int(r.system), int(r.idle)
		if w < 0 || w >= tr.writers || s < 0 || s >= tr.appends || i < 0 || i >= trialBatchRows {
			return nil, fmt.Errorf("row %+v belongs to no batch", r)
		}
		if want := tr.row(w, s, i); r != want {
			return nil, fmt.Errorf("row %+v, want %+v", r, want)
		}
		k := batchKey{w, s}
		if seen[k]&(1<<i) != 0 {
			return nil, fmt.Errorf("duplicate: row %d of batch %v seen twice", i, k)
		}
		seen[k] |= 1 << i
	}
	out := make([]batchKey, 0, len(seen))
	for k, mask := range seen {
		if mask != 1<<trialBatchRows-1 {
			return nil, fmt.Errorf("torn: batch %v has rows %b of %d", k, mask, trialBatchRows)
		}
		out = append(out, k)
	}
	return out, nil
}

// scanSnap is what one scan saw: its version and its batches.
type scanSnap struct {
	version uint64
	batches []batchKey
}

// scanStats is what the readers did.
type scanStats struct {
	mu        sync.Mutex
	scans     int
	rows      int64
	snapshots []scanSnap
	errs      []error
}

func (st *scanStats) fail(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.errs = append(st.errs, err)
}

// scanOnce plans a whole-table scan of name, reads every endpoint and
// checks that the rows are whole batches, as many as the version has
// appends (version 1 is the create), and what FlightInfo announced.
func scanOnce(ctx context.Context, c *testServer, tr *trial, name string) (scanSnap, int, error) {
	info, err := c.client.GetFlightInfo(ctx, pathDesc(name))
	if err != nil {
		return scanSnap{}, 0, fmt.Errorf("GetFlightInfo: %w", err)
	}
	var version uint64
	for _, ep := range info.Endpoint {
		tk, err := decodeTicket(ep.Ticket.Ticket)
		if err != nil {
			return scanSnap{}, 0, err
		}
		if version != 0 && *tk.Version != version {
			return scanSnap{}, 0, fmt.Errorf("endpoints pinned to versions %d and %d", version, *tk.Version)
		}
		version = *tk.Version
	}
	got, err := c.fetchAll(ctx, info)
	if err != nil {
		return scanSnap{}, 0, fmt.Errorf("DoGet at version %d: %w", version, err)
	}
	if info.TotalRecords != int64(len(got.rows)) {
		return scanSnap{}, 0, fmt.Errorf("version %d: FlightInfo announced %d rows, DoGet returned %d", version, info.TotalRecords, len(got.rows))
	}
	batches, err := tr.wholeBatches(got.rows)
	if err != nil {
		return scanSnap{}, 0, fmt.Errorf("version %d: %w", version, err)
	}
	// Each commit after the create holds at least one append (appends
	// committed together share a commit), and never part of one.
	if uint64(len(batches))+1 < version || len(batches) > tr.writers*tr.appends {
		return scanSnap{}, 0, fmt.Errorf("version %d holds %d appends, want %d to %d", version, len(batches), version-1, tr.writers*tr.appends)
	}
	return scanSnap{version: version, batches: batches}, len(got.rows), nil
}

// startReaders runs n readers, each on its own connection, scanning name
// until stop is called; stop waits for them and returns their stats. Each
// reader's versions must not go backwards. A reader rests as long as its
// last scan took, so that readers do not starve the writers of the cores.
func startReaders(ctx context.Context, ts *testServer, tr *trial, name string, n int) (stop func() *scanStats) {
	st := &scanStats{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := range n {
		c := ts.ownClient()
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for rest := time.Duration(0); ; {
				select {
				case <-done:
					return
				case <-ctx.Done():
					return
				case <-time.After(rest):
				}
				began := time.Now()
				snap, rows, err := scanOnce(ctx, c, tr, name)
				rest = time.Since(began)
				if err != nil {
					st.fail(fmt.Errorf("reader %d: %w", r, err))
					return
				}
				if snap.version < last {
					st.fail(fmt.Errorf("reader %d: version went back from %d to %d", r, last, snap.version))
					return
				}
				last = snap.version
				st.mu.Lock()
				st.scans++
				st.rows += int64(rows)
				st.snapshots = append(st.snapshots, snap)
				st.mu.Unlock()
			}
		}()
	}
	return func() *scanStats {
		close(done)
		wg.Wait()
		return st
	}
}

// checkSnapshots checks each scan against the versions the puts were
// acknowledged at: a scan at version v holds exactly the batches committed
// at or before v. It returns the number of scans that did not.
func checkSnapshots(t *testing.T, snaps []scanSnap, committed map[batchKey]uint64) (torn int) {
	t.Helper()
	for _, s := range snaps {
		for _, k := range s.batches {
			if v, ok := committed[k]; !ok || v > s.version {
				t.Errorf("scan at version %d holds batch %v committed at version %d", s.version, k, v)
				torn++
				break
			}
		}
	}
	return torn
}

// runDisjoint is one disjoint trial on table "cpu": every writer appends
// its own batches in order while readers scan.
func runDisjoint(t *testing.T, scenario string, tr *trial) {
	ts := startServer(t, func(o *Options) { o.MaxEndpoints = 4 })
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	stopReaders := startReaders(ctx, ts, tr, "cpu", trialReaders)

	var (
		mu        sync.Mutex
		committed = map[batchKey]uint64{}
		byVersion = map[uint64]string{} // version → segment
		failed    int
		dupVer    int
		wg        sync.WaitGroup
	)
	start := time.Now()
	for w := range tr.writers {
		c := ts.ownClient()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range tr.appends {
				batches := buildBatches(c.cliMem, tr.rows(w, s), trialBatchRows)
				res, err := c.put(ctx, pathDesc("cpu"), tsbsSchema, batches...)
				releaseAll(batches)
				mu.Lock()
				switch {
				case err != nil || len(res) != 1 || res[0].Rows != trialBatchRows:
					failed++
					if failed <= 5 {
						t.Errorf("writer %d append %d: %v %v", w, s, res, err)
					}
				default:
					// Appends committed together share a version and its
					// segment; one version with two segments would be two
					// commits claiming it.
					v := res[0].Version
					if prev, dup := byVersion[v]; dup && prev != res[0].Segment {
						dupVer++
						t.Errorf("version %d acknowledged with segments %s and %s (batch %v)", v, prev, res[0].Segment, batchKey{w, s})
					}
					byVersion[v] = res[0].Segment
					committed[batchKey{w, s}] = v
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	st := stopReaders()

	// The table afterwards: every acknowledged batch once, nothing else.
	total := tr.writers * tr.appends
	final, rows, err := scanOnce(ctx, ts, tr, "cpu")
	if err != nil {
		t.Fatalf("final scan: %v", err)
	}
	in := map[batchKey]bool{}
	for _, k := range final.batches {
		in[k] = true
	}
	lost, extra := 0, 0
	for k := range committed {
		if !in[k] {
			lost++
		}
	}
	for k := range in {
		if _, ok := committed[k]; !ok {
			extra++ // stored although its put failed
		}
	}
	torn := len(st.errs) + checkSnapshots(t, st.snapshots, committed)
	t.Logf("concurrency: scenario=%s writers=%d appends=%d ok=%d failed=%d lost=%d duplicates=%d scans=%d rows_checked=%d torn=%d wall=%.2fs appends_per_s=%.0f",
		scenario, tr.writers, total, len(committed), failed, lost, dupVer+extra, st.scans, st.rows+int64(rows), torn, wall.Seconds(), float64(total)/wall.Seconds())
	for _, err := range st.errs {
		t.Error(err)
	}
	if failed != 0 || lost != 0 || extra != 0 || dupVer != 0 || len(committed) != total {
		t.Fatalf("%d acknowledged of %d, %d failed, %d lost, %d stored without acknowledgement, %d versions claimed by two segments", len(committed), total, failed, lost, extra, dupVer)
	}
	// Puts committed together share a commit: between 1 and total commits
	// after the create, each holding acknowledged puts.
	if final.version < 2 || final.version > uint64(total)+1 {
		t.Fatalf("final version %d, want 2..%d (1 create + at most %d commits)", final.version, total+1, total)
	}
	t.Logf("%d puts in %d commits", total, final.version-1)
	for v := uint64(2); v <= final.version; v++ {
		if _, ok := byVersion[v]; !ok {
			t.Fatalf("no put was acknowledged at version %d", v)
		}
	}
	if st.scans == 0 {
		t.Fatal("the readers completed no scan")
	}
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	if d["version"] != float64(final.version) || d["rows"] != float64(total*trialBatchRows) || d["segments"] != float64(final.version-1) {
		t.Fatalf("describe-table after the trial: %v", d)
	}
}

// TestConcurrencyTrialDisjointEntities: writer w owns entity host_w; its
// appends follow each other in time.
func TestConcurrencyTrialDisjointEntities(t *testing.T) {
	tr := &trial{writers: trialWriters, appends: trialAppends(t), place: func(w, s, i int) (string, int) {
		return fmt.Sprintf("host_%d", w), s*trialBatchRows + i
	}}
	runDisjoint(t, "server-disjoint-entities", tr)
}

// TestConcurrencyTrialDisjointTimes: all writers append the same two
// entities; append s of writer w owns time block s×writers+w, so
// neighbouring blocks come from different writers.
func TestConcurrencyTrialDisjointTimes(t *testing.T) {
	tr := &trial{writers: trialWriters, appends: trialAppends(t)}
	tr.place = func(w, s, i int) (string, int) {
		block := s*tr.writers + w
		return fmt.Sprintf("host_%d", i%2), block*trialBatchRows/2 + i/2
	}
	runDisjoint(t, "server-disjoint-times", tr)
}

// TestConcurrencyTrialOverlapping: in each round all writers send the same
// rows (host_0, one time block) with their own payload at the same moment:
// exactly one commits, the others get FAILED_PRECONDITION naming the
// overlap, and the winner's rows are the ones stored.
func TestConcurrencyTrialOverlapping(t *testing.T) {
	rounds := max(trialAppends(t)/4, 1)
	// Batch (w, r) is writer w's payload for round r; all writers' rows of
	// a round share their places.
	tr := &trial{writers: trialWriters, appends: rounds, place: func(w, r, i int) (string, int) {
		return "host_0", r*trialBatchRows + i
	}}
	ts := startServer(t, func(o *Options) { o.MaxEndpoints = 4 })
	ctx := ctxT(t)
	ts.createTSBS(ctx, "cpu")
	stopReaders := startReaders(ctx, ts, tr, "cpu", 2)
	clients := make([]*testServer, tr.writers)
	for w := range clients {
		clients[w] = ts.ownClient()
	}
	winners := make([]int, rounds)
	committed := map[batchKey]uint64{}
	singleWinner := 0
	start := time.Now()
	for r := range rounds {
		errs := make([]error, tr.writers)
		res := make([][]PutResult, tr.writers)
		var ready, wg sync.WaitGroup
		ready.Add(tr.writers)
		gate := make(chan struct{})
		for w, c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				batches := buildBatches(c.cliMem, tr.rows(w, r), trialBatchRows)
				defer releaseAll(batches)
				ready.Done()
				<-gate // all writers send at once
				res[w], errs[w] = c.put(ctx, pathDesc("cpu"), tsbsSchema, batches...)
			}()
		}
		ready.Wait()
		close(gate)
		wg.Wait()
		winners[r] = -1
		var ok int
		for w, err := range errs {
			if err == nil {
				ok++
				winners[r] = w
				committed[batchKey{w, r}] = res[w][0].Version
				continue
			}
			st, _ := status.FromError(err)
			starts := make([]string, trialBatchRows)
			for i := range starts {
				starts[i] = time.Unix(0, tr.row(w, r, i).ts).UTC().Format(time.RFC3339)
			}
			if st.Code() != codes.FailedPrecondition ||
				!strings.Contains(st.Message(), "overlaps data already in the table") ||
				!strings.Contains(st.Message(), fmt.Sprintf("in %d (identity, index interval) pairs", trialBatchRows)) ||
				!strings.Contains(st.Message(), `"host_0"`) ||
				!containsAny(st.Message(), starts) {
				t.Errorf("round %d writer %d: %v, want FAILED_PRECONDITION naming the overlap of host_0 in %s..%s", r, w, err, starts[0], starts[len(starts)-1])
			}
		}
		if ok == 1 {
			singleWinner++
		} else {
			t.Errorf("round %d: %d puts committed, want exactly 1", r, ok)
		}
	}
	wall := time.Since(start)
	st := stopReaders()
	final, rows, err := scanOnce(ctx, ts, tr, "cpu")
	if err != nil {
		t.Fatalf("final scan: %v", err)
	}
	// Each round's stored batch is its winner's.
	stored := map[int]int{}
	for _, k := range final.batches {
		if prev, two := stored[k.seq]; two {
			t.Errorf("round %d stored from writers %d and %d", k.seq, prev, k.writer)
		}
		stored[k.seq] = k.writer
	}
	lost := 0
	for r, w := range winners {
		if got, ok := stored[r]; w >= 0 && (!ok || got != w) {
			lost++
			t.Errorf("round %d: the winner was writer %d, the table holds %v", r, w, got)
		}
	}
	torn := len(st.errs) + checkSnapshots(t, st.snapshots, committed)
	t.Logf("concurrency: scenario=server-overlapping writers=%d appends=%d overlap_rounds=%d single_winner=%d lost=%d scans=%d rows_checked=%d torn=%d wall=%.2fs",
		tr.writers, rounds*tr.writers, rounds, singleWinner, lost, st.scans, st.rows+int64(rows), torn, wall.Seconds())
	for _, err := range st.errs {
		t.Error(err)
	}
	if final.version != uint64(rounds)+1 || len(final.batches) != rounds {
		t.Fatalf("after %d rounds: version %d with %d batches", rounds, final.version, len(final.batches))
	}
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
