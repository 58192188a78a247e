package testkit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Format6Row is a row the fixture script of testdata/format6 appended to
// table ts_entity (written by timeseries-table-format 0.4.0): ts in the
// table's unit, symbol and close.
type Format6Row struct {
	TS     int64   `json:"ts"`
	Symbol string  `json:"symbol"`
	Close  float64 `json:"close"`
}

// CopyFormat6Table copies the format-6 fixture table ts_entity from the
// module's testdata directory (testdata, relative to the test's package)
// to dst, and returns the rows its script appended, in the script's
// order.
func CopyFormat6Table(t testing.TB, testdata, dst string) []Format6Row {
	t.Helper()
	src := filepath.Join(testdata, "format6", "tables")
	CopyDir(t, filepath.Join(src, "ts_entity"), dst)
	raw, err := os.ReadFile(filepath.Join(src, "ts_entity.expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Rows []Format6Row `json:"rows"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Rows) == 0 {
		t.Fatalf("%s lists no rows", filepath.Join(src, "ts_entity.expected.json"))
	}
	return want.Rows
}
