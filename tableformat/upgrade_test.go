package tableformat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/internal/testkit"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// v6Oracle converts a commit the way the fixtures need it, by plain text
// substitution on serde's compact output (independent of the converter):
// format_version becomes the protocol-7 header in place, bucket and
// bucket_width become index_granularity, and the index kind's tag u_int64
// becomes uint64 (index values keep their tag "u_int64" in protocol 7).
func v6Oracle(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte(`"format_version":6`), []byte(`"protocol_version":7,"required_reader_features":[],"required_writer_features":[]`))
	b = bytes.ReplaceAll(b, []byte(`"bucket_width":`), []byte(`"index_granularity":`))
	b = bytes.ReplaceAll(b, []byte(`"bucket":`), []byte(`"index_granularity":`))
	return bytes.ReplaceAll(b, []byte(`"type":"u_int64","index_granularity"`), []byte(`"type":"uint64","index_granularity"`))
}

// py09 runs testdata/format6/interop09.py with timeseries-table-format
// 0.9.0 and decodes its JSON output ("" py: not installed, skipped).
func py09(t *testing.T, py string, out any, args ...string) {
	t.Helper()
	runPyJSON(t, py, filepath.Join("..", "testdata", "format6", "interop09.py"), 2*time.Minute, out, args...)
}

// rowLines renders rows (from JSON) as rowsJSON does.
// py09Reads checks that the 0.9.0 package reads table dir at version
// with the rows exp (as rowLines writes them).
// wantFixtureRows checks that tb holds the fixture's rows (read with a
// checked allocator) and, when py is set, that the 0.9.0 package reads the
// same at version; what says when.
func wantFixtureRows(t *testing.T, what string, tb *Table, want *format6Expected, py, dir string, version uint64) {
	t.Helper()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	exp := expectedRowsJSON(t, want)
	wantRowsJSON(t, what, tb, mem, exp)
	if py != "" {
		py09Reads(t, py, dir, version, exp)
	}
}

func py09Reads(t *testing.T, py, dir string, version uint64, exp []string) {
	t.Helper()
	var res struct {
		Version uint64           `json:"version"`
		Rows    []map[string]any `json:"rows"`
	}
	py09(t, py, &res, "rows", dir)
	if got := rowLines(t, res.Rows); res.Version != version || strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Fatalf("0.9.0 reads version %d rows\n%s\nwant version %d rows\n%s", res.Version, strings.Join(got, "\n"), version, strings.Join(exp, "\n"))
	}
}

func rowLines(t *testing.T, rows []map[string]any) []string {
	return expectedRowsJSON(t, &format6Expected{Rows: rows})
}

// newRowFor is a row in an interval no fixture covers.
func newRowFor(name string) map[string]any {
	switch name {
	case "ts_entity":
		return map[string]any{"ts": json.Number("1717560000000"), "symbol": "NVDA", "close": 1.5} // 2024-06-05
	case "int64":
		return map[string]any{"k": json.Number("500"), "v": 3.0}
	default:
		return map[string]any{"k": json.Number("1000"), "v": 4.0}
	}
}

// TestUpgradeFormat6: for each fixture, the dry run writes nothing and
// plans the conversion of every commit; the upgrade converts the log
// exactly by the reference's rules, keeps the old log as the backup, does
// not touch data files or sidecars, compacts, and leaves a table that
// tsflight and timeseries-table-format 0.9.0 read with the same rows and
// that both can append to.
func TestUpgradeFormat6(t *testing.T) {
	py := crashPython(t)
	for _, c := range format6Cases() {
		name := c.name
		t.Run(c.String(), func(t *testing.T) {
			dir, want := copyFormat6From(t, c.set, name)
			ctx := context.Background()
			before := testkit.Snapshot(t, dir)
			tb := mustOpen(t, storage.Local(dir), nil)
			dry, err := tb.Upgrade(ctx, &UpgradeOptions{DryRun: true})
			if err != nil {
				t.Fatal(err)
			}
			entity := name == "ts_entity"
			lastState := map[bool]string{true: "planned", false: "not-needed"}[entity]
			if !dry.DryRun || dry.ConvertedCommits != want.Version || dry.LegacyFormat != 6 || len(dry.Steps) != 3 || dry.Steps[0].State != "planned" || dry.Backup != "" ||
				dry.Steps[2].Step != "last-values" || dry.Steps[2].State != lastState {
				t.Fatalf("dry run report %+v", dry)
			}
			if dry.Compact == nil || (dry.Steps[1].State == "planned") == dry.Compact.NoOp {
				t.Fatalf("dry run compaction step %+v, report %+v", dry.Steps[1], dry.Compact)
			}
			sameDigests(t, "after the dry run", testkit.Snapshot(t, dir), before)

			rep, err := tb.Upgrade(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			compacted := uint64(0)
			if !dry.Compact.NoOp {
				compacted = 1
			}
			if rep.ConvertedCommits != want.Version || rep.Swap != "exchange" || !strings.HasPrefix(rep.Backup, UpgradeBackupPrefix) || rep.Compact == nil || rep.Compact.NoOp != dry.Compact.NoOp || rep.CommittedVersion != want.Version+compacted {
				t.Fatalf("report %+v (dry run %+v)", rep, dry)
			}
			after := testkit.Snapshot(t, dir)
			for p, d := range before {
				if rel, ok := strings.CutPrefix(p, LogDir+"/"); ok {
					// The old log is the backup, byte for byte.
					if after[rep.Backup+"/"+rel] != d {
						t.Errorf("backup %s/%s differs from the old %s", rep.Backup, rel, p)
					}
					continue
				}
				if after[p] != d {
					t.Errorf("%s changed: data files and sidecars must stay as they were", p)
				}
			}
			for v := uint64(1); v <= want.Version; v++ {
				old, err := os.ReadFile(filepath.Join(dir, rep.Backup, filepath.Base(CommitPath(v))))
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(dir, CommitPath(v)))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, v6Oracle(old)) {
					t.Errorf("commit %d converted to\n%s\nwant\n%s", v, got, v6Oracle(old))
				}
			}
			st := tb.State()
			if st.Meta.NeedsUpgrade() || st.Version != want.Version+compacted {
				t.Fatalf("after upgrade: version %d legacy %d", st.Version, st.Meta.LegacyFormat)
			}
			if entity {
				// The last step wrote the last-value index of the upgraded version.
				if s := rep.Steps[2]; s.State != "done" || !strings.Contains(s.Detail, LastValuesPath(st.Version)) {
					t.Fatalf("last-values step %+v", s)
				}
				if _, err := os.Stat(filepath.Join(dir, LastValuesPath(st.Version))); err != nil {
					t.Fatal(err)
				}
				wantLast(t, "after the upgrade", ctx, tb, st)
			} else if rep.Steps[2].State != "not-needed" {
				t.Fatalf("last-values step %+v", rep.Steps[2])
			}
			wantFixtureRows(t, "rows after upgrade", tb, want, py, dir, st.Version)
			if py == "" {
				return
			}
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			row := newRowFor(name)
			rowJSON, _ := json.Marshal(row)
			var app struct {
				Version uint64 `json:"version"`
			}
			py09(t, py, &app, "append", dir, string(rowJSON))
			if app.Version != st.Version+1 {
				t.Fatalf("0.9.0 appended version %d, want %d", app.Version, st.Version+1)
			}
			if _, err := tb.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			exp2 := append(rowLines(t, append(want.Rows, row)), []string{}...)
			sort.Strings(exp2)
			wantRowsJSON(t, "tsflight after the 0.9.0 append", tb, mem, exp2)
			if entity {
				// The index catches up with the package's append, from a
				// handle that starts from the persisted index too.
				wantLast(t, "after a 0.9.0 append", ctx, tb, tb.State())
				fresh := mustOpen(t, storage.Local(dir), nil)
				if x := fresh.loadLastIndex(ctx, fresh.State()); x == nil || x.version != st.Version {
					t.Fatalf("a new handle does not start from the persisted index of version %d", st.Version)
				} else {
					x.release()
				}
				wantLast(t, "after a 0.9.0 append, a new handle", ctx, fresh, fresh.State())
				if got := gotLast(t, ctx, fresh, fresh.State(), LastOptions{Entities: map[string]EntityValue{"symbol": scStr("NVDA")}, Columns: []string{"close"}}); !slices.Equal(got, []string{"close=1.5"}) {
					t.Fatalf("NVDA's newest close after the 0.9.0 append: %v", got)
				}
			}
		})
	}
}

// A handle opened on the format-6 table before another handle upgraded it
// notices the swap (commit 1 changed) and can write afterwards.
func TestUpgradeOtherHandleNotices(t *testing.T) {
	dir, want := copyFormat6(t, "int64")
	ctx := context.Background()
	h1 := mustOpen(t, storage.Local(dir), nil)
	h2 := mustOpen(t, storage.Local(dir), nil)
	if _, err := h1.Upgrade(ctx, &UpgradeOptions{Compact: &CompactOptions{MinSegments: 2, SmallBytes: 1}}); err != nil {
		t.Fatal(err)
	}
	// SmallBytes 1: nothing is small, so no compaction commit.
	st, err := h2.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Meta.NeedsUpgrade() || st.Version != want.Version {
		t.Fatalf("other handle: version %d legacy %d", st.Version, st.Meta.LegacyFormat)
	}
	if _, err := h2.AddColumns(ctx, []Field{{Name: "extra", Type: DataType{Kind: TypeFloat64}, Nullable: true}}); err != nil {
		t.Fatalf("write through the other handle after the upgrade: %v", err)
	}
}

// An already protocol-7 table: nothing is converted and no backup made;
// the second upgrade has nothing to compact either.
func TestUpgradeProtocol7(t *testing.T) {
	dir := t.TempDir()
	tb := rpBuild(t, dir, "h1", 1, 100, 200)
	before := testkit.Snapshot(t, dir)
	ctx := context.Background()
	dry, err := tb.Upgrade(ctx, &UpgradeOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if dry.ConvertedCommits != 0 || dry.Steps[0].State != "not-needed" || dry.Compact.NoOp {
		t.Fatalf("dry run %+v", dry)
	}
	sameDigests(t, "after the dry run", testkit.Snapshot(t, dir), before)
	rep, err := tb.Upgrade(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.ConvertedCommits != 0 || rep.Backup != "" || rep.Compact.NoOp || rep.CommittedVersion != 5 {
		t.Fatalf("report %+v", rep)
	}
	again, err := tb.Upgrade(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Compact.NoOp || again.CommittedVersion != 5 || again.Steps[1].State != "not-needed" {
		t.Fatalf("second upgrade %+v", again)
	}
	names, _ := os.ReadDir(dir)
	for _, n := range names {
		if strings.HasPrefix(n.Name(), LogDir+".") {
			t.Errorf("upgrade of a protocol-7 table left %s", n.Name())
		}
	}
}

// Leftovers: an unfinished staging directory is removed; one holding a
// swapped-out format-6 log (a crash between the exchange and the rename)
// becomes a backup. A dry run only reports them.
func TestUpgradeLeftovers(t *testing.T) {
	dir, _ := copyFormat6(t, "uint64")
	ctx := context.Background()
	stale := filepath.Join(dir, UpgradeStagingPrefix+"0123456789abcdef")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "0000000001.json"), []byte(`{"version":1,"ba`), 0o644); err != nil {
		t.Fatal(err)
	}
	swapped := UpgradeStagingPrefix + "fedcba9876543210"
	rpCopy(t, filepath.Join(dir, LogDir), filepath.Join(dir, swapped))
	tb := mustOpen(t, storage.Local(dir), nil)
	before := testkit.Snapshot(t, dir)
	dry, err := tb.Upgrade(ctx, &UpgradeOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(dry.Leftovers) != fmt.Sprint([]string{filepath.Base(stale)}) || fmt.Sprint(dry.LeftoverBackups) != fmt.Sprint([]string{swapped}) {
		t.Fatalf("dry run leftovers %v, backups %v", dry.Leftovers, dry.LeftoverBackups)
	}
	sameDigests(t, "after the dry run", testkit.Snapshot(t, dir), before)
	if _, err := tb.Upgrade(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale staging directory still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, swapped)); !os.IsNotExist(err) {
		t.Errorf("swapped-out log kept its staging name: %v", err)
	}
	backups, _ := filepath.Glob(filepath.Join(dir, UpgradeBackupPrefix+"*"))
	if len(backups) != 2 {
		t.Fatalf("backups %v, want the recovered one and this upgrade's", backups)
	}
}

// On a file system without an atomic exchange the logs are swapped with
// two renames, with the same result.
func TestUpgradeRenameFallback(t *testing.T) {
	dir, want := copyFormat6(t, "ts_entity")
	ctx := context.Background()
	ffs := storage.NewFaultFS(storage.Local(dir))
	ffs.Inject(storage.Fault{Op: storage.OpExchange, Err: storage.ErrExchangeUnsupported})
	tb := mustOpen(t, ffs, nil)
	rep, err := tb.Upgrade(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Swap != "rename" || rep.ConvertedCommits != want.Version {
		t.Fatalf("report %+v", rep)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	if got, exp := rowsJSON(t, tb, mem), expectedRowsJSON(t, want); strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Fatalf("rows %v, want %v", got, exp)
	}
}

// Bad compact options are refused before anything is written.
func TestUpgradeBadOptions(t *testing.T) {
	dir, _ := copyFormat6(t, "int64")
	before := testkit.Snapshot(t, dir)
	tb := mustOpen(t, storage.Local(dir), nil)
	_, err := tb.Upgrade(context.Background(), &UpgradeOptions{Compact: &CompactOptions{TargetBytes: -1}})
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "TargetBytes") {
		t.Fatalf("upgrade: %v, want ErrInvalidInput naming TargetBytes", err)
	}
	sameDigests(t, "after refused options", testkit.Snapshot(t, dir), before)
}

// Vacuum never touches the backup of the old log (nor a staging
// directory): it walks data/, _coverage/ and the log only.
func TestUpgradeVacuumKeepsBackup(t *testing.T) {
	dir, want := copyFormat6(t, "ts_entity")
	ctx := context.Background()
	tb := mustOpen(t, storage.Local(dir), nil)
	rep, err := tb.Upgrade(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(dir, UpgradeStagingPrefix+"00000000000000aa")
	if err := os.MkdirAll(stray, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stray, "CURRENT"), []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var backup []string
	for p, d := range testkit.Snapshot(t, dir) {
		if strings.HasPrefix(p, rep.Backup+"/") || strings.HasPrefix(p, filepath.Base(stray)+"/") {
			backup = append(backup, p+" "+d)
		}
	}
	zero := time.Duration(0)
	vrep, err := tb.Vacuum(ctx, &VacuumOptions{OlderThan: time.Now(), KeepSnapshots: &zero, Apply: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(vrep.Artifacts) == 0 {
		t.Fatal("vacuum found nothing to consider: the test proves nothing")
	}
	after := testkit.Snapshot(t, dir)
	for _, b := range backup {
		p, d, _ := strings.Cut(b, " ")
		if after[p] != d {
			t.Errorf("vacuum changed or removed %s", p)
		}
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	if got, exp := rowsJSON(t, tb, mem), expectedRowsJSON(t, want); strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Fatalf("rows after vacuum %v, want %v", got, exp)
	}
}
