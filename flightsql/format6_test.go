//go:build duckdb_arrow

package flightsql

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/internal/testkit"
)

// A format-6 table (timeseries-table-format 0.4.0, testdata/format6) is
// served read-only over Flight SQL too: an aggregate over it equals the
// rows the fixture script appended.
func TestQueryFormat6Table(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	n, sum := map[string]int{}, map[string]float64{}
	for _, r := range testkit.CopyFormat6Table(t, filepath.Join("..", "testdata"), filepath.Join(s.root, "prices")) {
		n[r.Symbol]++
		sum[r.Symbol] += r.Close
	}
	var exp []string
	for sym := range n {
		exp = append(exp, fmt.Sprintf("%s|%d|%v", sym, n[sym], sum[sym]))
	}
	sort.Strings(exp)
	got := s.mustQuery(ctx, "SELECT symbol, count(*), sum(close) FROM prices GROUP BY symbol ORDER BY symbol").rowsOf()
	if strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Fatalf("aggregate over the format-6 table:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
	}
}
