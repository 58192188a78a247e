package tableformat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// expectedTable is <name>.expected.json, written by
// testdata/reference/make_tables.py from what it appended (not from the log).
type expectedTable struct {
	Name      string `json:"name"`
	Version   uint64 `json:"version"`
	IndexSpec struct {
		Column      string   `json:"index_column"`
		Entities    []string `json:"entity_columns"`
		Type        string   `json:"index_type"`
		Granularity any      `json:"index_granularity"`
		Timezone    *string  `json:"timezone"`
	} `json:"index_spec"`
	Columns  []string `json:"columns"`
	Segments []struct {
		Path     string          `json:"path"`
		RowCount uint64          `json:"row_count"`
		FileSize uint64          `json:"file_size"`
		IndexMin json.RawMessage `json:"index_min"`
		IndexMax json.RawMessage `json:"index_max"`
	} `json:"segments"`
	ReaderFeatures []string `json:"reader_features"`
	WriterFeatures []string `json:"writer_features"`
}

// referenceSets are the directories of reference-written tables to check:
// the committed fixtures, and in CI a set generated fresh by the package in
// the same run (TSFLIGHT_REFERENCE_TABLES).
func referenceSets(t *testing.T) []string {
	sets := []string{filepath.Join("..", "testdata", "reference", "tables")}
	if d := os.Getenv("TSFLIGHT_REFERENCE_TABLES"); d != "" {
		sets = append(sets, d)
	} else if os.Getenv("CI") != "" {
		t.Fatal("CI must set TSFLIGHT_REFERENCE_TABLES to a freshly generated set")
	}
	return sets
}

// referenceExpected lists the *.expected.json files of the fixture set
// set, failing the test when there are fewer than the 7 of every set.
func referenceExpected(t *testing.T, set string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(set, "*.expected.json"))
	if err != nil || len(files) < 7 {
		t.Fatalf("%s: found %d expected files (%v)", set, len(files), err)
	}
	return files
}

// readExpected reads one *.expected.json file.
func readExpected(t *testing.T, file string) expectedTable {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var want expectedTable
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	return want
}

// TestReadReferenceTables: tsflight opens every table the 0.9.0 package
// wrote and reports the same version, schema, live segments and bounds;
// and every commit file re-encodes to the same bytes.
func TestReadReferenceTables(t *testing.T) {
	for _, set := range referenceSets(t) {
		for _, f := range referenceExpected(t, set) {
			t.Run(filepath.Base(set)+"/"+strings.TrimSuffix(filepath.Base(f), ".expected.json"), func(t *testing.T) {
				want := readExpected(t, f)
				checkReferenceTable(t, filepath.Join(set, want.Name), &want)
			})
		}
	}
}

func checkReferenceTable(t *testing.T, dir string, want *expectedTable) {
	ro := DefaultOptions()
	ro.ReadOnly = true
	tb := mustOpen(t, storage.Local(dir), ro)
	st := tb.State()
	if st.Version != want.Version {
		t.Errorf("version %d, want %d", st.Version, want.Version)
	}
	ix := st.Index()
	if ix.Column != want.IndexSpec.Column || strings.Join(ix.EntityColumns, ",") != strings.Join(want.IndexSpec.Entities, ",") || string(ix.Kind.Type) != want.IndexSpec.Type {
		t.Errorf("index spec %+v, want %+v", ix, want.IndexSpec)
	}
	switch g := want.IndexSpec.Granularity.(type) {
	case string:
		if ix.Kind.Time.String() != g {
			t.Errorf("granularity %s, want %s", ix.Kind.Time, g)
		}
	case float64: // small integers only in the fixtures
		if float64(ix.Kind.Width) != g {
			t.Errorf("granularity %d, want %v", ix.Kind.Width, g)
		}
	}
	if !equalStringPtr(ix.Kind.Timezone, want.IndexSpec.Timezone) {
		t.Errorf("timezone %v, want %v", ix.Kind.Timezone, want.IndexSpec.Timezone)
	}
	var cols []string
	for _, c := range st.Schema().Columns {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, ",") != strings.Join(want.Columns, ",") {
		t.Errorf("columns %v, want %v", cols, want.Columns)
	}
	if fmt.Sprint(st.Meta.ReaderFeatures) != fmt.Sprint(nonNil(want.ReaderFeatures)) || fmt.Sprint(st.Meta.WriterFeatures) != fmt.Sprint(nonNil(want.WriterFeatures)) {
		t.Errorf("features %v/%v, want %v/%v", st.Meta.ReaderFeatures, st.Meta.WriterFeatures, want.ReaderFeatures, want.WriterFeatures)
	}
	if len(st.Segments) != len(want.Segments) {
		t.Fatalf("%d live segments, want %d", len(st.Segments), len(want.Segments))
	}
	for _, ws := range want.Segments {
		seg, ok := st.Segment(ws.Path)
		if !ok {
			t.Errorf("segment %s not live", ws.Path)
			continue
		}
		if seg.RowCount != ws.RowCount || seg.FileSize == nil || *seg.FileSize != ws.FileSize {
			t.Errorf("segment %s: rows %d size %v, want %d %d", ws.Path, seg.RowCount, seg.FileSize, ws.RowCount, ws.FileSize)
		}
		for _, b := range []struct {
			got  IndexValue
			want json.RawMessage
		}{{seg.IndexMin, ws.IndexMin}, {seg.IndexMax, ws.IndexMax}} {
			w := strings.Trim(string(b.want), `"`)
			if b.got.String() != w {
				t.Errorf("segment %s: bound %s, want %s", ws.Path, b.got, w)
			}
		}
		if info, err := os.Stat(filepath.Join(dir, seg.Path)); err != nil || uint64(info.Size()) != ws.FileSize {
			t.Errorf("segment file %s: %v", seg.Path, err)
		}
	}
	// Every commit file re-encodes byte for byte.
	for v := uint64(1); v <= st.Version; v++ {
		data, err := os.ReadFile(filepath.Join(dir, CommitPath(v)))
		if err != nil {
			t.Fatal(err)
		}
		c, err := decodeCommit(data)
		if err != nil {
			t.Fatal(err)
		}
		again, err := c.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, data) {
			t.Errorf("commit %d re-encodes differently\n got: %s\nwant: %s", v, again, data)
		}
	}
}

// TestReferenceOpensTsflightTables: tables created by tsflight (every index
// domain, with and without entity columns, timezone and explicit schema)
// open in the 0.9.0 package, which can then append to them; tsflight then
// reads the package's append.
func TestReferenceOpensTsflightTables(t *testing.T) {
	requireReference(t)
	ctx := context.Background()
	root := t.TempDir()
	specs := map[string]CreateOptions{
		"ts_entity_tz": {Index: IndexSpec{Column: "ts", EntityColumns: []string{"host", "region"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Minutes, 5}, Timezone: strp("Europe/Paris")}}},
		"ts_plain":     {Index: IndexSpec{Column: "time", Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Days, 1}}}},
		"int64":        {Index: IndexSpec{Column: "k", Kind: IndexKind{Type: IndexInt64, Width: 10}}},
		"uint64":       {Index: IndexSpec{Column: "k", EntityColumns: []string{"dev"}, Kind: IndexKind{Type: IndexUInt64, Width: 1 << 40}}},
		"with_schema": {Index: IndexSpec{Column: "ts", EntityColumns: []string{"host"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Seconds, 10}}},
			Schema: &Schema{Columns: []Field{
				{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Millis}},
				{Name: "host", Type: DataType{Kind: TypeUtf8}},
				{Name: "v", Type: DataType{Kind: TypeFloat64}, Nullable: true},
			}}},
	}
	var dirs []string
	for name, co := range specs {
		dir := filepath.Join(root, name)
		if _, err := Create(ctx, storage.Local(dir), co, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	res := inspectWithReference(t, true, dirs...)
	for _, dir := range dirs {
		r := res[dir]
		if !r.OK || r.Version != 1 || r.ProbeSkipped != "" || r.VersionAfterProbe != 2 {
			t.Errorf("%s: reference saw %+v", filepath.Base(dir), r)
			continue
		}
		tb, err := Open(ctx, storage.Local(dir), nil)
		if err != nil {
			t.Fatalf("%s after the package appended: %v", filepath.Base(dir), err)
		}
		st := tb.State()
		if st.Version != 2 || len(st.Segments) != 1 || st.Schema() == nil || st.Coverage == nil || st.RowCount() != 1 {
			t.Errorf("%s after the package appended: version %d, %d segments, %d rows", filepath.Base(dir), st.Version, len(st.Segments), st.RowCount())
		}
		spec := specs[filepath.Base(dir)]
		if !st.Index().equal(&spec.Index) && !(len(spec.Index.EntityColumns) == 0 && len(st.Index().EntityColumns) == 0) {
			t.Errorf("%s: index spec changed to %+v", filepath.Base(dir), st.Index())
		}
	}
}
