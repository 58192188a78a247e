package coverage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// Goldens written by coverage/testdata/golden/make_golden.py.

type goldenSpec struct {
	Tables []struct {
		Name  string
		Index struct {
			Column        string
			EntityColumns []string `json:"entity_columns"`
			Kind          string
			Unit          string
			Count         uint32
			Timezone      *string
			Width         uint64
		}
		EntityTypes []string            `json:"entity_types"`
		Appends     [][]goldenGroup     `json:"appends"`
		Sidecars    []goldenSidecarPair `json:"sidecars"`
	}
}

type goldenGroup struct {
	Entity []json.RawMessage
	Runs   [][]json.Number
}

type goldenSidecarPair struct {
	Segment, Table string
	Rows           int
	Same           bool `json:"table_same_as_segment"`
}

func bigOf(t *testing.T, n json.Number) *big.Int {
	t.Helper()
	v, ok := new(big.Int).SetString(string(n), 10)
	if !ok {
		t.Fatalf("number %q", n)
	}
	return v
}

func TestGoldens(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", "spec.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var gs goldenSpec
	if err := dec.Decode(&gs); err != nil {
		t.Fatal(err)
	}
	if len(gs.Tables) != 3 {
		t.Fatalf("%d golden tables", len(gs.Tables))
	}
	for _, tb := range gs.Tables {
		t.Run(tb.Name, func(t *testing.T) {
			ix := tb.Index
			spec := IndexSpec{Column: ix.Column, EntityColumns: ix.EntityColumns, Width: ix.Width, Count: ix.Count}
			switch ix.Kind {
			case "timestamp":
				spec.Kind = KindTimestamp
				spec.Unit = map[string]Unit{"Seconds": UnitSeconds, "Minutes": UnitMinutes, "Hours": UnitHours, "Days": UnitDays}[ix.Unit]
			case "int64":
				spec.Kind = KindInt64
			case "uint64":
				spec.Kind = KindUInt64
			}
			if ix.Timezone != nil {
				spec.Timezone, spec.HasTimezone = *ix.Timezone, true
			}
			dir := filepath.Join("testdata", "golden", tb.Name)
			rt := refTable{dir: dir, spec: spec}
			var appends [][]row
			for i, groups := range tb.Appends {
				var rows []row
				for _, g := range groups {
					var ident Identity
					for j, v := range g.Entity {
						switch tb.EntityTypes[j] {
						case "utf8":
							var s string
							if err := json.Unmarshal([]byte(v), &s); err != nil {
								t.Fatal(err)
							}
							ident = append(ident, Utf8(s))
						case "int32":
							n, err := strconv.ParseInt(string(v), 10, 32)
							if err != nil {
								t.Fatal(err)
							}
							ident = append(ident, Int32(int32(n)))
						case "int64":
							n, err := strconv.ParseInt(string(v), 10, 64)
							if err != nil {
								t.Fatal(err)
							}
							ident = append(ident, Int64(n))
						default:
							t.Fatalf("entity type %s", tb.EntityTypes[j])
						}
					}
					for _, run := range g.Runs {
						start, step, count := bigOf(t, run[0]), bigOf(t, run[1]), bigOf(t, run[2]).Int64()
						repeat, stride := int64(1), big.NewInt(0)
						if len(run) == 5 {
							repeat, stride = bigOf(t, run[3]).Int64(), bigOf(t, run[4])
						}
						for j := range repeat {
							for k := range count {
								v := new(big.Int).Mul(step, big.NewInt(k))
								v.Add(v, start).Add(v, new(big.Int).Mul(stride, big.NewInt(j)))
								r := row{ident: ident, unit: Nanoseconds}
								if spec.Kind == KindUInt64 {
									r.u = v.Uint64()
								} else {
									r.raw = v.Int64()
								}
								rows = append(rows, r)
							}
						}
					}
				}
				sc := tb.Sidecars[i]
				if len(rows) != sc.Rows {
					t.Fatalf("append %d: %d rows, golden appended %d", i, len(rows), sc.Rows)
				}
				appends = append(appends, rows)
				tblRel := "_coverage/" + sc.Table
				if sc.Same {
					tblRel = "" // checked against the segment file below
				}
				rt.sidecars = append(rt.sidecars, refSidecars{
					version: uint64(i + 2), segment: "_coverage/" + sc.Segment, table: tblRel,
				})
			}
			checkGoldenAppends(t, rt, appends, tb.Sidecars)
		})
	}
}

// checkGoldenAppends is checkAppends for the goldens, where a table snapshot
// equal to its segment is stored once (under the segment's name).
func checkGoldenAppends(t *testing.T, rt refTable, appends [][]row, pairs []goldenSidecarPair) {
	t.Helper()
	// Files live in dir/segments and dir/table: "_coverage/x" is dir/x.
	for i, b := range buildAppends(t, rt, appends) {
		seg, table, segBytes, tblBytes := b.seg, b.table, b.segBytes, b.tblBytes
		sc := rt.sidecars[i]
		segFile, err := os.ReadFile(filepath.Join(rt.dir, strings.TrimPrefix(sc.segment, "_coverage/")))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(segBytes, segFile) {
			t.Errorf("append %d: segment coverage differs from %s (%d vs %d bytes)", i, sc.segment, len(segBytes), len(segFile))
		}
		checkDecoded(t, rt.spec, segFile, seg)
		if id, _ := SegmentContentID(rt.spec, segFile); !strings.Contains(sc.segment, id+"-") {
			t.Errorf("SegmentContentID %s does not name %s", id, sc.segment)
		}
		tblFile := segFile
		tblName := "_coverage/" + pairs[i].Table
		if sc.table != "" {
			if tblFile, err = os.ReadFile(filepath.Join(rt.dir, strings.TrimPrefix(sc.table, "_coverage/"))); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(tblBytes, tblFile) {
			t.Errorf("append %d: table coverage differs from %s (%d vs %d bytes)", i, tblName, len(tblBytes), len(tblFile))
		}
		checkDecoded(t, rt.spec, tblFile, table)
		m := tblName[strings.LastIndex(tblName, "/")+1:]
		if id, _ := TableContentID(rt.spec, tblFile); !strings.HasPrefix(m, fmt.Sprintf("%d-%s-", sc.version, id)) {
			t.Errorf("TableContentID %s (version %d) does not name %s", id, sc.version, tblName)
		}
	}
}

func checkDecoded(t *testing.T, spec IndexSpec, data []byte, want *Set) {
	t.Helper()
	s, err := Decode(data, spec.Entity())
	if err != nil {
		t.Fatal(err)
	}
	if !s.Equal(want) {
		t.Error("decoded set differs from the built one")
	}
	again, _ := s.Encode()
	if !bytes.Equal(again, data) {
		t.Error("decode+encode changed the bytes")
	}
}
