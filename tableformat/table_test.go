package tableformat

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tsflight/tsflight/tableformat/storage"
)

func TestCreateAndOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fsys := storage.Local(dir)
	if _, err := Open(ctx, fsys, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open of an empty directory: %v, want ErrNotFound", err)
	}
	tb := mustCreate(t, fsys)
	st := tb.State()
	if st.Version != 1 || st.Meta.Protocol != 7 || st.Meta.Schema != nil || len(st.Meta.ReaderFeatures) != 0 {
		t.Fatalf("fresh table state %+v", st)
	}
	if _, err := Create(ctx, fsys, CreateOptions{Index: tsIndex()}, nil); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("second create: %v, want ErrAlreadyExists", err)
	}
	re, err := Open(ctx, fsys, nil)
	if err != nil || !re.State().Index().equal(st.Index()) {
		t.Fatalf("reopen: %v", err)
	}
}

// TestCreateRefusesBadSpecs: each invalid create is ErrInvalidInput naming
// the fault, and creates no file.
func TestCreateRefusesBadSpecs(t *testing.T) {
	ts := IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}
	cases := []struct {
		name string
		co   CreateOptions
		msg  string
	}{
		{"empty index column", CreateOptions{Index: IndexSpec{Kind: ts}}, "index column name is empty"},
		{"entity equals index", CreateOptions{Index: IndexSpec{Column: "ts", EntityColumns: []string{"ts"}, Kind: ts}}, `entity column "ts" is the index column`},
		{"duplicate entity", CreateOptions{Index: IndexSpec{Column: "ts", EntityColumns: []string{"a", "a"}, Kind: ts}}, `"a" is listed twice`},
		{"blank entity", CreateOptions{Index: IndexSpec{Column: "ts", EntityColumns: []string{" "}, Kind: ts}}, "entity column name is empty"},
		{"zero granularity", CreateOptions{Index: IndexSpec{Column: "ts", Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Hours, 0}}}}, "must be positive"},
		{"zero width", CreateOptions{Index: IndexSpec{Column: "k", Kind: IndexKind{Type: IndexInt64}}}, "must be positive"},
		{"unknown index type", CreateOptions{Index: IndexSpec{Column: "k", Kind: IndexKind{Type: "float64", Width: 1}}}, `unknown index type "float64"`},
		{"timezone on int index", CreateOptions{Index: IndexSpec{Column: "k", Kind: IndexKind{Type: IndexInt64, Width: 1, Timezone: strp("UTC")}}}, "cannot have a timezone"},
		{"schema without index column", CreateOptions{Index: IndexSpec{Column: "time", Kind: ts}, Schema: tsSchema()}, `index column "time" is not in the schema`},
		{"wrong index type", CreateOptions{Index: IndexSpec{Column: "v", Kind: ts}, Schema: tsSchema()}, `index column "v" has type Int64`},
		{"float entity", CreateOptions{Index: IndexSpec{Column: "ts", EntityColumns: []string{"f"}, Kind: ts}, Schema: tsSchema(Field{Name: "f", Type: DataType{Kind: TypeFloat64}})}, `entity column "f" has type Float64`},
		{"duplicate column", CreateOptions{Index: tsIndex(), Schema: tsSchema(Field{Name: "v", Type: DataType{Kind: TypeInt64}})}, `duplicate column name "v"`},
		{"bad decimal", CreateOptions{Index: tsIndex(), Schema: tsSchema(Field{Name: "d", Type: DataType{Kind: TypeDecimal, Precision: 10, Scale: 11}})}, "invalid Decimal"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := storage.NewMem()
			_, err := Create(context.Background(), mem, c.co, nil)
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Create: %v, want ErrInvalidInput mentioning %q", err, c.msg)
			}
			if names, _ := mem.List("."); len(names) != 0 {
				t.Fatalf("refused create left %v", names)
			}
		})
	}
}

// TestCreateWithAnnotatedSchemaDeclaresFeature: a schema with metadata
// declares schema_metadata for readers and writers, as the reference does.
func TestCreateWithAnnotatedSchemaDeclaresFeature(t *testing.T) {
	s := tsSchema()
	s.Metadata = map[string]string{"pandas": "{}"}
	tb := mustCreateTable(t, storage.NewMem(), CreateOptions{Index: tsIndex(), Schema: s}, nil)
	m := tb.State().Meta
	if strings.Join(m.ReaderFeatures, ",") != FeatureSchemaMetadata || strings.Join(m.WriterFeatures, ",") != FeatureSchemaMetadata {
		t.Fatalf("features %v / %v", m.ReaderFeatures, m.WriterFeatures)
	}
}

// TestCommitRefusesInvalidActions: a commit that replay would reject is
// never written.
func TestCommitRefusesInvalidActions(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	tb := mustCreate(t, mem)
	m := tb.State().Meta.Clone()
	m.ReaderFeatures = []string{"warp_drive"}
	seg := SegmentMeta{Path: "data/a.parquet", Format: FormatParquet, Layout: EntityLayout{Kind: LayoutSingle, Identity: Identity{{Type: EntityUtf8, Str: "h"}}},
		IndexMin: TimeValue(tsTime(0)), IndexMax: TimeValue(tsTime(10))}
	cases := []struct {
		name    string
		actions []Action
		want    error
		msg     string
	}{
		{"no actions", nil, ErrInvalidInput, "at least one action"},
		{"unsupported feature declared", []Action{UpdateTableMeta{Meta: *m}}, ErrUnsupported, "warp_drive"},
		{"segment before schema", []Action{AddSegment{Segment: seg}}, ErrInvalidInput, "no logical schema"},
		{"non-canonical path", []Action{RemoveSegment{Path: "./x"}}, ErrInvalidInput, "'.'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tb.Commit(ctx, 1, c.actions)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("Commit: %v, want %v mentioning %q", err, c.want, c.msg)
			}
			if _, err := mem.Stat(CommitPath(2)); !storage.IsNotExist(err) {
				t.Fatal("a refused commit was written")
			}
		})
	}
}

func TestParseTimeGranularity(t *testing.T) {
	good := map[string]TimeGranularity{
		"10s": {Seconds, 10}, "1 m": {Minutes, 1}, " 2 Hours ": {Hours, 2}, "1d": {Days, 1}, "3 mins": {Minutes, 3},
		"4294967295SEC": {Seconds, math.MaxUint32}, "1hr": {Hours, 1}, "7 day": {Days, 7},
	}
	for in, want := range good {
		got, err := ParseTimeGranularity(in)
		if err != nil || got != want {
			t.Errorf("ParseTimeGranularity(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "s", "0s", "10", "10ms", "1w", "4294967296s", "-1s", "1.5h"} {
		if _, err := ParseTimeGranularity(in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ParseTimeGranularity(%q) = %v, want ErrInvalidInput", in, err)
		}
	}
}

func tsTime(sec int64) time.Time { return time.Unix(sec, 0).UTC() }

func TestStateAt(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	tb := mustCreate(t, mem)
	if _, err := tb.Commit(ctx, 1, adoptSchema(tb.State())); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Commit(ctx, 2, marker("m")); err != nil {
		t.Fatal(err)
	}
	for v := uint64(1); v <= 3; v++ {
		st, err := tb.StateAt(ctx, v)
		if err != nil || st.Version != v {
			t.Fatalf("StateAt(%d): %v", v, err)
		}
		if (st.Schema() == nil) != (v == 1) {
			t.Fatalf("StateAt(%d) schema %v", v, st.Schema())
		}
	}
	for _, v := range []uint64{0, 4} {
		if _, err := tb.StateAt(ctx, v); !errors.Is(err, ErrNotFound) {
			t.Fatalf("StateAt(%d): %v, want ErrNotFound", v, err)
		}
	}
}

// TestStateAtReadsLittle: the snapshots a handle moved on from are kept
// for pinned reads, and an older version replays forward from the nearest
// kept snapshot, not from commit 1.
func TestStateAtReadsLittle(t *testing.T) {
	ctx := context.Background()
	ffs := storage.NewFaultFS(storage.NewMem())
	tb := mustCreate(t, ffs)
	if _, err := tb.Commit(ctx, 1, adoptSchema(tb.State())); err != nil {
		t.Fatal(err)
	}
	const last = 2 + 3*pastStates
	for v := uint64(2); v < last; v++ {
		if _, err := tb.Commit(ctx, v, marker(fmt.Sprint("m", v))); err != nil {
			t.Fatal(err)
		}
	}
	reads := func(v uint64) int {
		t.Helper()
		ffs.Reset()
		st, err := tb.StateAt(ctx, v)
		if err != nil || st.Version != v {
			t.Fatalf("StateAt(%d): %v, %v", v, st, err)
		}
		n := ffs.CountOps(storage.OpReadFile)
		// The snapshot equals one replayed from commit 1.
		want, err := tb.log.replayTo(ctx, nil, v)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(st, want) {
			t.Fatalf("StateAt(%d) = %+v, want the replayed %+v", v, st, want)
		}
		return n
	}
	// The versions the handle moved on from most recently are kept.
	for v := uint64(last - pastStates); v < last; v++ {
		if n := reads(v); n != 0 {
			t.Fatalf("StateAt(%d), a version the handle just held, read %d files", v, n)
		}
	}
	// An old version replays every commit up to it once; the next one
	// after it replays a single commit from there.
	if n := reads(10); n != 10 {
		t.Fatalf("StateAt(10) read %d files, want the 10 commits", n)
	}
	if n := reads(11); n != 1 {
		t.Fatalf("StateAt(11) after StateAt(10) read %d files, want 1", n)
	}
	if n := reads(11); n != 0 {
		t.Fatalf("StateAt(11) again read %d files, want 0", n)
	}
}
