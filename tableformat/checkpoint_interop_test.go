package tableformat

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// TestCheckpointInterop: checkpoints do not get in the way of
// timeseries-table-format 0.9.0, which never looks inside
// _timeseries_log/_checkpoints/ and opens the table by replaying the
// commit files, all of which stay: it reads a checkpointed table, appends
// to it and adds a column; tsflight then opens it from its newest
// checkpoint plus the package's commits with the state of a full replay,
// and both count the same rows.
func TestCheckpointInterop(t *testing.T) {
	requireReference(t)
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	c := interopCases()[0]
	root := t.TempDir()
	dir := filepath.Join(root, "table")
	opts := DefaultOptions()
	opts.CheckpointInterval = 2
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: c.spec}, opts)
	var rows, sum int64
	var later []arrow.RecordBatch
	for _, rec := range c.batches(mem) {
		rows += rec.NumRows()
		for _, v := range rec.Column(2).(*array.Int64).Int64Values() {
			sum += v
		}
		later = append(later, shiftBatch(t, mem, rec, c))
		rdr := readerOf(t, c.schema, rec) // releases rec
		appendReader(t, ctx, tb, rdr, mem)
		tb.maybeCheckpoint(ctx, tb.State())
	}
	defer func() {
		for _, r := range later {
			r.Release()
		}
	}()
	if vs, _ := ckList(t, storage.Local(dir)); len(vs) != 2 || vs[1] != 4 {
		t.Fatalf("checkpoints %v, want 2 and 4", vs)
	}
	count := func(what string, want int64) {
		t.Helper()
		var q struct {
			Rows [][]any `json:"rows"`
		}
		interop(t, &q, "query", dir, "SELECT count(*) AS n FROM t")
		if fmt.Sprint(q.Rows) != fmt.Sprintf("[[%d]]", want) {
			t.Fatalf("%s: the package counts %v, want %d", what, q.Rows, want)
		}
		fresh, err := Open(ctx, storage.Local(dir), &Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		ckSame(t, what, fresh.State(), ckFull(t, storage.Local(dir), fresh.State().Version))
		if n, _ := scanCountSum(t, fresh, mem, "v"); n != want {
			t.Fatalf("%s: tsflight counts %d rows, want %d", what, n, want)
		}
	}
	count("checkpointed by tsflight", rows)

	// The package appends on top (its commits 5 and 6).
	var files []string
	for i, r := range later[:2] {
		p := filepath.Join(root, fmt.Sprintf("later%d.arrows", i))
		writeIPC(t, p, r)
		files = append(files, p)
		rows += r.NumRows()
	}
	var rep struct {
		Appends []struct {
			Version uint64 `json:"version"`
		} `json:"appends"`
	}
	interop(t, &rep, append([]string{"append", c.pySpec, dir}, files...)...)
	if len(rep.Appends) != 2 || rep.Appends[1].Version != 6 {
		t.Fatalf("the package's appends: %+v", rep.Appends)
	}
	l := ckStore(storage.Local(dir), nil)
	if _, _, err := l.replay(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if seed, _ := l.takeCheckpointSeed(); seed.versionOrZero() != 4 {
		t.Fatalf("opened from checkpoint %d, want 4", seed.versionOrZero())
	}
	count("after the package's appends", rows)

	// The package adds a column; a tsflight append checkpoints again.
	var added struct {
		Version uint64 `json:"version"`
	}
	interop(t, &added, "add-columns", dir, "score:float64")
	tb2 := mustOpen(t, storage.Local(dir), opts)
	rows += later[2].NumRows()
	rdr := readerOf(t, c.schema, later[2])
	later = later[:2]
	appendReader(t, ctx, tb2, rdr, mem)
	tb2.maybeCheckpoint(ctx, tb2.State())
	if vs, _ := ckList(t, storage.Local(dir)); vs[len(vs)-1] != tb2.State().Version {
		t.Fatalf("checkpoints %v, want one at %d", vs, tb2.State().Version)
	}
	count("after add_columns and a checkpointed append", rows)
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(checkpointDir))); err != nil {
		t.Fatal(err)
	}
}
