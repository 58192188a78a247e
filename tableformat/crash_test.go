package tableformat

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/tableformat/storage"
)

var randomSuffix = regexp.MustCompile(`tmp-[0-9a-f]{16}`)

func normalizeName(s string) string { return randomSuffix.ReplaceAllString(s, "tmp-X") }

// commitTrace returns the storage calls one commit makes on a table at
// version 1, with random name parts normalized.
func commitTrace(t *testing.T) []storage.Event {
	t.Helper()
	mem := storage.NewMem()
	mustCreate(t, mem)
	ffs := storage.NewFaultFS(mem)
	tb, err := Open(context.Background(), ffs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ffs.Reset()
	if _, err := tb.Commit(context.Background(), 1, adoptSchema(tb.State())); err != nil {
		t.Fatal(err)
	}
	tr := ffs.Trace()
	for i := range tr {
		tr[i].Name, tr[i].Name2 = normalizeName(tr[i].Name), normalizeName(tr[i].Name2)
	}
	return tr
}

// faultAt builds a fault on the call tr[i]: same op, same (normalized) path,
// and the right occurrence among identical calls.
func faultAt(tr []storage.Event, i int, after bool, err error) storage.Fault {
	nth := 0
	for j := 0; j <= i; j++ {
		if tr[j] == tr[i] {
			nth++
		}
	}
	want := tr[i]
	return storage.Fault{
		Op:    want.Op,
		Match: func(name string) bool { n := normalizeName(name); return n == want.Name || n == want.Name2 },
		Nth:   nth,
		After: after,
		Err:   err,
	}
}

// openWithFault creates a table in memory, opens it through a FaultFS and
// arms f there, to strike the calls that follow.
func openWithFault(t *testing.T, ctx context.Context, f storage.Fault) (*storage.MemFS, *storage.FaultFS, *Table) {
	t.Helper()
	mem := storage.NewMem()
	mustCreate(t, mem)
	ffs := storage.NewFaultFS(mem)
	tb, err := Open(ctx, ffs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ffs.Reset()
	ffs.Inject(f)
	return mem, ffs, tb
}

// TestCommitCrashAtEveryStep crashes a commit before and after each storage
// call it makes and checks what survives a power loss: the table opens, an
// acknowledged commit is always there, the next commit succeeds, CURRENT is
// repaired, and timeseries-table-format 0.9.0 opens the result too.
func TestCommitCrashAtEveryStep(t *testing.T) {
	ctx := context.Background()
	tr := commitTrace(t)
	steps := make([]string, len(tr))
	for i, e := range tr {
		steps[i] = e.String()
	}
	t.Logf("a commit is %d storage calls: %s", len(tr), strings.Join(steps, " | "))
	for _, want := range []string{"Link _timeseries_log/.0000000002.json.tmp-X _timeseries_log/0000000002.json", "Rename _timeseries_log/CURRENT.tmp-X _timeseries_log/CURRENT"} {
		if !strings.Contains(strings.Join(steps, "|"), want) {
			t.Fatalf("commit trace lacks %q", want)
		}
	}
	type outcome struct {
		name    string
		dir     string
		version uint64
	}
	var outcomes []outcome
	durableSeen := map[bool]int{}
	root := t.TempDir() // outlives the subtests, for the reference check
	for i := range tr {
		for _, after := range []bool{false, true} {
			name := fmt.Sprintf("crash %s %d %s", map[bool]string{false: "before", true: "after"}[after], i, tr[i])
			t.Run(name, func(t *testing.T) {
				mem, ffs, tb := openWithFault(t, ctx, faultAt(tr, i, after, nil))
				_, cerr := tb.Commit(ctx, 1, adoptSchema(tb.State()))
				if !ffs.Crashed() {
					t.Fatalf("the crash did not fire")
				}
				disk := mem.CrashClone()
				re, err := Open(ctx, disk, nil)
				if err != nil {
					t.Fatalf("table does not open after the crash: %v\n%s", err, disk)
				}
				v := re.State().Version
				if cerr == nil && v != 2 {
					t.Fatalf("the commit was acknowledged but the table is at version %d after the crash", v)
				}
				if v != 1 && v != 2 {
					t.Fatalf("version %d after a crash of the commit of version 2", v)
				}
				durableSeen[v == 2]++
				if v == 2 && re.State().Meta.Schema == nil {
					t.Fatal("version 2 without its schema")
				}
				cur, err := disk.ReadFile(currentPath)
				if err != nil || strings.TrimSpace(string(cur)) != strconv.FormatUint(v, 10) {
					t.Fatalf("CURRENT is %q (%v) after open, want %d", cur, err, v)
				}
				next, err := re.Commit(ctx, v, marker("after-crash"))
				if err != nil || next != v+1 {
					t.Fatalf("next commit: version %d, %v", next, err)
				}
				dir := filepath.Join(root, fmt.Sprintf("case%02d-%v", i, after))
				copyToDisk(t, disk, dir)
				outcomes = append(outcomes, outcome{name: name, dir: dir, version: next})
			})
		}
	}
	if durableSeen[true] == 0 || durableSeen[false] == 0 {
		t.Fatalf("crash points never produced both outcomes: %v", durableSeen)
	}
	dirs := make([]string, len(outcomes))
	for i, o := range outcomes {
		dirs[i] = o.dir
	}
	res := inspectWithReference(t, false, dirs...)
	for _, o := range outcomes {
		r := res[filepath.Clean(o.dir)]
		if !r.OK || r.Version != o.version {
			t.Errorf("%s: reference opened version %d (ok=%v, %s), want %d", o.name, r.Version, r.OK, r.Error, o.version)
		}
	}
}

// TestCommitErrorAtEveryStep makes each storage call of a commit fail (the
// process lives on): a definite failure leaves no trace, success is
// durable, an ambiguous outcome is reported as such, and the table stays
// writable.
func TestCommitErrorAtEveryStep(t *testing.T) {
	ctx := context.Background()
	tr := commitTrace(t)
	injected := errors.New("injected I/O error")
	for i := range tr {
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("fail %v %d %s", after, i, tr[i]), func(t *testing.T) {
				mem, _, tb := openWithFault(t, ctx, faultAt(tr, i, after, injected))
				_, cerr := tb.Commit(ctx, 1, adoptSchema(tb.State()))
				re, err := Open(ctx, mem, nil)
				if err != nil {
					t.Fatalf("table does not open: %v", err)
				}
				v := re.State().Version
				switch {
				case cerr == nil && v != 2:
					t.Fatalf("commit succeeded but the table is at %d", v)
				case cerr != nil && errors.Is(cerr, ErrAmbiguousOutcome):
				case cerr != nil && v != 1:
					t.Fatalf("commit failed definitely (%v) but the table is at %d", cerr, v)
				}
				if cerr != nil && !errors.Is(cerr, ErrStorage) && !errors.Is(cerr, ErrAmbiguousOutcome) {
					t.Fatalf("failure not reported as a storage error: %v", cerr)
				}
				if cerr != nil && !errors.Is(cerr, injected) {
					t.Fatalf("the cause is lost: %v", cerr)
				}
				if tb.State().Version != v {
					t.Fatalf("the writer's handle is at %d, the table at %d", tb.State().Version, v)
				}
				if next, err := re.Commit(ctx, v, marker("after-error")); err != nil || next != v+1 {
					t.Fatalf("next commit: %d, %v", next, err)
				}
				if names, _ := mem.List(LogDir); len(names) != 0 {
					for _, n := range names {
						if strings.HasPrefix(n, ".") || strings.Contains(n, ".tmp-") {
							// A failed removal of a temporary file is allowed
							// only when removal itself was the injected fault.
							if tr[i].Op != storage.OpRemove {
								t.Fatalf("temporary file %s left behind", n)
							}
						}
					}
				}
			})
		}
	}
}

// TestTornOrphanCommit: a commit file above the newest version that is not
// a valid commit (a reference writer crashed while writing it in place) is
// invisible to readers; a writer sets it aside once it is older than the
// grace period and commits; before that, the writer gets a conflict.
func TestTornOrphanCommit(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	tb := mustCreate(t, mem)
	f, err := mem.CreateExclusive(CommitPath(2))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(`{"version":2,"base_ver`)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	re, err := Open(ctx, mem, nil)
	if err != nil || re.State().Version != 1 {
		t.Fatalf("open with a torn orphan: %v", err)
	}
	// Young orphan: its writer may still be finishing; conflict.
	_, err = re.Commit(ctx, 1, marker("young"))
	var ce *ConflictError
	if !errors.As(err, &ce) || !ce.LostRace {
		t.Fatalf("commit over a young orphan: %v, want a lost-race conflict", err)
	}
	if data, _ := mem.ReadFile(CommitPath(2)); !strings.HasPrefix(string(data), `{"version":2,"base_ver`) {
		t.Fatal("a young orphan was touched")
	}
	// Old orphan: set aside, commit goes through.
	opts := DefaultOptions()
	opts.OrphanGrace = 0
	old, err := Open(ctx, mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	v, err := old.Commit(ctx, 1, marker("old"))
	if err != nil || v != 2 {
		t.Fatalf("commit over an old orphan: %d, %v", v, err)
	}
	names, err := mem.List(orphanDir)
	if err != nil || len(names) != 1 || !strings.HasPrefix(names[0], "0000000002.json.") {
		t.Fatalf("orphan dir holds %v (%v)", names, err)
	}
	_ = tb
}

// TestRollForwardValidCommitAboveCurrent: a complete commit above CURRENT
// (its writer died before publishing CURRENT) is the commit; Open reads it
// and repairs CURRENT, unless ReadOnly.
func TestRollForwardValidCommitAboveCurrent(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	tb := mustCreate(t, mem)
	if _, err := tb.Commit(ctx, 1, adoptSchema(tb.State())); err != nil {
		t.Fatal(err)
	}
	// Put CURRENT back to 1, as if publication never happened.
	f, _ := mem.Create(currentPath)
	f.Write([]byte("1\n"))
	f.Close()
	ro := DefaultOptions()
	ro.ReadOnly = true
	r, err := Open(ctx, mem, ro)
	if err != nil || r.State().Version != 2 {
		t.Fatalf("read-only open: %v", err)
	}
	if cur, _ := mem.ReadFile(currentPath); string(cur) != "1\n" {
		t.Fatalf("read-only open wrote CURRENT %q", cur)
	}
	w, err := Open(ctx, mem, nil)
	if err != nil || w.State().Version != 2 {
		t.Fatalf("open: %v", err)
	}
	if cur, _ := mem.ReadFile(currentPath); string(cur) != "2\n" {
		t.Fatalf("CURRENT not rolled forward: %q", cur)
	}
}
