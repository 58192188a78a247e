// Tests of table properties: the SetTableProperties action's bytes, set,
// replace and remove through a real table and its replay, the write
// refusals, the replay rules for hand-written logs, and the 0.9.0 package
// opening and appending to a table that has the action.

package tableformat

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

func commitFile(t *testing.T, dir string, v uint64) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(CommitPath(v))))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPropertiesSetReplaceRemove: properties are set, replaced and removed
// by commits whose bytes are pinned here; the state of each version (the
// handle's, a fresh replay's and StateAt's) has the properties of that
// version, and the keep window follows the property.
func TestPropertiesSetReplaceRemove(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clock := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	opts := DefaultOptions()
	opts.Now = func() time.Time { return clock }
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: tsIndex(), Schema: tsSchema()}, opts)
	if st := tb.State(); st.Properties != nil || st.KeepSnapshots() != DefaultKeepSnapshots {
		t.Fatalf("new table: properties %v, keep %s", st.Properties, st.KeepSnapshots())
	}
	if _, ok := tb.State().propertiesAction(); ok {
		t.Fatal("a table without properties has a properties action")
	}
	steps := []struct {
		set  map[string]string
		json string
		want map[string]string
		keep time.Duration
	}{
		{map[string]string{PropertyKeepSnapshots: "168h", "owner": "ops <team>", "note": "a\"b\n"},
			`{"SetTableProperties":{"properties":{"note":"a\"b\n","owner":"ops <team>","tsflight.keep-snapshots":"168h"}}}`,
			map[string]string{PropertyKeepSnapshots: "168h", "owner": "ops <team>", "note": "a\"b\n"}, 168 * time.Hour},
		{map[string]string{PropertyKeepSnapshots: "90m"},
			`{"SetTableProperties":{"properties":{"tsflight.keep-snapshots":"90m"}}}`,
			map[string]string{PropertyKeepSnapshots: "90m", "owner": "ops <team>", "note": "a\"b\n"}, 90 * time.Minute},
		{map[string]string{"owner": "", "note": "", "absent": ""},
			`{"SetTableProperties":{"properties":{"absent":"","note":"","owner":""}}}`,
			map[string]string{PropertyKeepSnapshots: "90m"}, 90 * time.Minute},
		{map[string]string{PropertyKeepSnapshots: "0s"},
			`{"SetTableProperties":{"properties":{"tsflight.keep-snapshots":"0s"}}}`,
			map[string]string{PropertyKeepSnapshots: "0s"}, 0},
		{map[string]string{PropertyKeepSnapshots: ""},
			`{"SetTableProperties":{"properties":{"tsflight.keep-snapshots":""}}}`,
			nil, DefaultKeepSnapshots},
	}
	for i, s := range steps {
		v, err := tb.SetProperties(ctx, uint64(i+1), s.set)
		if err != nil || v != uint64(i+2) {
			t.Fatalf("step %d: version %d, %v", i, v, err)
		}
		want := fmt.Sprintf(`{"version":%d,"base_version":%d,"timestamp":"2026-03-01T12:00:00Z","actions":[%s]}`, v, v-1, s.json)
		if got := commitFile(t, dir, v); got != want {
			t.Fatalf("step %d: commit\n%s\nwant\n%s", i, got, want)
		}
		st := tb.State()
		if !maps.Equal(st.Properties, s.want) || (s.want == nil) != (st.Properties == nil) || st.KeepSnapshots() != s.keep {
			t.Fatalf("step %d: properties %v keep %s, want %v %s", i, st.Properties, st.KeepSnapshots(), s.want, s.keep)
		}
		if a, ok := st.propertiesAction(); ok != (s.want != nil) || ok && !maps.Equal(a.(SetTableProperties).Properties(), s.want) {
			t.Fatalf("step %d: properties action %v %v", i, a, ok)
		}
	}
	// A fresh replay (no checkpoints) and StateAt agree version by version.
	ro := DefaultOptions()
	ro.Now = opts.Now
	ro.CheckpointInterval = 0
	again := mustOpen(t, storage.Local(dir), ro)
	if again.State().Properties != nil || again.State().Version != 6 {
		t.Fatalf("reopened: %v at %d", again.State().Properties, again.State().Version)
	}
	for i, s := range steps[:len(steps)-1] {
		st, err := again.StateAt(ctx, uint64(i+2))
		if err != nil {
			t.Fatalf("StateAt(%d): %v", i+2, err)
		}
		if !maps.Equal(st.Properties, s.want) {
			t.Fatalf("StateAt(%d): %v, want %v", i+2, st.Properties, s.want)
		}
	}
	// The property's value survives a replay on top of an earlier state:
	// the map of a state is never modified by a later commit.
	st3, _ := again.StateAt(ctx, 3)
	if st3.Properties["owner"] != "ops <team>" {
		t.Fatalf("version 3 lost a property: %v", st3.Properties)
	}
	// The properties action recreates the properties on an empty state.
	st2, _ := again.StateAt(ctx, 2)
	a, _ := st2.propertiesAction()
	re, err := (&State{Version: 0, Meta: st2.Meta, byPath: map[string]int{}}).apply(&Commit{Version: 1, Actions: []Action{a}}, "test")
	if err != nil || !maps.Equal(re.Properties, st2.Properties) {
		t.Fatalf("replayed properties action: %v, %v", re, err)
	}
}

// TestPropertiesRefusedOnWrite: each malformed change is ErrInvalidInput
// naming the key, and nothing is written.
func TestPropertiesRefusedOnWrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: tsIndex(), Schema: tsSchema()}, nil)
	before := dirSnapshot(t, dir)
	cases := []struct {
		name  string
		props map[string]string
		frags []string
	}{
		{"nothing", map[string]string{}, []string{"no table properties"}},
		{"nil", nil, []string{"no table properties"}},
		{"unknown tsflight key", map[string]string{"tsflight.keep-snapshot": "1h"}, []string{`"tsflight.keep-snapshot"`, "not one this build", "reserved", PropertyKeepSnapshots}},
		{"unknown tsflight key removed", map[string]string{"tsflight.future": ""}, []string{`"tsflight.future"`, "reserved"}},
		{"bad duration", map[string]string{PropertyKeepSnapshots: "a week"}, []string{PropertyKeepSnapshots, `"a week"`, "not a duration"}},
		{"unit-less duration", map[string]string{PropertyKeepSnapshots: "168"}, []string{PropertyKeepSnapshots, `"168"`}},
		{"negative duration", map[string]string{PropertyKeepSnapshots: "-1h"}, []string{PropertyKeepSnapshots, `"-1h"`, "negative"}},
		{"empty name", map[string]string{"": "x"}, []string{"non-empty name"}},
		{"bad UTF-8 name", map[string]string{"a\xff": "x"}, []string{"UTF-8"}},
		{"bad UTF-8 value", map[string]string{"owner": "\xfe"}, []string{`"owner"`, "UTF-8"}},
		{"one bad among good", map[string]string{"owner": "ops", "tsflight.x": "1"}, []string{`"tsflight.x"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := tb.SetProperties(ctx, 1, c.props)
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("got %v, want ErrInvalidInput", err)
			}
			for _, f := range c.frags {
				if !strings.Contains(err.Error(), f) {
					t.Fatalf("%q does not name %q", err, f)
				}
			}
			if _, err := NewSetTableProperties(c.props); !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("NewSetTableProperties: %v", err)
			}
		})
	}
	if diff := sameSnapshot(before, dirSnapshot(t, dir)); diff != "" || tb.State().Version != 1 {
		t.Fatalf("refused writes changed %s (version %d)", diff, tb.State().Version)
	}
	// A table without a schema yet is refused: its first append must be
	// version 2 to adopt one.
	bare := mustCreate(t, storage.NewMem())
	if _, err := bare.SetProperties(ctx, 1, map[string]string{"owner": "ops"}); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "no schema yet") || bare.State().Version != 1 {
		t.Fatalf("schemaless table: %v", err)
	}
	// A stale expected version is a conflict; the zero action (no
	// changes) commits a no-op.
	if _, err := tb.SetProperties(ctx, 0, map[string]string{"owner": "ops"}); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale version: %v", err)
	}
	if v, err := tb.Commit(ctx, 1, []Action{SetTableProperties{}}); err != nil || v != 2 || tb.State().Properties != nil {
		t.Fatalf("empty SetTableProperties: %d, %v", v, err)
	}
	if got := commitFile(t, dir, 2); !strings.Contains(got, `"actions":[{"SetTableProperties":{"properties":{}}}]`) {
		t.Fatalf("empty action: %s", got)
	}
	// The action keeps its own copy of the changes.
	m := map[string]string{"owner": "ops"}
	a, err := NewSetTableProperties(m)
	if err != nil {
		t.Fatal(err)
	}
	m["owner"] = "changed"
	a.Properties()["owner"] = "changed too"
	if a.Properties()["owner"] != "ops" || a.ActionName() != "SetTableProperties" {
		t.Fatalf("action %v", a.Properties())
	}
}

// TestPropertiesReplayRules: on hand-written logs, a malformed value of a
// known property or a malformed payload is corruption naming the commit;
// a tsflight.* property this build does not know (a newer writer's) is
// kept; an unknown member beside "properties" is ignored.
func TestPropertiesReplayRules(t *testing.T) {
	props := func(body string) string { return `{"SetTableProperties":` + body + `}` }
	bad := []struct {
		name, action, frag string
	}{
		{"bad duration", props(`{"properties":{"tsflight.keep-snapshots":"soon"}}`), `tsflight.keep-snapshots: "soon" is not a duration`},
		{"negative duration", props(`{"properties":{"tsflight.keep-snapshots":"-5m"}}`), "negative"},
		{"empty name", props(`{"properties":{"":"x"}}`), "empty name"},
		{"no properties", props(`{}`), `missing field "properties"`},
		{"properties null", props(`{"properties":null}`), "properties"},
		{"properties a list", props(`{"properties":["a"]}`), "properties"},
		{"value a number", props(`{"properties":{"owner":7}}`), `"owner"`},
		{"value null", props(`{"properties":{"owner":null}}`), `"owner"`},
		{"duplicate key", props(`{"properties":{"owner":"a","owner":"b"}}`), "duplicate"},
		{"payload a string", props(`"x"`), "SetTableProperties"},
		{"bare name", `"SetTableProperties"`, "has no payload"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLog(t, dir, "2\n", createOK, commitJSON(2, c.action))
			_, err := Open(context.Background(), storage.Local(dir), nil)
			var ce *CorruptionError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Version != 2 || !strings.Contains(err.Error(), c.frag) {
				t.Fatalf("got %v, want corruption of commit 2 naming %q", err, c.frag)
			}
		})
	}
	t.Run("newer writer's property", func(t *testing.T) {
		dir := t.TempDir()
		writeLog(t, dir, "3\n", createOK,
			commitJSON(2, metaJSON(7, "[]", "[]", testSchema, ""), props(`{"properties":{"tsflight.keep-versions":"10","tsflight.keep-snapshots":"2h","owner":"x"},"note":"ignored"}`)),
			commitJSON(3, props(`{"properties":{"owner":""}}`)))
		tb := mustOpen(t, storage.Local(dir), nil)
		want := map[string]string{"tsflight.keep-versions": "10", PropertyKeepSnapshots: "2h"}
		if st := tb.State(); !maps.Equal(st.Properties, want) || st.KeepSnapshots() != 2*time.Hour {
			t.Fatalf("properties %v", st.Properties)
		}
		// This build may not write the newer writer's property, but it
		// writes its own on the same table.
		if _, err := tb.SetProperties(context.Background(), 3, map[string]string{"tsflight.keep-versions": "3"}); !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("writing an unknown tsflight property: %v", err)
		}
		if _, err := tb.SetProperties(context.Background(), 3, map[string]string{PropertyKeepSnapshots: "1h"}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Commit replays the action first", func(t *testing.T) {
		tb := mustCreateTable(t, storage.NewMem(), CreateOptions{Index: tsIndex(), Schema: tsSchema()}, nil)
		a := SetTableProperties{props: map[string]string{PropertyKeepSnapshots: "later"}}
		if _, err := tb.Commit(context.Background(), 1, []Action{a}); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), PropertyKeepSnapshots) {
			t.Fatalf("commit of a malformed value: %v", err)
		}
	})
}

// TestPropertiesInterop: the 0.9.0 package opens a table with
// SetTableProperties commits (it skips the action), counts its rows with
// SQL and appends to it; tsflight then reads the package's commits with
// the properties intact.
func TestPropertiesInterop(t *testing.T) {
	requireReference(t)
	ctx := context.Background()
	c := interopCases()[0]
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	root := t.TempDir()
	dir := filepath.Join(root, "table")
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: c.spec}, nil)
	recs := c.batches(mem)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	recs[0].Retain()
	rdr := readerOf(t, c.schema, recs[0])
	appendReader(t, ctx, tb, rdr, mem)
	if _, err := tb.SetProperties(ctx, 2, map[string]string{PropertyKeepSnapshots: "48h", "owner": "ops"}); err != nil {
		t.Fatal(err)
	}
	var q struct {
		Rows [][]any `json:"rows"`
	}
	interop(t, &q, "query", dir, "SELECT count(*) AS n FROM t")
	if got := fmt.Sprint(q.Rows); got != fmt.Sprintf("[[%d]]", recs[0].NumRows()) {
		t.Fatalf("0.9.0 counts %s, want %d", got, recs[0].NumRows())
	}
	p := filepath.Join(root, "more.arrows")
	writeIPC(t, p, recs[1])
	var rep struct {
		Appends []struct {
			Version uint64 `json:"version"`
		} `json:"appends"`
	}
	interop(t, &rep, "append", c.pySpec, dir, p)
	if len(rep.Appends) != 1 || rep.Appends[0].Version != 4 {
		t.Fatalf("0.9.0 append: %+v", rep)
	}
	st, err := tb.Refresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Version != 4 || st.Properties["owner"] != "ops" || st.KeepSnapshots() != 48*time.Hour {
		t.Fatalf("after the package's append: version %d, properties %v", st.Version, st.Properties)
	}
	if n, _ := scanCountSum(t, tb, mem, "v"); n != recs[0].NumRows()+recs[1].NumRows() {
		t.Fatalf("tsflight reads %d rows", n)
	}
}

// TestPropertiesSurviveCheckpoint: a table opened from a checkpoint has
// the properties of the version the checkpoint holds, and a table without
// properties writes the checkpoint it always did (the checkpoint head
// carries State.propertiesAction after the coverage pointer).
func TestPropertiesSurviveCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.CheckpointInterval = 3
	tb := mustCreateTable(t, storage.Local(dir), CreateOptions{Index: tsIndex(), Schema: tsSchema()}, opts)
	want := map[string]string{PropertyKeepSnapshots: "1h", "owner": "ops"}
	if _, err := tb.SetProperties(ctx, 1, want); err != nil {
		t.Fatal(err)
	}
	for v := uint64(2); v < 7; v++ { // checkpoints at 3 and 6
		if _, err := tb.Commit(ctx, v, marker(fmt.Sprint(v))); err != nil {
			t.Fatal(err)
		}
	}
	again := mustOpen(t, storage.Local(dir), opts)
	if st := again.State(); st.Version != 7 || !maps.Equal(st.Properties, want) || st.KeepSnapshots() != time.Hour {
		t.Fatalf("opened from a checkpoint: version %d, properties %v", st.Version, st.Properties)
	}
	st, err := again.StateAt(ctx, 6)
	if err != nil || !maps.Equal(st.Properties, want) {
		t.Fatalf("StateAt(6): %v, %v", st, err)
	}
}
