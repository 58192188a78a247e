//go:build duckdb_arrow

package flightsql

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// A format-6 table (timeseries-table-format 0.4.0, testdata/format6) is
// served read-only over Flight SQL too: an aggregate over it equals the
// rows the fixture script appended.
func TestQueryFormat6Table(t *testing.T) {
	s := startSQL(t)
	ctx := ctxT(t)
	src := filepath.Join("..", "testdata", "format6", "tables")
	if out, err := exec.Command("cp", "-a", filepath.Join(src, "ts_entity"), filepath.Join(s.root, "prices")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(src, "ts_entity.expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Rows []struct {
			Symbol string  `json:"symbol"`
			Close  float64 `json:"close"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	n, sum := map[string]int{}, map[string]float64{}
	for _, r := range want.Rows {
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
