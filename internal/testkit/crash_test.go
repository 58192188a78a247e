package testkit

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

func TestCrashSettings(t *testing.T) {
	t.Setenv("TSFLIGHT_CRASH_TRIALS", "")
	t.Setenv("TSFLIGHT_CRASH_SEED", "")
	if trials, seed := CrashSettings(t, 7); trials != 7 || seed == 0 {
		t.Errorf("defaults: %d trials, seed %d; want 7 and the clock", trials, seed)
	}
	t.Setenv("TSFLIGHT_CRASH_TRIALS", "500")
	t.Setenv("TSFLIGHT_CRASH_SEED", "42")
	if trials, seed := CrashSettings(t, 7); trials != 500 || seed != 42 {
		t.Errorf("from the environment: %d trials, seed %d; want 500 and 42", trials, seed)
	}
}

func TestCrashBatch(t *testing.T) {
	mem := newMem(t)
	const start = int64(1_700_000_000_000)
	rec := CrashBatch(mem, start, 3)
	defer rec.Release()
	if !rec.Schema().Equal(CrashSchema()) || rec.NumRows() != CrashRows {
		t.Fatalf("batch: %s, %d rows", rec.Schema(), rec.NumRows())
	}
	ts := rec.Column(0).(*array.Timestamp)
	ids := rec.Column(2).(*array.Int64)
	vs := rec.Column(3).(*array.Int64)
	for i := range CrashRows {
		if want := arrow.Timestamp(start + int64(3*CrashRows+i)*10_000); ts.Value(i) != want {
			t.Errorf("row %d: ts %d, want %d", i, ts.Value(i), want)
		}
		if ids.Value(i) != 3 || vs.Value(i) != int64(3000+i) {
			t.Errorf("row %d: batch %d v %d, want 3 and %d", i, ids.Value(i), vs.Value(i), 3000+i)
		}
	}
}

// recorder stands in for a test so that CheckBatches's failures can be
// counted.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, format)
}

func (r *recorder) Helper() {}

func TestCheckBatches(t *testing.T) {
	rec := &recorder{TB: t}
	acked := map[int64]uint64{1: 1, 2: 2, 3: 3, 4: 4}
	counts := map[int64]int{1: CrashRows, 2: 2 * CrashRows, 3: 3, 6: CrashRows, 5: CrashRows, 7: CrashRows + 1, 8: 1}
	unacked, f := CheckBatches(rec, "trial 1: ", counts, acked)
	if !slices.Equal(unacked, []int64{5, 6}) {
		t.Errorf("unacknowledged whole batches %v, want [5 6]", unacked)
	}
	if want := (BatchFaults{Lost: 1, Dups: 2, Partial: 2}); f != want {
		t.Errorf("faults %+v, want %+v", f, want)
	}
	if len(rec.errors) != 5 {
		t.Errorf("%d failures reported, want 5: %q", len(rec.errors), rec.errors)
	}
	rec = &recorder{TB: t}
	if _, f := CheckBatches(rec, "", map[int64]int{1: CrashRows}, map[int64]uint64{1: 1}); f != (BatchFaults{}) || len(rec.errors) != 0 {
		t.Errorf("a whole acknowledged batch: %+v, %q", f, rec.errors)
	}
}

func TestExpectedStrays(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, text string) {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(v uint64) string { return "_log/" + strings.Repeat("0", 3) + string(rune('0'+v)) + ".json" }
	write(commit(1), `{"actions":[{"AddSegment":{"path":"data/a.parquet","coverage_path":"_coverage/a.roar"}}]}`)
	write(commit(2), `{"actions":[{"UpdateTableCoverage":{"coverage_path":"_coverage/t2.roar"}}]}`)
	for _, rel := range []string{"data/a.parquet", "_coverage/a.roar", "_coverage/t2.roar", "data/stray.parquet",
		"_log/0003.json.tmp-1", "_log/_orphaned/x.tmp-2", "_log/CURRENT", "other/x.tmp-3"} {
		write(rel, "x")
	}
	want := []string{"_coverage/a.roar", "_coverage/t2.roar", "_log/0003.json.tmp-1", "data/a.parquet", "data/stray.parquet"}
	if got := StrayCandidates(t, dir, "_log"); !slices.Equal(got, want) {
		t.Errorf("candidates %v, want %v", got, want)
	}
	named := map[string]bool{}
	NamedPaths(t, dir, commit, 0, 2, named)
	if got, want := ExpectedStrays(t, dir, "_log", named), []string{"_log/0003.json.tmp-1", "data/stray.parquet"}; !slices.Equal(got, want) {
		t.Errorf("strays %v, want %v", got, want)
	}
}

func TestWriteAckAndBuffer(t *testing.T) {
	p := filepath.Join(t.TempDir(), "acked.log")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	WriteAck(t, f, 3, 9)
	WriteAck(t, f, 4, 10)
	if data, err := os.ReadFile(p); err != nil || string(data) != "acked 3 9\nacked 4 10\n" {
		t.Errorf("log %q (%v)", data, err)
	}
	var b Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			_, _ = b.Write([]byte("a"))
		}
	}()
	for range 100 {
		_, _ = b.Write([]byte("b"))
	}
	<-done
	if s := b.String(); len(s) != 200 || strings.Count(s, "a") != 100 {
		t.Errorf("buffer %q", s)
	}
}

func TestWriteFilesCopyDirSnapshot(t *testing.T) {
	src := filepath.Join(t.TempDir(), "t")
	if err := os.MkdirAll(filepath.Join(src, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := WriteFiles(t, src, map[string][]byte{"data/b": []byte("b"), "a": []byte("a")})
	if !slices.Equal(got, []string{"a", "data/b"}) {
		t.Errorf("WriteFiles returned %v", got)
	}
	sums := Snapshot(t, src)
	// SHA-256 of "a".
	if len(sums) != 2 || sums["a"] != "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb" || sums["data/b"] == "" {
		t.Errorf("Snapshot %v", sums)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	CopyDir(t, src, dst)
	if copied := Snapshot(t, dst); !maps.Equal(copied, sums) {
		t.Errorf("the copy sums to %v, the original %v", copied, sums)
	}
	if err := os.WriteFile(filepath.Join(dst, "a"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if maps.Equal(Snapshot(t, dst), sums) {
		t.Error("Snapshot does not see a changed file")
	}
}

func TestCompleteLines(t *testing.T) {
	for _, c := range []struct {
		text string
		want []string
	}{
		{"", nil},
		{"half", nil},
		{"a\n", []string{"a"}},
		{"a\nb\nhal", []string{"a", "b"}},
		{"a\n\nb\n", []string{"a", "", "b"}},
	} {
		if got := CompleteLines(c.text); !slices.Equal(got, c.want) {
			t.Errorf("CompleteLines(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

func TestAddBatchCounts(t *testing.T) {
	mem := newMem(t)
	b3, b5 := CrashBatch(mem, 0, 3), CrashBatch(mem, 0, 5)
	rdr, err := array.NewRecordReader(CrashSchema(), []arrow.RecordBatch{b3, b5, b3})
	b3.Release()
	b5.Release()
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	counts := map[int64]int{5: 1}
	if err := AddBatchCounts(counts, rdr); err != nil {
		t.Fatal(err)
	}
	if want := map[int64]int{3: 2 * CrashRows, 5: CrashRows + 1}; !maps.Equal(counts, want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}
