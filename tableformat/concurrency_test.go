package tableformat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// commitLoop makes count commits through its own handle on dir, each naming
// itself "<writer>-<seq>", retrying on conflict. Any error other than a
// conflict is returned. It reports how many conflicts it saw.
func commitLoop(ctx context.Context, dir, writer string, count int) (conflicts int, err error) {
	tb, err := Open(ctx, storage.Local(dir), nil)
	if err != nil {
		return 0, err
	}
	for seq := 0; seq < count; {
		st, err := tb.Refresh(ctx)
		if err != nil {
			return conflicts, err
		}
		_, err = tb.Commit(ctx, st.Version, marker(fmt.Sprintf("%s-%d", writer, seq)))
		switch {
		case err == nil:
			seq++
		case errors.Is(err, ErrConflict):
			conflicts++
		default:
			return conflicts, err
		}
	}
	return conflicts, nil
}

// checkMarkers reads every commit of the table at dir and checks that
// versions 2.. hold each expected marker exactly once and nothing else.
func checkMarkers(t *testing.T, dir string, writers []string, count int) {
	t.Helper()
	tb := mustOpen(t, storage.Local(dir), nil)
	want := len(writers)*count + 1
	if v := tb.State().Version; v != uint64(want) {
		t.Fatalf("table at version %d, want %d (1 create + %d commits)", v, want, len(writers)*count)
	}
	seen := map[string]uint64{}
	l := logStore{fs: storage.Local(dir), opts: DefaultOptions()}
	for v := uint64(2); v <= uint64(want); v++ {
		c, err := l.readCommit(v)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Actions) != 1 {
			t.Fatalf("commit %d has %d actions", v, len(c.Actions))
		}
		name := strings.TrimSuffix(strings.TrimPrefix(c.Actions[0].(RemoveSegment).Path, "data/markers/"), ".parquet")
		if prev, dup := seen[name]; dup {
			t.Fatalf("marker %s written twice: versions %d and %d", name, prev, v)
		}
		seen[name] = v
	}
	for _, w := range writers {
		for seq := 0; seq < count; seq++ {
			if _, ok := seen[fmt.Sprintf("%s-%d", w, seq)]; !ok {
				t.Fatalf("commit %s-%d was acknowledged but is not in the log", w, seq)
			}
		}
	}
	if _, err := os.Stat(dir + "/" + CommitPath(uint64(want)+1)); !os.IsNotExist(err) {
		t.Fatalf("a commit beyond version %d exists", want)
	}
}

// TestConcurrentGoroutineWriters: handles in several goroutines commit to
// one table; every version is won exactly once, losers see ErrConflict,
// nothing is lost or duplicated.
func TestConcurrentGoroutineWriters(t *testing.T) {
	dir := t.TempDir()
	mustCreate(t, storage.Local(dir))
	const writers, count = 8, 25
	var wg sync.WaitGroup
	names := make([]string, writers)
	errs := make([]error, writers)
	conflicts := make([]int, writers)
	for i := range writers {
		names[i] = fmt.Sprintf("g%d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			conflicts[i], errs[i] = commitLoop(context.Background(), dir, names[i], count)
		}()
	}
	wg.Wait()
	total := 0
	for i, err := range errs {
		if err != nil {
			t.Fatalf("writer %d: %v", i, err)
		}
		total += conflicts[i]
	}
	t.Logf("%d writers × %d commits, %d conflicts retried", writers, count, total)
	checkMarkers(t, dir, names, count)
}

// TestConcurrentProcessWriters: the same with separate OS processes (this
// test binary re-executed), which share nothing but the directory.
func TestConcurrentProcessWriters(t *testing.T) {
	if os.Getenv("TSFLIGHT_WRITER_DIR") != "" {
		t.Skip("running as a writer process")
	}
	dir := t.TempDir()
	mustCreate(t, storage.Local(dir))
	const writers, count = 4, 25
	names := make([]string, writers)
	cmds := make([]*exec.Cmd, writers)
	outs := make([]*strings.Builder, writers)
	for i := range writers {
		names[i] = fmt.Sprintf("p%d", i)
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriterProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "TSFLIGHT_WRITER_DIR="+dir, "TSFLIGHT_WRITER_NAME="+names[i], "TSFLIGHT_WRITER_COUNT="+strconv.Itoa(count))
		outs[i] = &strings.Builder{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer process %d: %v\n%s", i, err, outs[i])
		}
		if !strings.Contains(outs[i].String(), "writer done") {
			t.Fatalf("writer process %d did not run its loop:\n%s", i, outs[i])
		}
	}
	checkMarkers(t, dir, names, count)
}

// TestWriterProcess is the body of one writer process of
// TestConcurrentProcessWriters; on its own it does nothing.
func TestWriterProcess(t *testing.T) {
	dir := os.Getenv("TSFLIGHT_WRITER_DIR")
	if dir == "" {
		t.Skip("only runs as a child of TestConcurrentProcessWriters")
	}
	count, _ := strconv.Atoi(os.Getenv("TSFLIGHT_WRITER_COUNT"))
	conflicts, err := commitLoop(context.Background(), dir, os.Getenv("TSFLIGHT_WRITER_NAME"), count)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("writer done: %d commits, %d conflicts\n", count, conflicts)
}

// TestStaleHandleConflict: a handle that did not refresh gets a conflict
// naming both versions, and writes nothing.
func TestStaleHandleConflict(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	a := mustCreate(t, mem)
	b := mustOpen(t, mem, nil)
	if _, err := a.Commit(ctx, 1, marker("a")); err != nil {
		t.Fatal(err)
	}
	_, err := b.Commit(ctx, 1, marker("b"))
	var ce *ConflictError
	if !errors.As(err, &ce) || ce.Expected != 1 || ce.Found != 2 || !errors.Is(err, ErrConflict) {
		t.Fatalf("stale commit: %v, want conflict expected 1 found 2", err)
	}
	if !strings.Contains(err.Error(), "expected table version 1, found 2") {
		t.Fatalf("message: %v", err)
	}
	// The handle's own version check catches a wrong expected version.
	if _, err := a.Commit(ctx, 7, marker("x")); !errors.As(err, &ce) || ce.Expected != 7 {
		t.Fatalf("wrong expected version: %v", err)
	}
	if _, err := mem.Stat(CommitPath(3)); !storage.IsNotExist(err) {
		t.Fatal("a conflicting commit left a file")
	}
}

// TestLostCreateRace: CURRENT still says 1 but version 2 exists (another
// writer is between its link and its CURRENT update); the commit loses the
// race rather than overwrite.
func TestLostCreateRace(t *testing.T) {
	ctx := context.Background()
	mem := storage.NewMem()
	a := mustCreate(t, mem)
	b, _ := Open(ctx, mem, nil)
	ffs := storage.NewFaultFS(mem)
	a2, _ := Open(ctx, ffs, nil)
	// a2 commits version 2 but "crashes" before touching CURRENT.
	ffs.Inject(storage.Fault{Op: storage.OpRename, Err: errors.New("stop")})
	if _, err := a2.Commit(ctx, 1, marker("a2")); err != nil {
		t.Fatalf("commit whose CURRENT update failed must still succeed: %v", err)
	}
	_, err := b.Commit(ctx, 1, marker("b"))
	var ce *ConflictError
	if !errors.As(err, &ce) || !ce.LostRace {
		t.Fatalf("got %v, want a lost-race conflict", err)
	}
	if cur, _ := mem.ReadFile(currentPath); string(cur) != "1\n" {
		t.Fatalf("CURRENT = %q; the test needs it left at 1", cur)
	}
	st, err := b.Refresh(ctx)
	if err != nil || st.Version != 2 {
		t.Fatalf("refresh: %v", err)
	}
	if v, err := b.Commit(ctx, 2, marker("b")); err != nil || v != 3 {
		t.Fatalf("retry after refresh: %d, %v", v, err)
	}
	_ = a
}
