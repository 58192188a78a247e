//go:build duckdb_arrow

package flightsql

// The history the as-of tests read (asof_test.go): table cpu built by
// appends, an add_columns, a compaction and more appends, with what every
// version holds (rows, columns, segments' index ranges) kept from what
// the test appended, and the plan log lines of references at a version.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/tableformat"
)

// asOfRow is one appended row.
type asOfRow struct {
	ts    int64 // µs since the epoch
	host  string
	usage float64
	temp  *float64
}

// segSpan is a segment's index range, [min, max] in µs.
type segSpan struct{ min, max int64 }

// versionModel is what one version of the table holds.
type versionModel struct {
	rows int      // the first rows of asOfHistory.rows
	cols []string // column names in order
	segs []segSpan
}

// asOfHistory is table cpu's history as the test made it.
type asOfHistory struct {
	rows []asOfRow
	at   map[uint64]versionModel
	// the versions after each step
	first, second, third, added, fourth, compacted, fifth uint64
	// hour i starts at hours[i] (µs)
	hours []int64
}

// cpuTempSchema is cpuSchema after add_columns of temp.
var cpuTempSchema = arrow.NewSchema(append(slices.Clone(cpuSchema.Fields()),
	arrow.Field{Name: "temp", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), nil)

// cpuTempBatch is cpuBatch with a temp column: half the usage on even
// seconds, NULL on odd ones.
func cpuTempBatch(mem memory.Allocator, start time.Time, n int, hosts ...string) arrow.RecordBatch {
	base := cpuBatch(mem, start, n, hosts...)
	defer base.Release()
	usage := base.Column(2).(*array.Float64)
	tb := array.NewFloat64Builder(mem)
	defer tb.Release()
	for i := 0; i < usage.Len(); i++ {
		if (i/len(hosts))%2 == 0 {
			tb.Append(usage.Value(i) / 2)
		} else {
			tb.AppendNull()
		}
	}
	temp := tb.NewArray()
	defer temp.Release()
	return array.NewRecordBatch(cpuTempSchema, append(slices.Clone(base.Columns()), temp), base.NumRows())
}

// rowsOfBatch lists the rows of a batch of cpuSchema or cpuTempSchema.
func rowsOfBatch(rec arrow.RecordBatch) []asOfRow {
	out := make([]asOfRow, rec.NumRows())
	ts := rec.Column(0).(*array.Timestamp)
	host := rec.Column(1).(*array.String)
	usage := rec.Column(2).(*array.Float64)
	for i := range out {
		out[i] = asOfRow{ts: int64(ts.Value(i)), host: host.Value(i), usage: usage.Value(i)}
		if rec.NumCols() > 3 && rec.Column(3).IsValid(i) {
			v := rec.Column(3).(*array.Float64).Value(i)
			out[i].temp = &v
		}
	}
	return out
}

// version is the server's newest version of table.
func (s *sqlServer) version(ctx context.Context, table string) uint64 {
	s.t.Helper()
	tb, err := s.svc.Table(ctx, table)
	if err != nil {
		s.t.Fatal(err)
	}
	return tb.State().Version
}

// buildHistory makes table cpu: hours 0, 1 and 2 of hosts a and b in one
// append each, add_columns temp, hour 3 with temp, a compaction of
// everything, hour 4 with temp.
func buildHistory(t *testing.T, s *sqlServer, ctx context.Context) *asOfHistory {
	t.Helper()
	h := &asOfHistory{at: map[uint64]versionModel{}}
	cols := []string{"ts", "host", "usage"}
	var segs []segSpan
	record := func() uint64 {
		v := s.version(ctx, "cpu")
		h.at[v] = versionModel{rows: len(h.rows), cols: slices.Clone(cols), segs: slices.Clone(segs)}
		return v
	}
	appendHour := func(hour int, withTemp bool) uint64 {
		start := t0.Add(time.Duration(hour) * time.Hour)
		h.hours = append(h.hours, start.UnixMicro())
		var rec arrow.RecordBatch
		if withTemp {
			rec = cpuTempBatch(s.cliMem, start, 3600, "a", "b")
		} else {
			rec = cpuBatch(s.cliMem, start, 3600, "a", "b")
		}
		defer rec.Release()
		mode := "append"
		if hour == 0 {
			mode = "create"
		}
		if _, err := s.ingest(ctx, "cpu", mode, cpuOpts, rec); err != nil {
			t.Fatalf("ingest hour %d: %v", hour, err)
		}
		rows := rowsOfBatch(rec)
		sp := segSpan{min: rows[0].ts, max: rows[0].ts}
		for _, r := range rows {
			sp.min, sp.max = min(sp.min, r.ts), max(sp.max, r.ts)
		}
		h.rows = append(h.rows, rows...)
		segs = append(segs, sp)
		return record()
	}
	h.first = appendHour(0, false)
	h.second = appendHour(1, false)
	h.third = appendHour(2, false)
	body, _ := json.Marshal(map[string]any{"table": "cpu", "columns": []any{map[string]any{"name": "temp", "type": "float64", "nullable": true}}})
	if _, err := s.svc.RunAction(ctx, flightserver.ActionAddColumns, body); err != nil {
		t.Fatalf("add-columns: %v", err)
	}
	cols = append(cols, "temp")
	h.added = record()
	h.fourth = appendHour(3, true)
	tb, err := s.svc.Table(ctx, "cpu")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := tb.Compact(ctx, &tableformat.CompactOptions{})
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	if rep.SourceSegments != len(segs) || rep.OutputSegments != 1 {
		t.Fatalf("compaction merged %d segments into %d, want all %d into 1", rep.SourceSegments, rep.OutputSegments, len(segs))
	}
	merged := segs[0]
	for _, sp := range segs {
		merged.min, merged.max = min(merged.min, sp.min), max(merged.max, sp.max)
	}
	segs = []segSpan{merged}
	h.compacted = record()
	if h.compacted != rep.CommittedVersion {
		t.Fatalf("compaction committed version %d, the table is at %d", rep.CommittedVersion, h.compacted)
	}
	h.fifth = appendHour(4, true)
	return h
}

// versions lists the history's versions, oldest first.
func (h *asOfHistory) versions() []uint64 {
	out := make([]uint64, 0, len(h.at))
	for v := range h.at {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// aggregate is count(*), sum(usage), min(ts) and max(ts) in µs of the
// rows of version v with lo <= ts < hi and host (when not "").
func (h *asOfHistory) aggregate(v uint64, lo, hi int64, host string) string {
	var n, mn, mx int64
	var sum float64
	for _, r := range h.rows[:h.at[v].rows] {
		if r.ts < lo || r.ts >= hi || host != "" && r.host != host {
			continue
		}
		if n == 0 || r.ts < mn {
			mn = r.ts
		}
		if n == 0 || r.ts > mx {
			mx = r.ts
		}
		n++
		sum += r.usage
	}
	return fmt.Sprintf("%d|%s|%d|%d", n, strconv.FormatFloat(sum, 'g', -1, 64), mn, mx)
}

// plannedAt is how many of version v's segments overlap [lo, hi).
func (h *asOfHistory) plannedAt(v uint64, lo, hi int64) int {
	n := 0
	for _, sp := range h.at[v].segs {
		if sp.max >= lo && sp.min < hi {
			n++
		}
	}
	return n
}

const aggSQL = "SELECT count(*), coalesce(sum(usage), 0)::DOUBLE, coalesce(epoch_us(min(ts)), 0), coalesce(epoch_us(max(ts)), 0) FROM "

// allLo and allHi bound the whole index range.
const (
	allLo = int64(-1 << 62)
	allHi = int64(1 << 62)
)

// refPlan is a "sql plan" log line of a reference at a version.
type refPlan struct {
	version           uint64
	planned, segments int
}

func (s *sqlServer) refPlans(ref string) []refPlan {
	var out []refPlan
	for _, line := range strings.Split(s.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["@message"] != "sql plan" || m["ref"] != ref {
			continue
		}
		out = append(out, refPlan{version: uint64(m["version"].(float64)), planned: int(m["planned"].(float64)), segments: int(m["segments"].(float64))})
	}
	return out
}

func (s *sqlServer) lastRefPlan(ref string) refPlan {
	s.t.Helper()
	p := s.refPlans(ref)
	if len(p) == 0 {
		s.t.Fatalf("no plan logged for %s; log:\n%s", ref, s.logs.String())
	}
	return p[len(p)-1]
}

func tsLit(us int64) string {
	return fmtTime(time.UnixMicro(us).UTC())
}
