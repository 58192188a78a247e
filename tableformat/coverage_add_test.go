package tableformat

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/coverage"
)

// The coverage of an append with one string entity column (addByName)
// holds the pairs, the duplicate count and the first duplicate's
// description that adding row by row to a coverage.Set gives, over
// several batches, with duplicates of rows of an earlier batch and of the
// same batch (whose ids wait to be added in bulk), with a value that is
// not UTF-8 (skipped by both), and with its name table broken (probes of
// one slot).
func TestCoverageAddByNameMatchesSetAdd(t *testing.T) {
	for _, probe := range []int{maxProbe, 1} {
		t.Run(fmt.Sprintf("maxProbe=%d", probe), func(t *testing.T) {
			defer func(v int) { maxProbe = v }(maxProbe)
			maxProbe = probe
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			spec := tsbsIndex()
			schema := arrow.NewSchema([]arrow.Field{{Name: "hostname", Type: arrow.BinaryTypes.String}}, nil)
			er := entityReader{cols: []int{0}, types: []EntityType{EntityUtf8}, names: []string{"hostname"}}
			got := newSegmentCoverage(&spec, true)
			want := coverage.NewEntity()
			var wantDups uint64
			var wantExample, gotExample string
			var gotDups uint64
			for batch := range 3 {
				b := array.NewStringBuilder(mem)
				var ids []uint64
				for row := range 2000 {
					name := fmt.Sprintf("host_%d", (row*7+batch)%301)
					id := uint64(batch*10 + row/301)
					if batch == 2 && row%500 == 0 {
						id = uint64(row / 301) // rows batch 0 already holds
					}
					if batch == 1 && (row == 1000 || row == 1700) {
						// The pair of an earlier row of this batch, its id
						// not added to the bitmap yet (pending).
						name, id = fmt.Sprintf("host_%d", ((row-1)*7+batch)%301), ids[row-1]
					}
					b.Append(name)
					ids = append(ids, id)
					already, err := want.Add(coverage.Identity{coverage.Utf8(name)}, id)
					if err == nil && already {
						if wantDups == 0 {
							wantExample = got.describe(coverage.Identity{coverage.Utf8(name)}, id)
						}
						wantDups++
					}
				}
				col := b.NewArray()
				b.Release()
				rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(col.Len()))
				col.Release()
				dups, example, err := got.add(er, rec, ids)
				if err != nil {
					t.Fatal(err)
				}
				rec.Release()
				if dups > 0 && gotDups == 0 {
					gotExample = example
				}
				gotDups += dups
			}
			if !got.set.Equal(want) {
				t.Fatalf("coverage differs from adding row by row: %d identities, want %d", got.set.Len(), want.Len())
			}
			if wantDups == 0 || gotDups != wantDups || gotExample != wantExample {
				t.Fatalf("duplicates %d (%q), want %d (%q)", gotDups, gotExample, wantDups, wantExample)
			}
		})
	}
}

// The interval ids of a timestamp index, computed once per run of equal
// values, are those of each row computed alone.
func TestCoverageTimestampIDsInRuns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	spec := tsbsIndex()
	c := newSegmentCoverage(&spec, true)
	ir := indexReader{typ: IndexTimestamp, unitsPerSecond: 1e9}
	b := array.NewTimestampBuilder(mem, &arrow.TimestampType{Unit: arrow.Nanosecond})
	var raw []int64
	for _, v := range []int64{5e9, 5e9, 5e9, 25e9, 25e9, 15e9, 5e9, -1, -1, 0, 0, 1e18} {
		raw = append(raw, v)
		b.Append(arrow.Timestamp(v))
	}
	arr := b.NewArray()
	b.Release()
	defer arr.Release()
	ids, err := c.ids(arr, ir, "time")
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range raw {
		want, err := c.domain.TimestampID(v, 1e9)
		if err != nil || ids[i] != want {
			t.Fatalf("row %d (%d): id %d, want %d (%v)", i, v, ids[i], want, err)
		}
	}
	if ids[0] == ids[3] || ids[3] == ids[5] || ids[7] == ids[9] {
		t.Fatalf("distinct 10 s intervals share ids: %v", ids)
	}
}

// BenchmarkCoverageAddTSBS is an append's coverage of 100,000 TSBS rows
// (1,000 hosts × 100 instants, time-major, in batches of 64 Ki rows):
// interval ids and per-host bitmaps, as streamStats.observe computes them.
func BenchmarkCoverageAddTSBS(b *testing.B) {
	mem := memory.DefaultAllocator
	batches := tsbsBatches(mem, 1, benchHosts, 0, benchSteps, 1<<16)
	defer releaseBatches(batches)
	spec := tsbsIndex()
	schema, err := LogicalFromArrow(tsbsSchema())
	if err != nil {
		b.Fatal(err)
	}
	st := &State{Meta: &TableMeta{Index: &spec, Schema: schema}}
	ir, er := newIndexReader(st, schema), newEntityReader(st, schema)
	for b.Loop() {
		c := newSegmentCoverage(&spec, true)
		for _, rec := range batches {
			ids, err := c.ids(rec.Column(ir.col), ir, "time")
			if err != nil {
				b.Fatal(err)
			}
			if dups, _, err := c.add(er, rec, ids); err != nil || dups != 0 {
				b.Fatal(dups, err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchHosts*benchSteps), "ns/row")
}
