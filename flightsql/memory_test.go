//go:build duckdb_arrow

package flightsql

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestSQLMemoryLimit: with a 64 MB memory limit a query whose state
// cannot spill and needs more fails with ResourceExhausted naming the
// limit and --sql-memory-limit; the server goes on answering, and a query
// that fits (or spills) works.
func TestSQLMemoryLimit(t *testing.T) {
	s := startSQLWith(t, func(o *Options) { o.MemoryLimit = "64MB" })
	ctx := ctxT(t)
	if got := s.scalar(ctx, "SELECT count(*) FROM range(1000000)"); got != "1000000" {
		t.Fatalf("count = %s", got)
	}
	for _, q := range []string{
		"SELECT list(range) FROM range(30000000)",
		"SELECT length(string_agg(range::VARCHAR, ',')) FROM range(20000000)",
	} {
		_, err := s.readRows(ctx, q)
		wantCode(t, q, err, codes.ResourceExhausted, "Out of Memory", "memory limit of 61.0 MiB (--sql-memory-limit)")
		if strings.Contains(status.Convert(err).Message(), "SET memory_limit") {
			t.Fatalf("%s: the message repeats DuckDB's advice to change locked settings: %v", q, err)
		}
	}
	// A hash aggregate larger than the limit spills.
	if got := s.scalar(ctx, "SELECT count(*) FROM (SELECT x, count(*) FROM (SELECT range::VARCHAR || 'padding-padding' x FROM range(3000000)) GROUP BY x)"); got != "3000000" {
		t.Fatalf("spilled aggregate = %s", got)
	}
	if got := s.scalar(ctx, "SELECT sum(range) FROM range(1000000)"); got != "499999500000" {
		t.Fatalf("sum after the refusal = %s", got)
	}
}

// vmRSS is this process's resident set in bytes (VmRSS).
func vmRSS(t *testing.T) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return n << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestSQLMemoryRSS measures (it asserts nothing about the figures) the
// process's resident memory before, during and after one large query at
// the default memory limit, and after the same query is cancelled. Set
// TSFLIGHT_RSS_REPORT=1 to run it; the figures are logged.
func TestSQLMemoryRSS(t *testing.T) {
	if os.Getenv("TSFLIGHT_RSS_REPORT") == "" {
		t.Skip("set TSFLIGHT_RSS_REPORT=1 to measure")
	}
	limit := os.Getenv("TSFLIGHT_RSS_LIMIT") // "" = the default
	s := startSQLWith(t, func(o *Options) { o.MemoryLimit = limit })
	ctx := ctxT(t)
	s.scalar(ctx, "SELECT 1")
	n := 60_000_000
	if v, err := strconv.Atoi(os.Getenv("TSFLIGHT_RSS_ROWS")); err == nil {
		n = v
	}
	q := "SELECT count(DISTINCT x) FROM (SELECT range::VARCHAR x FROM range(" + strconv.Itoa(n) + "))"
	mb := func(b int64) string { return strconv.FormatInt(b>>20, 10) + " MiB" }
	peakDuring := func(run func()) int64 {
		stop := make(chan struct{})
		peak := make(chan int64)
		go func() {
			p := int64(0)
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				p = max(p, vmRSS(t))
				select {
				case <-stop:
					peak <- p
					return
				case <-tick.C:
				}
			}
		}()
		run()
		close(stop)
		return <-peak
	}
	duck := func() string {
		sess, err := s.sql.engine.open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.close()
		v, err := sess.scalarString(ctx, "SELECT format('{} in use, {} temp', format_bytes(sum(memory_usage_bytes)::BIGINT), format_bytes(sum(temporary_storage_bytes)::BIGINT)) FROM duckdb_memory()")
		if err != nil {
			return err.Error()
		}
		return v
	}
	settle := func() int64 {
		for _, d := range []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second} {
			time.Sleep(d)
			t.Logf("  %s later: VmRSS %s; DuckDB: %s", d, mb(vmRSS(t)), duck())
		}
		return vmRSS(t)
	}
	t.Logf("memory limit %q (default %s)", limit, mb(DefaultMemoryLimit()))
	before := vmRSS(t)
	start := time.Now()
	var got string
	peak := peakDuring(func() { got = s.scalar(ctx, q) })
	took := time.Since(start)
	after := settle()
	t.Logf("%s = %s in %s", q, got, took.Round(time.Millisecond))
	cctx, cancel := context.WithTimeout(ctx, took/2)
	peak2 := peakDuring(func() {
		_, err := s.readRows(cctx, q)
		t.Logf("cancelled after %s: %v", took/2, err)
	})
	cancel()
	afterCancel := settle()
	t.Logf("VmRSS before %s, peak %s, after %s, peak of the cancelled run %s, after the cancel %s",
		mb(before), mb(peak), mb(after), mb(peak2), mb(afterCancel))
}

// TestPreparedByteBudget: prepared statements are bounded in bytes, text
// and bound parameters together. With a 4 MiB budget (1 MiB per caller)
// twenty 200 KiB texts leave at most 1 MiB held, the oldest closed (their
// handles answer NotFound); a text or bound rows larger than the share
// are refused with ResourceExhausted naming the budget.
func TestPreparedByteBudget(t *testing.T) {
	s := startSQLWith(t, func(o *Options) { o.MaxPreparedBytes = 4 << 20 })
	ctx := ctxT(t)
	text := func(n int, tag int) string {
		return "SELECT " + strconv.Itoa(tag) + " AS v -- " + strings.Repeat("x", n)
	}
	var stmts []*flightsql.PreparedStatement
	for i := range 20 {
		p, err := s.client.Prepare(ctx, text(200<<10, i))
		if err != nil {
			t.Fatalf("prepare %d: %v", i, err)
		}
		stmts = append(stmts, p)
		if held := s.sql.prepared.heldBytes(); held > 1<<20 {
			t.Fatalf("after %d prepares the store holds %d bytes, over the caller's share of 1 MiB", i+1, held)
		}
	}
	held := s.sql.prepared.heldBytes()
	t.Logf("20 × 200 KiB texts: the store holds %d bytes (share 1 MiB)", held)
	if held < 800<<10 {
		t.Fatalf("the store holds %d bytes: it should keep the newest statements", held)
	}
	_, err := stmts[0].Execute(ctx)
	wantCode(t, "the oldest (evicted) statement", err, codes.NotFound, "prepare the statement again")
	info, err := stmts[19].Execute(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.fetch(ctx, info)
	if err != nil || fmt.Sprint(r.rowsOf()) != "[19]" {
		t.Fatalf("the newest statement: %v, %v", r, err)
	}
	r.release()

	_, err = s.client.Prepare(ctx, text(600<<10, 99))
	wantCode(t, "a 600 KiB text", err, codes.ResourceExhausted, "budget of 1 MiB per caller", "4 MiB", "--sql-prepared-bytes")

	// Bound rows count too.
	p, err := s.client.Prepare(ctx, "SELECT length(?::VARCHAR)")
	if err != nil {
		t.Fatal(err)
	}
	stmts = append(stmts, p)
	bindStrings := func(n, size int) error {
		return s.execPreparedErr(ctx, p, stringParams(s.cliMem, n, size))
	}
	if err := bindStrings(3, 200<<10); err != nil {
		t.Fatalf("3 × 200 KiB parameters: %v", err)
	}
	if held := s.sql.prepared.heldBytes(); held > 1<<20 {
		t.Fatalf("with bound rows the store holds %d bytes, over the share", held)
	}
	err = bindStrings(3, 400<<10)
	wantCode(t, "3 × 400 KiB parameters", err, codes.ResourceExhausted, "bound parameters", "budget of 1 MiB per caller", "--sql-prepared-bytes")
	for _, p := range stmts {
		p.Close(ctx)
	}
	if held := s.sql.prepared.heldBytes(); held != 0 {
		t.Fatalf("after closing every statement the store holds %d bytes", held)
	}
}

// TestPreparedStoreByteShares: one owner filling the byte budget pushes
// out its own oldest statements, not another owner's.
func TestPreparedStoreByteShares(t *testing.T) {
	var p preparedStore
	p.init(1000, time.Hour)
	p.limitBytes(40 << 10) // 10 KiB per owner
	big := strings.Repeat("x", 2000)
	for i := range 2 {
		if err := p.put(fmt.Sprintf("b%d", i), &prepared{query: big, owner: "token:b"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 50 {
		if err := p.put(fmt.Sprintf("a%d", i), &prepared{query: big, owner: "token:a"}); err != nil {
			t.Fatal(err)
		}
	}
	_, a := p.owned("token:a")
	nb, _ := p.owned("token:b")
	if nb != 2 || a > 10<<10 {
		t.Fatalf("b keeps %d statements (want 2), a holds %d bytes (want ≤ 10 KiB)", nb, a)
	}
	if _, ok := p.m["a49"]; !ok {
		t.Fatal("a's newest statement was evicted")
	}
	if err := p.put("huge", &prepared{query: strings.Repeat("x", 6<<10), owner: "token:a"}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a 12 KiB statement: %v, want ResourceExhausted", err)
	}
}
