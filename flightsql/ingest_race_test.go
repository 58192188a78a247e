//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// adbcIngest bulk-ingests rec into table in mode over a fresh ADBC Go
// connection, with the tsflight layout sent as call headers (the driver
// does not forward ingest options). The error is the gRPC status the
// driver received.
func (s *sqlServer) adbcIngest(ctx context.Context, mem memory.Allocator, table, mode string, hosts string) (int64, error) {
	db, err := adbcflightsql.NewDriver(mem).NewDatabase(map[string]string{
		adbc.OptionKeyURI: "grpc://" + s.srv.Addr().String(),
		adbcflightsql.OptionRPCCallHeaderPrefix + "x-tsflight-granularity":    "1s",
		adbcflightsql.OptionRPCCallHeaderPrefix + "x-tsflight-entity-columns": "host",
	})
	if err != nil {
		return 0, err
	}
	defer db.Close()
	cn, err := db.Open(ctx)
	if err != nil {
		return 0, grpcOf(err)
	}
	defer cn.Close()
	st, err := cn.NewStatement()
	if err != nil {
		return 0, grpcOf(err)
	}
	defer st.Close()
	if err := st.SetOption(adbc.OptionKeyIngestTargetTable, table); err != nil {
		return 0, err
	}
	if err := st.SetOption(adbc.OptionKeyIngestMode, mode); err != nil {
		return 0, err
	}
	// Not counted: the driver keeps a bound batch whose ingest fails.
	rec := cpuBatch(memory.NewGoAllocator(), t0, 50, hosts)
	defer rec.Release()
	if err := st.Bind(ctx, rec); err != nil {
		return 0, err
	}
	n, err := st.ExecuteUpdate(ctx)
	return n, grpcOf(err)
}

// TestIngestCreateIsExclusive: concurrent bulk ingests in mode create on
// one new name, over the ADBC Go driver, round after round: exactly one
// creates the table and appends, every other one is ALREADY_EXISTS naming
// the table, and the table holds exactly the winner's rows. Before create
// was exclusive, 2–6 of 6 succeeded, all appending to the one table.
func TestIngestCreateIsExclusive(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const writers, rounds = 8, 10
	for round := 0; round < rounds; round++ {
		table := fmt.Sprintf("race%d", round)
		var wg sync.WaitGroup
		errs := make([]error, writers)
		rows := make([]int64, writers)
		start := make(chan struct{})
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				<-start
				rows[w], errs[w] = s.adbcIngest(ctx, mem, table, adbc.OptionValueIngestModeCreate, fmt.Sprintf("w%d", w))
			}(w)
		}
		close(start)
		wg.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: writers %d and %d both created %s", round, winner, w, table)
				}
				winner = w
				if rows[w] != 50 {
					t.Fatalf("round %d: the winner ingested %d rows, want 50", round, rows[w])
				}
			case status.Code(err) == codes.AlreadyExists:
				wantCode(t, fmt.Sprintf("round %d writer %d", round, w), err, codes.AlreadyExists, table, "already exists")
			default:
				t.Fatalf("round %d writer %d: %v, want success or ALREADY_EXISTS", round, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer created %s: %v", round, table, errs)
		}
		want := fmt.Sprintf("50|1|w%d", winner)
		if got := s.scalar(ctx, "SELECT count(*), count(DISTINCT host), min(host) FROM "+table); got != want {
			t.Fatalf("round %d: %s holds %s, want the winner's rows only (%s)", round, table, got, want)
		}
		if d := s.describeTable(ctx, table); jsonUint(t, d, "segments") != 1 {
			t.Fatalf("round %d: %s has %d segments, want the winner's 1", round, table, jsonUint(t, d, "segments"))
		}
	}
	// create_append still appends to a table that exists.
	if n, err := s.adbcIngest(ctx, mem, "race0", adbc.OptionValueIngestModeCreateAppend, "late"); err != nil || n != 50 {
		t.Fatalf("create_append onto race0: %d, %v", n, err)
	}
	if got := s.scalar(ctx, "SELECT count(*) FROM race0"); got != "100" {
		t.Fatalf("race0 holds %s rows after create_append, want 100", got)
	}
	t.Logf("%d rounds of %d concurrent creates: one winner each", rounds, writers)
}

// TestIngestCreateAppendRace: concurrent create_append ingests on one new
// name all succeed and all their rows land in the one table.
func TestIngestCreateAppendRace(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const writers = 6
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			_, errs[w] = s.adbcIngest(ctx, mem, "ca", adbc.OptionValueIngestModeCreateAppend, fmt.Sprintf("w%d", w))
		}(w)
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", w, err)
		}
	}
	if got := s.scalar(ctx, "SELECT count(*), count(DISTINCT host) FROM ca"); got != fmt.Sprintf("%d|%d", 50*writers, writers) {
		t.Fatalf("ca holds %s, want %d rows of %d hosts", got, 50*writers, writers)
	}
}
