package tableformat

import (
	"cmp"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"
)

// TestCompactSortBucket: rows of several hours on two UTC days compact
// into a segment sorted by (time bucket, host, ts), in memory and through
// spilled runs, for the default bucket (an hour) and a day: the row
// groups of the compacted segment follow the buckets (one row group a
// bucket here, its ts statistics inside it) while each bucket keeps the
// rows of a host together; the rows (as a multiset) and the coverage are
// unchanged, and the 0.9.0 package reads the compacted table.
func TestCompactSortBucket(t *testing.T) {
	// 2 days × 3 hours × 3 steps an hour (20 minutes apart) × 4 hosts,
	// appended one step at a time with every day's and host's row of it:
	// each append spans both days, hosts in descending order.
	const days, hours, steps, hosts = 2, 3, 3, 4
	const total = days * hours * steps * hosts
	for _, bucket := range []time.Duration{0, 24 * time.Hour} {
		for _, limit := range []int64{0, 1} {
			t.Run(fmt.Sprintf("bucket %v limit %d", bucket, limit), func(t *testing.T) {
				e := newAppendEnv(t, tsIndex())
				ctx := e.ctx
				for h := range hours {
					for s := range steps {
						var rows []row
						for d := range days {
							for k := range hosts {
								sec := int64(d)*86400 + int64(h)*3600 + int64(s)*1200
								rows = append(rows, row{sec: sec, host: fmt.Sprintf("h%d", hosts-1-k), v: sec})
							}
						}
						if _, err := appendRows(ctx, e.tb, e.mem, rows); err != nil {
							t.Fatal(err)
						}
					}
				}
				before := e.tb.State()
				rowsBefore := tableRows(t, ctx, e.tb, before, e.mem)
				start, end := tsAt(-3600), tsAt(days*86400)
				covBefore := coverageAnswers(t, ctx, e.tb, before, start, end)
				opts := compactOpts(e.mem)
				opts.SortBucket = bucket
				width := bucket
				if width == 0 {
					width = time.Hour // the default
				}
				buckets := days * hours // one bucket an hour
				if width == 24*time.Hour {
					buckets = days
				}
				opts.MaxRowsPerRowGroup = total / int64(buckets) // a bucket's rows
				var rep *CompactReport
				var err error
				if limit == 0 {
					rep, err = e.tb.Compact(ctx, opts)
				} else {
					rep, err = compactWithLimit(ctx, e.tb, opts, limit)
				}
				if err != nil || rep.OutputSegments != 1 || rep.RowsWritten != total || (limit > 0) != (rep.SpilledRuns >= 2) {
					t.Fatalf("compaction: %+v %v", rep, err)
				}
				after := e.tb.State()
				if got := tableRows(t, ctx, e.tb, after, e.mem); !slices.Equal(got, rowsBefore) {
					t.Fatalf("rows differ after compaction: %d vs %d\n%v\nwant\n%v", len(got), len(rowsBefore), got, rowsBefore)
				}
				if got := coverageAnswers(t, ctx, e.tb, after, start, end); got != covBefore {
					t.Fatalf("coverage answers differ:\n%s\nwant\n%s", got, covBefore)
				}
				checkTable(t, ctx, e.tb)

				seg := after.Segments[0].Path
				keys, groups := segmentFileRows(t, e.dir, seg)
				bucketOf := func(ns int64) int64 { return ns / width.Nanoseconds() } // t0 is after 1970
				if len(keys) != total || !slices.IsSortedFunc(keys, byBucketHostTS(width)) {
					t.Fatalf("output rows are not sorted by (%v bucket, host, ts): %v", width, keys)
				}
				if slices.IsSortedFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) }) {
					t.Fatal("the output is sorted by host alone: the buckets are not first")
				}
				if slices.IsSortedFunc(keys, func(a, b [2]string) int { return strings.Compare(a[1], b[1]) }) {
					t.Fatal("the output is sorted by time alone: the hosts are not grouped")
				}
				// One row group a bucket, in order, and each row group's ts
				// statistics inside its bucket.
				if len(groups) != buckets {
					t.Fatalf("row groups %v, want %d", groups, buckets)
				}
				pf, err := file.OpenParquetFile(filepath.Join(e.dir, filepath.FromSlash(seg)), false)
				if err != nil {
					t.Fatal(err)
				}
				defer pf.Close()
				prev := int64(-1)
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
					first, last := bucketOf(int64(leUint64(lo))), bucketOf(int64(leUint64(hi))) // ts is in nanoseconds (inSchema)
					if first != last || first <= prev {
						t.Errorf("row group %d spans buckets %d..%d (previous %d)", g, first, last, prev)
					}
					prev = last
				}

				// The 0.9.0 package reads the compacted table.
				requireReference(t)
				var q struct {
					Rows [][]any `json:"rows"`
				}
				interop(t, &q, "query", e.dir, "SELECT count(*) AS n, count(DISTINCT host) AS h, sum(v) AS s FROM t")
				var sum int64
				for d := range days {
					for h := range hours {
						for s := range steps {
							sum += hosts * (int64(d)*86400 + int64(h)*3600 + int64(s)*1200)
						}
					}
				}
				if want := fmt.Sprintf("[[%d %d %d]]", total, hosts, sum); fmt.Sprint(q.Rows) != want {
					t.Fatalf("the package reads %v, want %s", q.Rows, want)
				}
			})
		}
	}
}

// byBucketHostTS compares segmentFileRows keys (host, ts in nanoseconds
// after 1970) by (ts bucket of width, host, ts): compaction's order.
func byBucketHostTS(width time.Duration) func(a, b [2]string) int {
	bucket := func(k [2]string) int64 {
		ns, err := strconv.ParseInt(k[1], 10, 64)
		if err != nil {
			panic(err)
		}
		return ns / width.Nanoseconds()
	}
	return func(a, b [2]string) int {
		if c := cmp.Compare(bucket(a), bucket(b)); c != 0 {
			return c
		}
		if c := strings.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return strings.Compare(a[1], b[1])
	}
}

func leUint64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
