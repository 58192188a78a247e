//go:build duckdb_arrow

package flightsql

// SQL while appends land: eight writers ingest small batches through Flight
// SQL bulk ingest, each on its own connection, while readers ask DuckDB for
// the row count per batch. Every answer must be a whole number of batches.
// TSFLIGHT_CONC_APPENDS (default 25) sets the appends per writer.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const sqlTrialBatchRows = 10

// ownClient is s with a Flight SQL client on a connection of its own,
// closed when the test ends.
func (s *sqlServer) ownClient() *sqlServer {
	s.t.Helper()
	c, err := flightsql.NewClient(s.srv.Addr().String(), nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		s.t.Fatal(err)
	}
	c.Alloc = s.cliMem
	s.t.Cleanup(func() { c.Close() })
	own := *s
	own.client = c
	return &own
}

// trialBatch is append s of writer w: host "w<w>", sqlTrialBatchRows
// seconds from t0 + s×sqlTrialBatchRows s, usage w×1000+s naming the batch.
func trialBatch(mem memory.Allocator, w, s int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, cpuSchema)
	defer b.Release()
	for i := range sqlTrialBatchRows {
		ts := t0.Add(time.Duration(s*sqlTrialBatchRows+i) * time.Second)
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.UnixMicro()))
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("w%d", w))
		b.Field(2).(*array.Float64Builder).Append(float64(w*1000 + s))
	}
	return b.NewRecordBatch()
}

// Each query answers rows, batches, and the least and greatest rows per
// batch; whole commits only means rows = batches × batch size and every
// batch complete. The two forms plan differently (a plain aggregate and a
// grouped one).
var wholeBatchQueries = []string{
	`SELECT count(*), count(DISTINCT usage), count(*) // greatest(count(DISTINCT usage), 1), count(*) // greatest(count(DISTINCT usage), 1) FROM cpu`,
	`SELECT coalesce(sum(c), 0), count(*), coalesce(min(c), 0), coalesce(max(c), 0) FROM (SELECT usage, count(*) AS c FROM cpu GROUP BY usage) g`,
}

// TestConcurrencySQLWholeCommits: SQL readers never see part of an append.
func TestConcurrencySQLWholeCommits(t *testing.T) {
	appends := 25
	if v := os.Getenv("TSFLIGHT_CONC_APPENDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("TSFLIGHT_CONC_APPENDS=%q: want a positive integer", v)
		}
		appends = n
	}
	const writers, readers = 8, 2
	s := startSQL(t)
	ctx := ctxT(t)
	// The table exists before the readers start: the first batch creates it.
	first := trialBatch(s.cliMem, 0, 0)
	_, err := s.ingest(ctx, "cpu", "create", cpuOpts, first)
	first.Release()
	if err != nil {
		t.Fatal(err)
	}

	var (
		mu          sync.Mutex
		failed      int
		queries     int
		rowsChecked int64
		torn        int
		readerErrs  []error
	)
	done := make(chan struct{})
	var rwg sync.WaitGroup
	for r := range readers {
		c := s.ownClient()
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			var lastBatches int64
			for q := 0; ; q++ {
				select {
				case <-done:
					return
				default:
				}
				rows, batches, least, most, err := c.wholeBatchCounts(ctx, wholeBatchQueries[q%len(wholeBatchQueries)])
				mu.Lock()
				switch {
				case err != nil:
					readerErrs = append(readerErrs, fmt.Errorf("reader %d: %w", r, err))
				case rows != batches*sqlTrialBatchRows || least != sqlTrialBatchRows || most != sqlTrialBatchRows:
					torn++
					readerErrs = append(readerErrs, fmt.Errorf("reader %d query %d: %d rows in %d batches of %d..%d rows: not whole batches", r, q, rows, batches, least, most))
				case batches < lastBatches:
					torn++
					readerErrs = append(readerErrs, fmt.Errorf("reader %d: %d batches after %d", r, batches, lastBatches))
				default:
					queries++
					rowsChecked += rows
					lastBatches = batches
				}
				stop := err != nil
				mu.Unlock()
				if stop {
					return
				}
			}
		}()
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		c := s.ownClient()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range appends {
				if w == 0 && seq == 0 {
					continue // created the table
				}
				rec := trialBatch(c.cliMem, w, seq)
				n, err := c.ingest(ctx, "cpu", "append", nil, rec)
				rec.Release()
				if err != nil || n != sqlTrialBatchRows {
					mu.Lock()
					failed++
					mu.Unlock()
					t.Errorf("writer %d append %d: %d rows, %v", w, seq, n, err)
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	close(done)
	rwg.Wait()

	total := writers * appends
	rows, batches, least, most, err := s.wholeBatchCounts(ctx, wholeBatchQueries[1])
	if err != nil {
		t.Fatal(err)
	}
	lost := int64(total-failed) - batches
	t.Logf("concurrency: scenario=sql-meanwhile writers=%d appends=%d ok=%d failed=%d lost=%d sql_queries=%d rows_checked=%d torn=%d wall=%.2fs",
		writers, total, total-failed, failed, lost, queries, rowsChecked, torn, wall.Seconds())
	for _, err := range readerErrs {
		t.Error(err)
	}
	if rows != int64(total*sqlTrialBatchRows) || batches != int64(total) || least != sqlTrialBatchRows || most != sqlTrialBatchRows {
		t.Fatalf("after the trial: %d rows in %d batches of %d..%d rows, want %d batches of %d", rows, batches, least, most, total, sqlTrialBatchRows)
	}
	if queries == 0 {
		t.Fatal("the readers completed no query")
	}
	d := s.describeTable(ctx, "cpu")
	// Appends may share commits (group commit): one segment per commit
	// after the create, at most one commit per append.
	v, _ := strconv.Atoi(string(d["version"].(json.Number)))
	if v < 2 || v > total+1 || d["segments"] != json.Number(strconv.Itoa(v-1)) {
		t.Fatalf("describe-table after the trial: %v", d)
	}
}

// wholeBatchCounts runs one of wholeBatchQueries and returns its four
// integers.
func (s *sqlServer) wholeBatchCounts(ctx context.Context, q string) (rows, batches, least, most int64, err error) {
	res, err := s.query(ctx, q)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("%s: %w", q, err)
	}
	defer res.release()
	got := res.rowsOf()
	if len(got) != 1 {
		return 0, 0, 0, 0, fmt.Errorf("%s: %d result rows, want 1", q, len(got))
	}
	var vals [4]int64
	if _, err := fmt.Sscanf(got[0], "%d|%d|%d|%d", &vals[0], &vals[1], &vals[2], &vals[3]); err != nil {
		return 0, 0, 0, 0, fmt.Errorf("%s: answer %q: %w", q, got[0], err)
	}
	return vals[0], vals[1], vals[2], vals[3], nil
}
