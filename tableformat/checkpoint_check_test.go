package tableformat

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// ckCheckFindings runs the checkpoint part of Check on fsys and returns its
// findings.
func ckCheckFindings(t *testing.T, fsys storage.FS) []CheckFinding {
	t.Helper()
	r, err := runCheck(context.Background(), fsys, ckOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	r.rep.Findings = nil // whatever runCheck found itself
	r.checkCheckpoints(context.Background())
	return r.rep.Findings
}

// Check reports every checkpoint that readers ignore (unreadable, stale),
// one it cannot verify because the log does not replay that far, and, as
// an error, one that is valid and names the commits on disk but holds
// another state than the log, which readers would use.
func TestCheckpointCheck(t *testing.T) {
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, 16)
	if f := ckCheckFindings(t, fsys); len(f) != 0 {
		t.Fatalf("no checkpoints: %v", f)
	}
	for _, v := range []uint64{4, 8, 16} {
		ckWrite(t, fsys, v)
	}
	if f := ckCheckFindings(t, fsys); len(f) != 0 {
		t.Fatalf("good checkpoints: %v", f)
	}
	other := storage.NewMem()
	ckVariedLog(t, other, 10)
	ckPut(t, fsys, checkpointPath(10), ckWrite(t, other, 10))
	data, err := fsys.ReadFile(checkpointPath(8))
	if err != nil {
		t.Fatal(err)
	}
	ckPut(t, fsys, checkpointPath(8), data[:len(data)-3])
	// A checkpoint of 12 with a segment missing: valid on its own, naming
	// the right commits, wrong.
	wrong := ckFull(t, fsys, 12).replayCopy()
	wrong.Segments = wrong.Segments[1:]
	wrong.byPath = nil
	bad, err := encodeCheckpoint(wrong, nil, t0)
	if err != nil {
		t.Fatal(err)
	}
	ckPut(t, fsys, checkpointPath(12), bad)
	got := map[uint64]string{}
	for _, f := range ckCheckFindings(t, fsys) {
		got[f.Version] = string(f.Severity) + " " + f.Code
		if f.Path != checkpointPath(f.Version) || f.Problem == "" || f.Action == "" || f.Repairable {
			t.Errorf("finding %+v", f)
		}
	}
	want := map[uint64]string{8: "warning checkpoint_corrupt", 10: "warning checkpoint_stale", 12: "error checkpoint_mismatch"}
	if len(got) != len(want) {
		t.Fatalf("findings %v, want %v", got, want)
	}
	for v, w := range want {
		if got[v] != w {
			t.Fatalf("findings %v, want %v", got, want)
		}
	}
	// Readers do use the wrong one: that is why it is an error.
	if _, from := ckOpen(t, fsys, nil); from != 16 {
		t.Fatalf("opened from %d", from)
	}
	if err := fsys.Remove(checkpointPath(16)); err != nil {
		t.Fatal(err)
	}
	if st, from := ckOpen(t, fsys, nil); from != 12 || len(st.Segments) == len(ckFull(t, fsys, 16).Segments) {
		t.Fatalf("opened from %d", from)
	}

	// A commit below the newest checkpoint that no longer replays.
	for _, v := range []uint64{8, 10, 12} {
		if err := fsys.Remove(checkpointPath(v)); err != nil {
			t.Fatal(err)
		}
	}
	ckWrite(t, fsys, 16)
	ckPut(t, fsys, CommitPath(14), []byte("{torn"))
	findings := ckCheckFindings(t, fsys)
	if len(findings) != 1 || findings[0].Code != CheckCheckpointUnverified || findings[0].Version != 16 || !strings.Contains(findings[0].Problem, "only up to version 13") {
		t.Fatalf("findings %+v", findings)
	}
	// The directory cannot be listed.
	f := storage.NewFaultFS(fsys)
	f.Inject(storage.Fault{Op: storage.OpList, Match: func(n string) bool { return n == checkpointDir }, Err: errors.New("input/output error")})
	findings = ckCheckFindings(t, f)
	if !slices.ContainsFunc(findings, func(c CheckFinding) bool { return c.Code == CheckCheckpointCorrupt && c.Path == checkpointDir }) {
		t.Fatalf("findings %+v", findings)
	}
}

// Check's checkpoint pass when reads fail: a checkpoint that cannot be
// read, or whose commits cannot be read to compare, is reported as
// unusable; one under another version's name too; a cancelled check
// reports nothing.
func TestCheckpointCheckUnreadable(t *testing.T) {
	ctx := context.Background()
	mem := ckCheckpointedLog(t, 12, 4, 8, 12)
	data, err := mem.ReadFile(checkpointPath(4))
	if err != nil {
		t.Fatal(err)
	}
	ckPut(t, mem, checkpointPath(6), data)
	f := storage.NewFaultFS(mem)
	r, err := runCheck(ctx, f, ckOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	r.rep.Findings = nil
	eio := errors.New("input/output error")
	f.Inject(storage.Fault{Op: storage.OpReadFile, Match: func(n string) bool { return n == checkpointPath(8) || n == CommitPath(12) }, Err: eio})
	r.checkCheckpoints(ctx)
	got := map[uint64]string{}
	for _, c := range r.rep.Findings {
		got[c.Version] = c.Code + ": " + c.Problem
	}
	for v, want := range map[uint64]string{6: "holds version 4", 8: "input/output error", 12: "input/output error"} {
		if !strings.HasPrefix(got[v], CheckCheckpointCorrupt) || !strings.Contains(got[v], want) {
			t.Fatalf("findings %v", got)
		}
	}
	if len(got) != 3 {
		t.Fatalf("findings %v", got)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	r.rep.Findings = nil
	r.checkCheckpoints(cancelled)
	if len(r.rep.Findings) != 0 {
		t.Fatalf("a cancelled check found %v", r.rep.Findings)
	}
}
