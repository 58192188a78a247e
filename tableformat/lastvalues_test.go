package tableformat

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/coverage"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// renderRows renders each row of rec as "col=value|…", in row order.
func renderRows(rec arrow.RecordBatch) []string {
	var out []string
	for i := range int(rec.NumRows()) {
		parts := make([]string, rec.NumCols())
		for c := range parts {
			parts[c] = rec.Schema().Field(c).Name + "=" + rec.Column(c).ValueStr(i)
		}
		out = append(out, strings.Join(parts, "|"))
	}
	return out
}

// bruteLast is the newest row per identity of st found by scanning every
// row: what the last-value index must hold, sorted by identity.
func bruteLast(t *testing.T, ctx context.Context, tb *Table, st *State) []string {
	t.Helper()
	type best struct {
		id   coverage.Identity
		s    int64
		u    uint64
		line string
	}
	ix := st.Index()
	newest := map[string]best{}
	scanEach(t, ctx, tb, st, ScanOptions{}, func(rec arrow.RecordBatch) {
		lines := renderRows(rec)
		sv, uv := indexInts(rec.Column(rec.Schema().FieldIndices(ix.Column)[0]))
		cols := make([]arrow.Array, len(ix.EntityColumns))
		for i, n := range ix.EntityColumns {
			cols[i] = rec.Column(rec.Schema().FieldIndices(n)[0])
		}
		for i, line := range lines {
			id := make(coverage.Identity, len(cols))
			if !rowIdentity(cols, i, id) {
				t.Fatalf("row %d has a null entity", i)
			}
			b := best{id: id, line: line}
			if sv != nil {
				b.s = sv[i]
			} else {
				b.u = uv[i]
			}
			if o, ok := newest[id.Key()]; !ok || b.s > o.s || b.u > o.u {
				newest[id.Key()] = b
			}
		}
	})
	all := make([]best, 0, len(newest))
	for _, b := range newest {
		all = append(all, b)
	}
	slices.SortFunc(all, func(a, b best) int { return a.id.Compare(b.id) })
	out := make([]string, len(all))
	for i, b := range all {
		out[i] = b.line
	}
	return out
}

// gotLast is LastValues of st rendered, with a checked allocator.
func gotLast(t *testing.T, ctx context.Context, tb *Table, st *State, opts LastOptions) []string {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	opts.Alloc = mem
	rec, err := tb.LastValues(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	return renderRows(rec)
}

func wantLast(t *testing.T, what string, ctx context.Context, tb *Table, st *State) {
	t.Helper()
	want := bruteLast(t, ctx, tb, st)
	got := gotLast(t, ctx, tb, st, LastOptions{})
	if !slices.Equal(got, want) {
		t.Fatalf("%s (version %d): last values\n%s\nwant\n%s", what, st.Version, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestLastValuesFollowTheTable(t *testing.T) {
	ctx := context.Background()
	e := newAppendEnv(t, tsIndex())
	// Appends of three hosts, a late row (older than the host's newest, in
	// an interval not yet covered) that must not replace the newest, and a
	// host that appears late.
	for i, rows := range [][]row{
		{{100, "a", 1}, {100, "b", 1}, {100, "c", 1}},
		{{110, "a", 2}, {110, "b", 2}},
		{{120, "a", 3}, {50, "b", 99}},
		{{150, "b", 3}, {300, "d", 7}, {10, "c", 50}},
		{{160, "b", 4}, {175, "b", 5}},
	} {
		if _, err := e.append(rows...); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		wantLast(t, "after an append", ctx, e.tb, e.tb.State())
	}
	if got := gotLast(t, ctx, e.tb, e.tb.State(), LastOptions{}); len(got) != 4 || !strings.Contains(got[1], "v=5") {
		t.Fatalf("b's newest is the 17 s row (v=5): %v", got)
	}
	// Entity filter and projection.
	got := gotLast(t, ctx, e.tb, e.tb.State(), LastOptions{Entities: map[string]EntityValue{"host": scStr("c")}, Columns: []string{"v", "host"}})
	if !slices.Equal(got, []string{"v=1|host=c"}) {
		t.Fatalf("filtered: %v", got)
	}
	if got := gotLast(t, ctx, e.tb, e.tb.State(), LastOptions{Entities: map[string]EntityValue{"host": scStr("zz")}}); len(got) != 0 {
		t.Fatalf("unknown host: %v", got)
	}
	// An older version is answered too, without disturbing the newest.
	old := mustStateAt(t, e.tb, 2)
	wantLast(t, "an older version", ctx, e.tb, old)
	wantLast(t, "the newest again", ctx, e.tb, e.tb.State())

	// Compaction rewrites the rows: the same answer.
	if _, err := e.tb.Compact(ctx, compactOpts(e.mem)); err != nil {
		t.Fatal(err)
	}
	if n := len(e.tb.State().Segments); n != 1 {
		t.Fatalf("%d segments after compaction", n)
	}
	wantLast(t, "after compaction", ctx, e.tb, e.tb.State())

	// Rollback to version 3 (before the late host d): its answer.
	if _, err := e.tb.Rollback(ctx, 3, nil); err != nil {
		t.Fatal(err)
	}
	wantLast(t, "after rollback", ctx, e.tb, e.tb.State())
	if got := gotLast(t, ctx, e.tb, e.tb.State(), LastOptions{}); len(got) != 3 {
		t.Fatalf("after rollback to version 3: %v", got)
	}
}

func TestLastValuesPersistAndCatchUp(t *testing.T) {
	ctx := context.Background()
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "a", 1}, row{0, "b", 1})
	p, n, err := e.tb.PersistLastValues(ctx)
	if err != nil || n != 2 || p != LastValuesPath(e.tb.State().Version) {
		t.Fatalf("persist: %q %d %v", p, n, err)
	}
	e.mustAppend(t, row{10, "a", 2}, row{30, "c", 1})
	// A new handle starts from the persisted index and catches up.
	tb2 := mustOpen(t, storage.Local(e.dir), nil)
	x := tb2.loadLastIndex(ctx, tb2.State())
	if x == nil || x.version != 2 {
		t.Fatalf("loaded %+v, want the index of version 2", x)
	}
	x.release()
	wantLast(t, "a new handle", ctx, tb2, tb2.State())
	// A damaged file is ignored (and the answer is still right).
	if err := os.WriteFile(filepath.Join(e.dir, LastValuesPath(2)), []byte("PAR1 not really"), 0o644); err != nil {
		t.Fatal(err)
	}
	tb3 := mustOpen(t, storage.Local(e.dir), nil)
	if x := tb3.loadLastIndex(ctx, tb3.State()); x != nil {
		t.Fatalf("a damaged index was loaded: version %d", x.version)
	}
	wantLast(t, "a damaged persisted index", ctx, tb3, tb3.State())
	// Persisting the newest version and reading it back gives the same rows.
	if _, _, err := tb3.PersistLastValues(ctx); err != nil {
		t.Fatal(err)
	}
	tb4 := mustOpen(t, storage.Local(e.dir), nil)
	x = tb4.loadLastIndex(ctx, tb4.State())
	if x == nil || x.version != tb4.State().Version {
		t.Fatalf("loaded %+v, want the newest", x)
	}
	got := renderRows(x.rec)
	x.release()
	if want := bruteLast(t, ctx, tb4, tb4.State()); !slices.Equal(got, want) {
		t.Fatalf("persisted rows %v, want %v", got, want)
	}
}

func TestLastValuesOfAnotherTableAreIgnored(t *testing.T) {
	ctx := context.Background()
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "a", 1})
	if _, _, err := e.tb.PersistLastValues(ctx); err != nil {
		t.Fatal(err)
	}
	// Another table, same version numbers, gets this table's index file.
	o := newAppendEnv(t, tsIndex())
	if _, err := o.append(row{0, "zz", 9}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(o.dir, lastDir), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(e.dir, LastValuesPath(2)))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.dir, LastValuesPath(2)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	tb := mustOpen(t, storage.Local(o.dir), nil)
	wantLast(t, "another table's index file", ctx, tb, tb.State())
}

func TestLastValuesRefusals(t *testing.T) {
	ctx := context.Background()
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "a", 1})
	for _, c := range []struct {
		opts LastOptions
		frag string
	}{
		{LastOptions{Columns: []string{"nope"}}, `unknown column "nope"`},
		{LastOptions{Entities: map[string]EntityValue{"v": scStr("x")}}, `"v" is not an entity column`},
		{LastOptions{Entities: map[string]EntityValue{"host": {Type: EntityInt64, Int: 3}}}, `"host" is a Utf8 column`},
	} {
		_, err := e.tb.LastValues(ctx, nil, c.opts)
		if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), c.frag) || !strings.Contains(err.Error(), "last: entities") && !strings.Contains(err.Error(), "last: columns") {
			t.Errorf("%+v: %v, want ErrInvalidInput with %q", c.opts, err, c.frag)
		}
	}
	g := newAppendEnv(t, IndexSpec{Column: "ts", Kind: tsIndex().Kind})
	if _, err := g.append(row{0, "a", 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.tb.LastValues(ctx, nil, LastOptions{}); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "no entity columns") {
		t.Fatalf("a table without entity columns: %v", err)
	}
}

// check verifies the persisted indexes: a good one gives no finding, a
// damaged one a warning, and one whose rows are not the table's newest
// rows (valid by itself and naming the log) an error.
func TestCheckLastValues(t *testing.T) {
	ctx := context.Background()
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "a", 1}, row{0, "b", 1})
	if _, _, err := e.tb.PersistLastValues(ctx); err != nil {
		t.Fatal(err)
	}
	e.mustAppend(t, row{10, "a", 2}, row{10, "b", 2})
	if _, _, err := e.tb.PersistLastValues(ctx); err != nil {
		t.Fatal(err)
	}
	codes := func() []string {
		t.Helper()
		rep, err := Check(ctx, storage.Local(e.dir), CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, f := range rep.Findings {
			out = append(out, f.Code+"@"+f.Path)
		}
		return out
	}
	if got := codes(); len(got) != 0 {
		t.Fatalf("clean table: %v", got)
	}
	// Version 3's file with version 2's rows (and version 3's metadata).
	old := mustStateAt(t, e.tb, 2)
	x2, err := e.tb.lastIndexAt(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	x3, err := e.tb.lastIndexAt(ctx, e.tb.State())
	if err != nil {
		t.Fatal(err)
	}
	forged := &lastIndex{version: x3.version, digest: x3.digest, origin: x3.origin, rec: x2.rec, src: x3.src, entities: x3.entities}
	data, err := encodeLastIndex(forged)
	x2.release()
	x3.release()
	if err != nil {
		t.Fatal(err)
	}
	p3 := filepath.Join(e.dir, LastValuesPath(3))
	if err := os.Remove(p3); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p3, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := codes(); !slices.Equal(got, []string{CheckLastValuesMismatch + "@" + LastValuesPath(3)}) {
		t.Fatalf("forged rows: %v", got)
	}
	// Damaged: a warning, and readers ignore it.
	if err := os.WriteFile(p3, data[:len(data)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	if got := codes(); !slices.Equal(got, []string{CheckLastValuesCorrupt + "@" + LastValuesPath(3)}) {
		t.Fatalf("damaged: %v", got)
	}
	tb := mustOpen(t, storage.Local(e.dir), nil)
	if x := tb.loadLastIndex(ctx, tb.State()); x == nil || x.version != 2 {
		t.Fatalf("with version 3's index damaged, a reader starts from %+v, want version 2's", x)
	} else {
		x.release()
	}
	wantLast(t, "a damaged newest index", ctx, tb, tb.State())
}

// Readers of the index (LastValues, LastValuesFile) race appends: every
// answer is the newest rows of the version it was asked for.
func TestLastValuesConcurrent(t *testing.T) {
	ctx := context.Background()
	e := newAppendEnv(t, tsIndex())
	e.mustAppend(t, row{0, "a", 0}, row{0, "b", 0})
	done := make(chan struct{})
	errs := make(chan error, 8)
	for w := range 4 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				st := e.tb.State()
				var err error
				if w%2 == 0 {
					var rec arrow.RecordBatch
					if rec, err = e.tb.LastValues(ctx, st, LastOptions{}); err == nil {
						if rec.NumRows() != 2 {
							err = errors.New("not 2 rows")
						}
						rec.Release()
					}
				} else {
					_, _, err = e.tb.LastValuesFile(ctx, st)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 1; i <= 30; i++ {
		e.mustAppend(t, row{int64(i * 10), "a", int64(i)}, row{int64(i * 10), "b", int64(i)})
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	wantLast(t, "after the race", ctx, e.tb, e.tb.State())
}

// A table with a schema but no rows yet answers an empty batch of the
// requested columns.
func TestLastValuesOfATableWithoutRows(t *testing.T) {
	ctx := context.Background()
	tb := mustCreateTable(t, storage.Local(t.TempDir()), CreateOptions{Index: tsIndex(), Schema: tsSchema()}, nil)
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, cols := range [][]string{nil, {"host"}} {
		rec, err := tb.LastValues(ctx, nil, LastOptions{Columns: cols, Alloc: mem})
		if err != nil {
			t.Fatal(err)
		}
		if rec.NumRows() != 0 || (cols != nil && rec.NumCols() != 1) || (cols == nil && int(rec.NumCols()) != len(tsSchema().Columns)) {
			t.Fatalf("columns %v: %d rows, %d columns", cols, rec.NumRows(), rec.NumCols())
		}
		rec.Release()
	}
	if _, _, err := tb.PersistLastValues(ctx); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("persisting the index of a table without rows: %v, want ErrInvalidInput", err)
	}
}
