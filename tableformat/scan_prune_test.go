package tableformat

import (
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// Pruning: which segments a scan plans and which row groups and pages it
// reads (scan_prune.go, scan_read.go).

// ---- planning ----

func TestScanPlanPrunesByRange(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	// Added out of order: planning sorts by (index_min, index_max, path).
	for _, base := range []int64{20, 0, 30, 10} {
		f.addSegment(scNA, 0, scanRecord(t, f.canon, scSeq(base, 10), scSeq(base, 10)))
	}
	f.addSegment(scNA, 0, scanRecord(t, f.canon, scI64s(10, 12), scI64s(0, 0))) // seg-005: [10, 12]
	st := f.tb.State()
	for _, c := range []struct {
		name       string
		start, end *IndexValue
		want       []string
	}{
		{"all", nil, nil, []string{"seg-002", "seg-005", "seg-004", "seg-001", "seg-003"}},
		{"narrow", scIv(15), scIv(25), []string{"seg-004", "seg-001"}},
		{"end excludes index_min", nil, scIv(20), []string{"seg-002", "seg-005", "seg-004"}},
		{"start includes index_max", scIv(19), nil, []string{"seg-004", "seg-001", "seg-003"}},
		{"start after everything", scIv(40), nil, nil},
		{"one value", scIv(12), scIv(13), []string{"seg-005", "seg-004"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := scPlanned(t, st, ScanOptions{Start: c.start, End: c.end}); !slices.Equal(got, c.want) {
				t.Fatalf("planned %v, want %v", got, c.want)
			}
		})
	}
}

func TestScanPlanPrunesByEntity(t *testing.T) {
	ix := IndexSpec{Column: "k", EntityColumns: []string{"host", "dc"}, Kind: IndexKind{Type: IndexInt64, Width: 10}}
	sch := &Schema{Columns: []Field{
		{Name: "k", Type: DataType{Kind: TypeInt64}},
		{Name: "host", Type: DataType{Kind: TypeUtf8}},
		{Name: "dc", Type: DataType{Kind: TypeInt32}},
	}}
	f := newScanFixture(t, ix, sch)
	dc := func(v int64) EntityValue { return EntityValue{Type: EntityInt32, Int: v} }
	f.addSegment(scSingle(scStr("a"), dc(1)), 0, scanRecord(t, f.canon, scI64s(1), []string{"a"}, []int32{1}))
	f.addSegment(scSingle(scStr("b"), dc(1)), 0, scanRecord(t, f.canon, scI64s(2), []string{"b"}, []int32{1}))
	f.addSegment(scSingle(scStr("a"), dc(2)), 0, scanRecord(t, f.canon, scI64s(3), []string{"a"}, []int32{2}))
	f.addSegment(scMixed, 0, scanRecord(t, f.canon, scI64s(4, 5), []string{"c", "d"}, []int32{1, 2}))
	st := f.tb.State()
	for _, c := range []struct {
		ents map[string]EntityValue
		want []string
	}{
		{nil, []string{"seg-001", "seg-002", "seg-003", "seg-004"}},
		{map[string]EntityValue{"host": scStr("a")}, []string{"seg-001", "seg-003", "seg-004"}},
		{map[string]EntityValue{"dc": dc(1)}, []string{"seg-001", "seg-002", "seg-004"}},
		{map[string]EntityValue{"host": scStr("a"), "dc": dc(2)}, []string{"seg-003", "seg-004"}},
		{map[string]EntityValue{"host": scStr("zzz")}, []string{"seg-004"}}, // Mixed is never pruned
	} {
		if got := scPlanned(t, st, ScanOptions{Entities: c.ents}); !slices.Equal(got, c.want) {
			t.Errorf("entities %v: planned %v, want %v", c.ents, got, c.want)
		}
	}
	// And the scan returns exactly the matching rows.
	res := scRunScan(t, f.tb, ScanOptions{Entities: map[string]EntityValue{"host": scStr("a")}})
	scSameRows(t, res.rows, []string{"1|a|1", "3|a|2"})
	if got := res.stats.segments.Load(); got != 3 {
		t.Errorf("opened %d segments, want 3", got)
	}
}

// ---- row groups ----

func TestScanPrunesRowGroups(t *testing.T) {
	f := newScanFixture(t, scIntIndex(), scKVSchema())
	ks := scSeq(0, 10000)
	f.addSegment(scNA, 1000, scanRecord(t, f.canon, ks, ks)) // 10 row groups of 1000
	res := scRunScan(t, f.tb, ScanOptions{Start: scIv(2500), End: scIv(3500)})
	var want []string
	for k := int64(2500); k < 3500; k++ {
		want = append(want, fmt.Sprintf("%d|%d", k, k))
	}
	slices.Sort(want)
	scSameRows(t, res.rows, want)
	if g, r := res.stats.rowGroups.Load(), res.stats.rowGroupsRead.Load(); g != 10 || r != 2 {
		t.Errorf("read %d of %d row groups, want 2 of 10", r, g)
	}
	// Within them, the rows in range are found from the index column
	// alone, and the other columns are decoded from the first one on.
	if l, d := res.stats.rowsLocated.Load(), res.stats.rowsDecoded.Load(); l != 2000 || d > 1500 {
		t.Errorf("located over %d rows and decoded %d; want 2000 and at most 1500", l, d)
	}
	// A range between two row groups' values reads none.
	f2 := newScanFixture(t, scIntIndex(), scKVSchema())
	even := make([]int64, 100)
	for i := range even {
		even[i] = int64(i) * 10
	}
	f2.addSegment(scNA, 10, scanRecord(t, f2.canon, even, even))
	res = scRunScan(t, f2.tb, ScanOptions{Start: scIv(91), End: scIv(99)})
	if len(res.rows) != 0 || res.stats.rowGroupsRead.Load() != 0 {
		t.Errorf("rows %v, row groups read %d; want none", res.rows, res.stats.rowGroupsRead.Load())
	}
}

func TestScanPrunesRowGroupsByEntity(t *testing.T) {
	f := newScanFixture(t, scHostIndex(), scHostSchema(Nanos))
	var ts []int64
	var hosts []string
	for _, h := range []string{"a", "b", "c", "d"} {
		ts = append(ts, scSeq(1e18, 500)...)
		hosts = append(hosts, scRepeat(h, 500)...)
	}
	f.addSegment(scMixed, 500, scanRecord(t, f.canon, ts, hosts, scSeq(0, 2000)))
	res := scRunScan(t, f.tb, ScanOptions{Entities: map[string]EntityValue{"host": scStr("c")}, Columns: []string{"v"}})
	if len(res.rows) != 500 || res.rows[0] != "1000" {
		t.Fatalf("got %d rows starting %q", len(res.rows), res.rows[:min(1, len(res.rows))])
	}
	if g, r := res.stats.rowGroups.Load(), res.stats.rowGroupsRead.Load(); g != 4 || r != 1 {
		t.Errorf("read %d of %d row groups, want 1 of 4", r, g)
	}
}

// TestScanSeeksToRange: when the statistics cannot exclude row groups that
// hold no row in range, the rows in range are located from the index column
// and the other columns decoded only from there (a seek across row groups).
func TestScanSeeksToRange(t *testing.T) {
	sch := &Schema{Columns: []Field{
		{Name: "k", Type: DataType{Kind: TypeInt64}},
		{Name: "v", Type: DataType{Kind: TypeInt64}, Nullable: true},
		{Name: "s", Type: DataType{Kind: TypeUtf8}, Nullable: true},
		{Name: "b", Type: DataType{Kind: TypeBool}, Nullable: true},
		{Name: "f", Type: DataType{Kind: TypeFloat64}, Nullable: true},
	}}
	f := newScanFixture(t, scIntIndex(), sch)
	const n = 10_000
	k, v, str, b, fl := make([]int64, n), make([]*int64, n), make([]*string, n), make([]bool, n), make([]*float64, n)
	for i := range n {
		k[i] = int64(i%2) * 10_000 // 0 or 10000: every row group spans the range
		if i >= 3000 && i < 4000 {
			k[i] = 5000 + int64(i-3000)
		}
		if i%7 != 0 {
			v[i] = scPtr(int64(i))
			str[i] = scPtr(fmt.Sprintf("s%d", i%13))
			fl[i] = scPtr(float64(i) / 8)
		}
		b[i] = i%3 == 0
	}
	rec := scanRecord(t, f.canon, k, v, str, b, fl)
	f.addSegment(scNA, 1000, rec)
	cols := []string{"k", "v", "s", "b", "f"}
	for _, c := range []struct {
		lo, hi int64
		cols   []string
	}{
		{5200, 5300, cols},
		{5000, 5001, cols},
		{5999, 6000, []string{"s", "v"}},
		{4000, 7000, []string{"f"}},
		{10_000, 10_001, cols},
	} {
		for _, batch := range []int{0, 64} {
			res := scRunScan(t, f.tb, ScanOptions{Start: scIv(c.lo), End: scIv(c.hi), Columns: c.cols, BatchRows: batch, Parallelism: 1})
			want := scExpectRows([]arrow.RecordBatch{rec}, c.cols, func(r arrow.RecordBatch, i int) bool { return k[i] >= c.lo && k[i] < c.hi })
			scSameRows(t, res.rows, want)
			if c.hi <= 6000 && res.stats.rowsDecoded.Load() >= n/2 {
				t.Errorf("[%d, %d): decoded %d rows", c.lo, c.hi, res.stats.rowsDecoded.Load())
			}
		}
	}
}
