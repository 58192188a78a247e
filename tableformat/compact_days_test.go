package tableformat

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
	"path/filepath"
)

// TestCompactSortsByDay: rows of several UTC days compact into a segment
// sorted by (day, host, ts), in memory and through spilled runs, so that
// the row groups of a compacted segment follow time (a row group holds one
// day here) while each day keeps the rows of a host together; the rows and
// the coverage are unchanged.
func TestCompactSortsByDay(t *testing.T) {
	for _, limit := range []int64{0, 1} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			e := newAppendEnv(t, tsIndex())
			ctx := e.ctx
			// 3 days × 4 hosts × 6 steps, appended an hour at a time in
			// day-interleaved order: each append holds one step of every
			// host on each day.
			const days, hosts, steps = 3, 4, 6
			for s := range steps {
				var rows []row
				for d := range days {
					for h := range hosts {
						sec := int64(d)*86400 + int64(s)*3600
						rows = append(rows, row{sec: sec, host: fmt.Sprintf("h%d", hosts-1-h), v: sec})
					}
				}
				if _, err := appendRows(ctx, e.tb, e.mem, rows); err != nil {
					t.Fatal(err)
				}
			}
			before := e.tb.State()
			rowsBefore := tableRows(t, ctx, e.tb, before, e.mem)
			start, end := tsAt(-3600), tsAt(days*86400)
			covBefore := coverageAnswers(t, ctx, e.tb, before, start, end)
			opts := compactOpts(e.mem)
			opts.MaxRowsPerRowGroup = hosts * steps // a day's rows
			var rep *CompactReport
			var err error
			if limit == 0 {
				rep, err = e.tb.Compact(ctx, opts)
			} else {
				rep, err = compactWithLimit(ctx, e.tb, opts, limit)
			}
			if err != nil || rep.OutputSegments != 1 || rep.RowsWritten != days*hosts*steps || (limit > 0) != (rep.SpilledRuns >= 2) {
				t.Fatalf("compaction: %+v %v", rep, err)
			}
			after := e.tb.State()
			if got := tableRows(t, ctx, e.tb, after, e.mem); !slices.Equal(got, rowsBefore) {
				t.Fatalf("rows differ after compaction: %d vs %d", len(got), len(rowsBefore))
			}
			if got := coverageAnswers(t, ctx, e.tb, after, start, end); got != covBefore {
				t.Fatalf("coverage answers differ:\n%s\nwant\n%s", got, covBefore)
			}
			checkTable(t, ctx, e.tb)

			seg := after.Segments[0].Path
			keys, groups := segmentFileRows(t, e.dir, seg)
			day := func(k [2]string) int64 {
				ns, _ := strconv.ParseInt(k[1], 10, 64)
				return time.Unix(0, ns).Sub(t0).Milliseconds() / 86400000
			}
			if len(keys) != days*hosts*steps || !slices.IsSortedFunc(keys, func(a, b [2]string) int {
				if da, db := day(a), day(b); da != db {
					return int(da - db)
				}
				if c := strings.Compare(a[0], b[0]); c != 0 {
					return c
				}
				return strings.Compare(a[1], b[1])
			}) {
				t.Fatalf("output rows are not sorted by (day, host, ts): %v", keys)
			}
			if slices.IsSortedFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) }) {
				t.Fatal("the output is sorted by host alone: the days are not first")
			}
			// One row group a day, and each row group's ts statistics
			// span that day only.
			if len(groups) != days {
				t.Fatalf("row groups %v, want %d", groups, days)
			}
			pf, err := file.OpenParquetFile(filepath.Join(e.dir, filepath.FromSlash(seg)), false)
			if err != nil {
				t.Fatal(err)
			}
			defer pf.Close()
			for g := range pf.NumRowGroups() {
				cc, err := pf.MetaData().RowGroup(g).ColumnChunk(0)
				if err != nil {
					t.Fatal(err)
				}
				st, err := cc.Statistics()
				if err != nil || st == nil || !st.HasMinMax() {
					t.Fatalf("row group %d: no ts statistics (%v)", g, err)
				}
				lo, hi := st.EncodeMin(), st.EncodeMax()
				if len(lo) != 8 || len(hi) != 8 {
					t.Fatalf("row group %d: ts statistics of %d/%d bytes", g, len(lo), len(hi))
				}
				minDay := time.Unix(0, int64(leUint64(lo))).Sub(t0) / (24 * time.Hour) // ts is in nanoseconds (inSchema)
				maxDay := time.Unix(0, int64(leUint64(hi))).Sub(t0) / (24 * time.Hour)
				if minDay != maxDay || int(minDay) != g {
					t.Errorf("row group %d spans days %d..%d", g, minDay, maxDay)
				}
			}
		})
	}
}

func leUint64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
