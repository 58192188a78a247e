package coverage

// Byte-for-byte checks against sidecars written by timeseries-table-format
// 0.9.0: the reference tables under testdata/reference/tables (and a fresh
// set when TSFLIGHT_REFERENCE_TABLES is set) and the goldens under
// coverage/testdata/golden (see the README there).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// Reading reference tables (test-only: the package knows nothing of logs).

type refCommit struct {
	Version uint64
	Actions []map[string]json.RawMessage
}

type refSidecars struct {
	version uint64
	segment string // table-relative coverage_path of the AddSegment
	table   string // coverage_path of the UpdateTableCoverage
}

type refTable struct {
	dir      string
	spec     IndexSpec
	sidecars []refSidecars // one per append, in commit order
}

func loadRefTable(t *testing.T, dir string) refTable {
	t.Helper()
	cur, err := os.ReadFile(filepath.Join(dir, "_timeseries_log", "CURRENT"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(cur)))
	if err != nil {
		t.Fatal(err)
	}
	rt := refTable{dir: dir}
	haveSpec := false
	for v := 1; v <= n; v++ {
		raw, err := os.ReadFile(filepath.Join(dir, "_timeseries_log", fmt.Sprintf("%010d.json", v)))
		if err != nil {
			t.Fatal(err)
		}
		var c refCommit
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		var sc refSidecars
		for _, a := range c.Actions {
			if m, ok := a["UpdateTableMeta"]; ok {
				var meta struct {
					Kind struct {
						TimeSeries json.RawMessage
					}
				}
				if err := json.Unmarshal(m, &meta); err != nil {
					t.Fatal(err)
				}
				rt.spec = parseLogIndexSpec(t, meta.Kind.TimeSeries)
				haveSpec = true
			}
			if m, ok := a["AddSegment"]; ok {
				sc.segment = coveragePathOf(t, m)
			}
			if m, ok := a["UpdateTableCoverage"]; ok {
				sc.table = coveragePathOf(t, m)
			}
		}
		if sc.segment != "" {
			sc.version = c.Version
			rt.sidecars = append(rt.sidecars, sc)
		}
	}
	if !haveSpec {
		t.Fatalf("%s: no UpdateTableMeta", dir)
	}
	return rt
}

// parseLogIndexSpec converts the log's IndexSpec JSON.
func parseLogIndexSpec(t *testing.T, raw json.RawMessage) IndexSpec {
	t.Helper()
	var js struct {
		Column        string
		EntityColumns []string `json:"entity_columns"`
		Kind          struct {
			Type        string
			Granularity json.RawMessage `json:"index_granularity"`
			Timezone    *string
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&js); err != nil {
		t.Fatal(err)
	}
	spec := IndexSpec{Column: js.Column, EntityColumns: js.EntityColumns}
	switch js.Kind.Type {
	case "timestamp":
		spec.Kind = KindTimestamp
		var g map[string]uint32
		if err := json.Unmarshal(js.Kind.Granularity, &g); err != nil || len(g) != 1 {
			t.Fatalf("granularity %s: %v", js.Kind.Granularity, err)
		}
		for k, v := range g {
			spec.Count = v
			spec.Unit = map[string]Unit{"Seconds": UnitSeconds, "Minutes": UnitMinutes, "Hours": UnitHours, "Days": UnitDays}[k]
		}
		if js.Kind.Timezone != nil {
			spec.Timezone, spec.HasTimezone = *js.Kind.Timezone, true
		}
	case "int64", "uint64":
		spec.Kind = map[string]Kind{"int64": KindInt64, "uint64": KindUInt64}[js.Kind.Type]
		w, err := strconv.ParseUint(string(js.Kind.Granularity), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		spec.Width = w
	default:
		t.Fatalf("index kind %q", js.Kind.Type)
	}
	return spec
}

// referenceDirs returns the committed reference tables and, when
// TSFLIGHT_REFERENCE_TABLES is set, the freshly generated ones.
func referenceDirs(t *testing.T) []string {
	var roots = []string{filepath.Join("..", "testdata", "reference", "tables")}
	if env := os.Getenv("TSFLIGHT_REFERENCE_TABLES"); env != "" {
		roots = append(roots, env)
	}
	var dirs []string
	for _, root := range roots {
		m, err := filepath.Glob(filepath.Join(root, "*", "_timeseries_log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range m {
			dirs = append(dirs, filepath.Dir(d))
		}
	}
	if len(dirs) < 7 {
		t.Fatalf("found %d reference tables, want at least 7", len(dirs))
	}
	return dirs
}

var (
	segName = regexp.MustCompile(`^_coverage/segments/((segcov-[0-9a-f]{32})-([0-9a-f-]{36}))\.roar$`)
	tblName = regexp.MustCompile(`^_coverage/table/(\d+)-((tblcov-[0-9a-f]{32})-([0-9a-f-]{36}))\.roar$`)
)

// checkSidecar decodes one sidecar, re-encodes it to the same bytes, checks
// its name against the content id and keys computed here, and returns the
// decoded set.
func checkSidecar(t *testing.T, spec IndexSpec, root, rel string, version uint64, want []byte) *Set {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	if want != nil && !bytes.Equal(data, want) {
		t.Errorf("%s: built coverage differs from the package's file\n got %x\nfile %x", rel, want, data)
	}
	s, err := Decode(data, spec.Entity())
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	again, err := s.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Errorf("%s: decode+encode changed the bytes\nfile %x\n got %x", rel, data, again)
	}
	if m := segName.FindStringSubmatch(rel); m != nil {
		id, err := SegmentContentID(spec, data)
		if err != nil || id != m[2] {
			t.Errorf("%s: SegmentContentID = %s, %v; want %s", rel, id, err, m[2])
		}
		if key, err := SegmentKey(FileID(id, m[3])); err != nil || key != rel {
			t.Errorf("SegmentKey = %q, %v; want %q", key, err, rel)
		}
	} else if m := tblName.FindStringSubmatch(rel); m != nil {
		if m[1] != strconv.FormatUint(version, 10) {
			t.Errorf("%s: version %s, commit %d", rel, m[1], version)
		}
		id, err := TableContentID(spec, data)
		if err != nil || id != m[3] {
			t.Errorf("%s: TableContentID = %s, %v; want %s", rel, id, err, m[3])
		}
		if key, err := TableKey(version, FileID(id, m[4])); err != nil || key != rel {
			t.Errorf("TableKey = %q, %v; want %q", key, err, rel)
		}
	} else {
		t.Errorf("unexpected sidecar name %q", rel)
	}
	return s
}

// ---------------------------------------------------------------------------
// The inputs testdata/reference/make_tables.py appends.

const (
	baseS  = int64(1_717_200_000) // 2024-06-01T00:00:00Z
	baseMS = baseS * 1000
	hourMS = int64(3_600_000)
	dayMS  = 24 * hourMS
)

// row is one appended row: its identity and index value. Timestamps are
// raw int64 at unit units per second; integer keys use i or u.
type row struct {
	ident Identity
	raw   int64
	unit  int64
	u     uint64
}

func tsRows(unit int64, ident Identity, raws ...int64) []row {
	out := make([]row, len(raws))
	for i, r := range raws {
		out[i] = row{ident: ident, raw: r, unit: unit}
	}
	return out
}

var referenceInputs = map[string][][]row{
	"ts_entity": {
		func() (rs []row) {
			for i := range int64(240) {
				rs = append(rs, tsRows(Milliseconds, Identity{Utf8("NVDA")}, baseMS+i*hourMS)...)
			}
			return rs
		}(),
		func() (rs []row) {
			for i := range int64(24) {
				rs = append(rs, tsRows(Milliseconds, Identity{Utf8("AAPL")}, baseMS+i*hourMS)...)
				rs = append(rs, tsRows(Milliseconds, Identity{Utf8("MSFT")}, baseMS+i*hourMS)...)
			}
			return rs
		}(),
	},
	"ts_plain": {tsRows(Nanoseconds, nil,
		baseS*1e9+123_456_789, (baseS+10)*1e9, (baseS+20)*1e9+100_000_000)},
	"int64": {
		{{raw: -100}, {raw: -5}, {raw: 0}, {raw: 15}},
		{{raw: 1000}, {raw: 1 << 62}},
	},
	"uint64": {{{u: 0}, {u: math.MaxUint64}}},
	"add_columns": {
		append(tsRows(Milliseconds, Identity{Utf8("a")}, baseMS, baseMS+dayMS),
			tsRows(Milliseconds, Identity{Utf8("b")}, baseMS)...),
		append(tsRows(Milliseconds, Identity{Utf8("a")}, baseMS+2*dayMS),
			tsRows(Milliseconds, Identity{Utf8("b")}, baseMS+2*dayMS)...),
		append(tsRows(Milliseconds, Identity{Utf8("a")}, baseMS+3*dayMS),
			tsRows(Milliseconds, Identity{Utf8("b")}, baseMS+3*dayMS)...),
	},
	"schema_metadata": {
		append(tsRows(Milliseconds, Identity{Utf8("x")}, baseMS, baseMS+hourMS),
			tsRows(Milliseconds, Identity{Utf8("y")}, baseMS)...),
	},
	"all_types": {
		append(tsRows(Microseconds, Identity{Utf8("alpha"), Int32(-7), UInt64(math.MaxUint64)},
			baseMS*1000+250, (baseMS+dayMS)*1000+500),
			tsRows(Microseconds, Identity{Utf8("beta"), Int32(math.MaxInt32), UInt64(0)}, baseMS*1000)...),
	},
}

// idOf maps a row's index value through the domain.
func idOf(t *testing.T, d Domain, r row) uint64 {
	t.Helper()
	var id uint64
	var err error
	switch d.Kind() {
	case KindTimestamp:
		id, err = d.TimestampID(r.raw, r.unit)
	case KindInt64:
		id, err = d.Int64ID(r.raw)
	default:
		id, err = d.UInt64ID(r.u)
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// builtAppend is the coverage of one append built from its rows: the
// segment's own set and the table's after the union, with their bytes.
type builtAppend struct {
	seg, table         *Set
	segBytes, tblBytes []byte
}

// buildAppends builds each append's segment coverage from its rows and
// unions them into the table coverage, checking that no append overlaps
// the ones before it.
func buildAppends(t *testing.T, rt refTable, appends [][]row) []builtAppend {
	t.Helper()
	d, err := rt.spec.Domain()
	if err != nil {
		t.Fatal(err)
	}
	newSet := NewGlobal
	if rt.spec.Entity() {
		newSet = NewEntity
	}
	table := newSet()
	out := make([]builtAppend, len(appends))
	for i, rows := range appends {
		seg := newSet()
		for _, r := range rows {
			dup, err := seg.Add(r.ident, idOf(t, d, r))
			if err != nil || dup {
				t.Fatalf("Add(%v): dup=%v err=%v", r.ident, dup, err)
			}
		}
		if ov, err := table.Overlap(seg); err != nil || ov.Count != 0 {
			t.Fatalf("append %d overlaps committed coverage: %+v %v", i, ov, err)
		}
		if err := table.Union(seg); err != nil {
			t.Fatal(err)
		}
		b := builtAppend{seg: seg, table: table.Clone()}
		if b.segBytes, err = seg.Encode(); err != nil {
			t.Fatal(err)
		}
		if b.tblBytes, err = table.Encode(); err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// checkAppends compares the built coverage of each append with the
// package's files.
func checkAppends(t *testing.T, rt refTable, appends [][]row) {
	t.Helper()
	if len(appends) != len(rt.sidecars) {
		t.Fatalf("%s: %d appends, log has %d", rt.dir, len(appends), len(rt.sidecars))
	}
	for i, b := range buildAppends(t, rt, appends) {
		sc := rt.sidecars[i]
		got := checkSidecar(t, rt.spec, rt.dir, sc.segment, sc.version, b.segBytes)
		if !got.Equal(b.seg) {
			t.Errorf("%s: decoded segment differs from the built one", sc.segment)
		}
		checkSidecar(t, rt.spec, rt.dir, sc.table, sc.version, b.tblBytes)
	}
}

func TestReferenceTables(t *testing.T) {
	for _, dir := range referenceDirs(t) {
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			rt := loadRefTable(t, dir)
			appends, ok := referenceInputs[name]
			if !ok {
				// Unknown table: still check every sidecar round-trips and
				// is named as computed here.
				for _, sc := range rt.sidecars {
					checkSidecar(t, rt.spec, dir, sc.segment, sc.version, nil)
					checkSidecar(t, rt.spec, dir, sc.table, sc.version, nil)
				}
				return
			}
			checkAppends(t, rt, appends)
		})
	}
}

// The segment sidecar of the example table, as ttf-format.md §1.10 dumps it.
func TestNVDAHexdump(t *testing.T) {
	d, _ := NewDomain(KindTimestamp, 3600)
	s := NewEntity()
	first, _ := d.TimestampID(baseMS, Milliseconds)
	if first != 0x8000_0000_0007_4748 {
		t.Fatalf("first id %#x", first)
	}
	if err := s.AddRange(Identity{Utf8("NVDA")}, Range{First: first, Last: first + 239}); err != nil {
		t.Fatal(err)
	}
	want := []byte("TSTECOV2")
	want = append(want, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 4, 'N', 'V', 'D', 'A', 0, 0, 0, 0, 0, 0, 0, 27)
	want = append(want, 0x01, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x00, 0x80, 0x3b, 0x30, 0, 0, 0x01,
		0x07, 0x00, 0xef, 0x00, 0x01, 0x00, 0x48, 0x47, 0xef, 0x00)
	got, err := s.Encode()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Encode = %x, %v\nwant %x", got, err, want)
	}
}

// coveragePathOf is the coverage_path of a commit action (AddSegment or
// UpdateTableCoverage).
func coveragePathOf(t *testing.T, action json.RawMessage) string {
	t.Helper()
	var a struct {
		CoveragePath string `json:"coverage_path"`
	}
	if err := json.Unmarshal(action, &a); err != nil {
		t.Fatal(err)
	}
	return a.CoveragePath
}
