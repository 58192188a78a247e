package tableformat

// Checkpoints, writing side: when maybeCheckpoint writes one, what it
// writes (coverage section included), that a failure or a crash at any
// step of the write never fails a commit nor leaves a checkpoint name on a
// partial file, how old checkpoints and temporary files are pruned, and
// that a state the codec cannot reproduce is never written.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/coverage"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// ckList returns the checkpoint versions and temporary names in fsys.
func ckList(t testing.TB, fsys storage.FS) ([]uint64, []string) {
	t.Helper()
	vs, temps, err := (&logStore{fs: fsys, opts: ckOptions(nil)}).listCheckpoints()
	if err != nil {
		t.Fatal(err)
	}
	return vs, temps
}

// ckAllValid fails unless every checkpoint name in fsys (but those in
// except) holds a checkpoint that decodes: a name never refers to a
// partial file.
func ckAllValid(t testing.TB, fsys storage.FS, what string, except ...uint64) {
	t.Helper()
	vs, _ := ckList(t, fsys)
	for _, v := range vs {
		if slices.Contains(except, v) {
			continue
		}
		data, err := fsys.ReadFile(checkpointPath(v))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if _, _, err := decodeCheckpoint(data); err != nil {
			t.Fatalf("%s: checkpoint %d does not decode: %v", what, v, err)
		}
	}
}

// ckCommitAndCheckpoint commits a marker and then asks for a checkpoint,
// as the committer does after each commit.
func ckCommitAndCheckpoint(t testing.TB, tb *Table, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := tb.Commit(ctx, tb.State().Version, marker(name)); err != nil {
		t.Fatal(err)
	}
	tb.maybeCheckpoint(ctx, tb.State())
}

// Checkpoints are written at multiples of the interval, and when the
// newest is an interval behind (its multiple was committed by a handle
// that writes none); zero or a negative interval writes none; asking twice
// for one version writes it once.
func TestMaybeCheckpointSchedule(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{0, -3} {
		fsys := storage.NewMem()
		opts := ckEvery(nil, n)
		tb := mustCreateTable(t, fsys, CreateOptions{Index: tsIndex()}, opts)
		for i := range 12 {
			ckCommitAndCheckpoint(t, tb, fmt.Sprint(i))
		}
		if vs, _ := ckList(t, fsys); len(vs) != 0 {
			t.Fatalf("interval %d wrote checkpoints %v", n, vs)
		}
	}

	fsys := storage.NewMem()
	ckVariedLog(t, fsys, 9) // by a handle that writes none
	f := storage.NewFaultFS(fsys)
	opts := ckEvery(nil, 4)
	tb := mustOpen(t, f, opts)
	var got [][]uint64
	for v := 10; v <= 17; v++ {
		ckCommitAndCheckpoint(t, tb, fmt.Sprint(v))
		vs, _ := ckList(t, fsys)
		got = append(got, vs)
	}
	want := [][]uint64{{10}, {10}, {10, 12}, {10, 12}, {10, 12}, {10, 12}, {10, 12, 16}, {10, 12, 16}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("checkpoints after commits 10..17: %v, want %v", got, want)
	}
	creates := f.CountOps(storage.OpCreateExclusive)
	tb.maybeCheckpoint(ctx, tb.State()) // 17: not due
	st16 := mustStateAt(t, tb, 16)
	tb.maybeCheckpoint(ctx, st16) // already written
	if f.CountOps(storage.OpCreateExclusive) != creates {
		t.Fatal("a checkpoint that was not due was written")
	}
	// Another handle (which knows nothing of 16) writing 16 again: the
	// link finds the name taken, which is success.
	if err := ckStore(fsys, nil).writeCheckpoint(st16, nil); err != nil {
		t.Fatalf("second writer of checkpoint 16: %v", err)
	}
	if _, temps := ckList(t, fsys); len(temps) != 0 {
		t.Fatalf("temporary files left: %v", temps)
	}
	// A handle opened from checkpoint 16 at version 21 (committed by a
	// handle that writes none) is 5 behind.
	quiet := mustOpen(t, fsys, ckOptions(nil))
	for range 4 {
		if _, err := quiet.Commit(ctx, quiet.State().Version, marker("x")); err != nil {
			t.Fatal(err)
		}
	}
	tb2 := mustOpen(t, fsys, opts)
	tb2.maybeCheckpoint(ctx, tb2.State())
	if vs, _ := ckList(t, fsys); !slices.Equal(vs, []uint64{12, 16, 21}) {
		t.Fatalf("checkpoints %v, want the overdue one at 21", vs)
	}
}

// Pruning keeps the newest three at or below the new checkpoint, removes
// stale and junk checkpoints above it and temporary files older than the
// grace period, and leaves a younger temporary file and a checkpoint of an
// unknown format above it alone.
func TestCheckpointPrune(t *testing.T) {
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, 15)
	other := storage.NewMem()
	ckVariedLog(t, other, 14)
	stale := ckWrite(t, other, 14) // another table's
	for v := uint64(1); v <= 9; v++ {
		ckWrite(t, fsys, v)
	}
	if vs, _ := ckList(t, fsys); !slices.Equal(vs, []uint64{7, 8, 9}) {
		t.Fatalf("after 9 checkpoints: %v", vs)
	}
	oldTemp := checkpointDir + "/.00000000000000000005.checkpoint.partial-00000000000000aa"
	youngTemp := checkpointDir + "/.00000000000000000006.checkpoint.partial-00000000000000bb"
	ckPut(t, fsys, oldTemp, []byte("left by a crash"))
	ckPut(t, fsys, youngTemp, []byte("being written"))
	if err := fsys.SetModTime(oldTemp, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	ckPut(t, fsys, checkpointPath(14), stale)
	ckPut(t, fsys, checkpointPath(13), []byte("junk"))
	future := ckPartsOf(t, ckWrite(t, other, 12))
	future.format = 2
	ckPut(t, fsys, checkpointPath(15), future.bytes())
	ckPut(t, fsys, checkpointPath(11), []byte("junk above"))
	ckWrite(t, fsys, 10)
	vs, temps := ckList(t, fsys)
	if !slices.Equal(vs, []uint64{8, 9, 10, 15}) {
		t.Fatalf("after checkpoint 10: %v, want 8 9 10 15", vs)
	}
	if !slices.Equal(temps, []string{youngTemp[len(checkpointDir)+1:]}) {
		t.Fatalf("temporary files %v", temps)
	}
	ckWrite(t, fsys, 12)
	if vs, _ := ckList(t, fsys); !slices.Equal(vs, []uint64{9, 10, 12, 15}) {
		t.Fatalf("after checkpoint 12: %v", vs)
	}
	st, from := ckOpen(t, fsys, nil)
	ckSame(t, "open", st, ckFull(t, fsys, 15))
	if from != 12 {
		t.Fatalf("started from %d", from)
	}
}

// An error at any step of writing a checkpoint: the commit that asked for
// it stands, a warning is logged, no checkpoint name refers to a partial
// file, the temporary file is removed (unless removing it is what fails),
// and the table opens with the state of a full replay.
func TestCheckpointWriteFaults(t *testing.T) {
	ctx := context.Background()
	base := ckCheckpointedLog(t, 11, 4, 6, 8)
	ckPut(t, base, checkpointPath(20), []byte("stale junk above")) // makes pruning open a header
	eio := errors.New("no space left on device")
	inCk := func(n string) bool { return strings.HasPrefix(n, checkpointDir) }
	isTemp := func(n string) bool { return strings.Contains(n, ".partial-") }
	cases := []struct {
		name     string
		fault    storage.Fault
		fresh    bool   // no checkpoint directory yet
		wantLog  string // "" when the checkpoint is written without a warning
		wantDone bool   // the checkpoint of 12 exists afterwards
		tempLeft bool
	}{
		{"stat of the directory", storage.Fault{Op: storage.OpStat, Match: func(n string) bool { return n == checkpointDir }}, false, "stat " + checkpointDir, false, false},
		{"create the directory", storage.Fault{Op: storage.OpMkdirAll, Match: inCk}, true, "create " + checkpointDir, false, false},
		{"sync the log directory", storage.Fault{Op: storage.OpSyncDir, Match: func(n string) bool { return n == LogDir }}, true, "sync " + LogDir, false, false},
		{"create the temporary file", storage.Fault{Op: storage.OpCreateExclusive, Match: isTemp}, false, "create ", false, false},
		{"write", storage.Fault{Op: storage.OpWrite, Match: isTemp}, false, "write ", false, false},
		{"sync", storage.Fault{Op: storage.OpSync, Match: isTemp}, false, "write ", false, false},
		{"close", storage.Fault{Op: storage.OpClose, Match: isTemp}, false, "write ", false, false},
		{"link", storage.Fault{Op: storage.OpLink, Match: isTemp}, false, "link ", false, false},
		{"link done, then an error", storage.Fault{Op: storage.OpLink, Match: isTemp, After: true}, false, "link ", true, false},
		{"sync of the checkpoint directory", storage.Fault{Op: storage.OpSyncDir, Match: inCk, Nth: 1}, false, "sync " + checkpointDir, true, false},
		{"remove the temporary file", storage.Fault{Op: storage.OpRemove, Match: isTemp}, false, "could not remove temporary file", true, true},
		{"list for pruning", storage.Fault{Op: storage.OpList, Match: inCk, Nth: 1}, false, "cannot list checkpoints to prune", true, false},
		{"open a header for pruning", storage.Fault{Op: storage.OpOpen, Match: func(n string) bool { return n == checkpointPath(20) }}, false, "", true, false},
		{"remove an old checkpoint", storage.Fault{Op: storage.OpRemove, Match: func(n string) bool { return n == checkpointPath(4) }}, false, "cannot remove an old checkpoint", true, false},
		{"sync after pruning", storage.Fault{Op: storage.OpSyncDir, Match: inCk, Nth: 2}, false, "cannot sync the checkpoint directory after pruning", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := base.CrashClone()
			if c.fresh {
				for _, n := range []string{checkpointPath(4), checkpointPath(6), checkpointPath(8), checkpointPath(20), checkpointDir} {
					if err := mem.Remove(n); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The commit is made by a handle that writes no checkpoints;
			// the one that does is opened on the faulty file system.
			committer := mustOpen(t, mem, ckOptions(nil))
			ckCommit := func(name string) *State {
				t.Helper()
				if _, err := committer.Commit(ctx, committer.State().Version, marker(name)); err != nil {
					t.Fatal(err)
				}
				return committer.State()
			}
			st12 := ckCommit("twelve")
			f := storage.NewFaultFS(mem)
			buf := &lockedBuffer{}
			opts := ckEvery(buf, 12)
			tb := mustOpen(t, f, opts)
			mark := len(buf.String()) // the open warns about the junk checkpoint
			c.fault.Err = eio
			f.Inject(c.fault)
			tb.maybeCheckpoint(ctx, st12)
			logged := buf.String()[mark:]
			if c.wantLog == "" {
				// (st12 points at a coverage snapshot that does not
				// exist: that is logged, and nothing else.)
				if strings.Contains(logged, "could not") || strings.Contains(logged, "cannot") {
					t.Fatalf("unexpected log: %s", logged)
				}
			} else if !strings.Contains(logged, c.wantLog) || !strings.Contains(logged, "no space left") {
				t.Fatalf("log %q, want %q", logged, c.wantLog)
			}
			vs, temps := ckList(t, mem)
			if slices.Contains(vs, 12) != c.wantDone {
				t.Fatalf("checkpoints %v; want checkpoint 12 written: %v", vs, c.wantDone)
			}
			if (len(temps) > 0) != c.tempLeft {
				t.Fatalf("temporary files %v", temps)
			}
			ckAllValid(t, mem, c.name, 20) // 20 is the planted junk
			st, _ := ckOpen(t, mem, nil)
			ckSame(t, c.name, st, ckFull(t, mem, 12))
			// A failed attempt is not retried before the next interval.
			before := len(f.Trace())
			tb.maybeCheckpoint(ctx, ckCommit("thirteen"))
			if len(f.Trace()) != before {
				t.Fatalf("checkpoint 13 was attempted: %v", f.Trace()[before:])
			}
		})
	}
}

// A crash (power loss) at every step of writing a checkpoint, before or
// after the step takes effect, into a fresh directory and into one that is
// pruned: what survives opens with the state of a full replay, and every
// checkpoint name that survives holds a whole checkpoint.
func TestCheckpointCrashAtEveryStep(t *testing.T) {
	for _, fresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			base := storage.NewMem()
			ckVariedLog(t, base, 12)
			if !fresh {
				for _, v := range []uint64{3, 6, 9} {
					ckWrite(t, base, v)
				}
			}
			st := ckFull(t, base, 12)
			want := st
			dry := storage.NewFaultFS(base.CrashClone())
			if err := ckStore(dry, nil).writeCheckpoint(st, []byte(nil)); err != nil {
				t.Fatal(err)
			}
			trace := dry.Trace()
			if len(trace) < 6 {
				t.Fatalf("trace %v", trace)
			}
			survived := map[bool]int{}
			for k, ev := range trace {
				nth := 0
				for _, e := range trace[:k+1] {
					if e.Op == ev.Op {
						nth++
					}
				}
				for _, after := range []bool{false, true} {
					mem := base.CrashClone()
					f := storage.NewFaultFS(mem)
					f.Inject(storage.Fault{Op: ev.Op, Nth: nth, After: after})
					err := ckStore(f, nil).writeCheckpoint(st, nil)
					if !f.Crashed() {
						t.Fatalf("step %d (%v): no crash", k, ev)
					}
					if err == nil && !(ev.Op == storage.OpRemove || ev.Op == storage.OpList || ev.Op == storage.OpSyncDir || ev.Op == storage.OpOpen || ev.Op == storage.OpStat) {
						t.Fatalf("step %d (%v): the write reported success through a crash", k, ev)
					}
					left := mem.CrashClone()
					what := fmt.Sprintf("crash at step %d (%v, after=%v)", k, ev, after)
					ckAllValid(t, left, what)
					got, from := ckOpen(t, left, nil)
					ckSame(t, what, got, want)
					survived[from == 12]++
				}
			}
			if survived[true] == 0 || survived[false] == 0 {
				t.Fatalf("checkpoint 12 survived %d crashes and was lost in %d: the trial covers too little", survived[true], survived[false])
			}
		})
	}
}

// A state the codec cannot reproduce exactly is never written: encoding
// errors, bytes that do not decode, and bytes that decode to another
// state all stop the write with a warning (and no file).
func TestCheckpointSelfCheckRefuses(t *testing.T) {
	ctx := context.Background()
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, 12)
	good := ckFull(t, fsys, 12)
	withSeg := func(mut func(s *SegmentMeta)) *State {
		st := good.replayCopy()
		mut(&st.Segments[0])
		return st
	}
	noDigest := good.replayCopy()
	noDigest.digest = commitDigest{}
	cases := []struct {
		name string
		st   *State
		want string
	}{
		{"no state", &State{}, "no state"},
		{"no digests", noDigest, "does not know the digests"},
		{"layout", withSeg(func(s *SegmentMeta) { s.Layout.Kind = "Scattered" }), "unknown entity layout"},
		{"entity type", withSeg(func(s *SegmentMeta) { s.Layout.Identity = Identity{{Type: 9}} }), "unknown entity type"},
		{"index type", withSeg(func(s *SegmentMeta) { s.IndexMax.Type = "float" }), "unknown index value type"},
		{"int32 out of range", withSeg(func(s *SegmentMeta) { s.Layout.Identity = Identity{{Type: EntityInt32, Int: math.MaxInt64}} }), "does not decode"},
		{"a time not in UTC", withSeg(func(s *SegmentMeta) { s.IndexMin.Time = s.IndexMin.Time.In(time.FixedZone("X", 3600)) }), "decodes to another state"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := ckStore(fsys, nil).writeCheckpoint(c.st, nil); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("write: %v, want %q", err, c.want)
			}
			buf := &lockedBuffer{}
			opts := ckEvery(buf, 1)
			tb := mustOpen(t, fsys, opts)
			if c.st.Version == 0 {
				c.st.Version = 13 // not the handle's, but due
			}
			tb.maybeCheckpoint(ctx, c.st)
			if !strings.Contains(buf.String(), "could not write a checkpoint") || !strings.Contains(buf.String(), c.want) {
				t.Fatalf("log %q", buf.String())
			}
			if vs, temps := ckList(t, fsys); len(vs) != 0 || len(temps) != 0 {
				t.Fatalf("files written: %v %v", vs, temps)
			}
		})
	}
}

// appendOne appends one row (host h at second sec) to tb.
func appendOne(t testing.TB, tb *Table, sec int64) {
	t.Helper()
	rec := inBatch(memory.DefaultAllocator, row{sec, "h", sec})
	rdr, err := array.NewRecordReader(inSchema(), []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if _, err := tb.Append(context.Background(), rdr, nil); err != nil {
		t.Fatal(err)
	}
}

// The coverage section is the table coverage of the checkpoint's version,
// handed out with the seed; when the coverage does not load, the
// checkpoint is written without one.
func TestCheckpointCoverageSection(t *testing.T) {
	ctx := context.Background()
	fsys := storage.NewMem()
	opts := ckEvery(nil, 3)
	tb := mustCreateTable(t, fsys, CreateOptions{Index: tsIndex()}, opts)
	for i := range int64(10) {
		appendOne(t, tb, i*10)
		tb.maybeCheckpoint(ctx, tb.State())
	}
	if vs, _ := ckList(t, fsys); !slices.Equal(vs, []uint64{3, 6, 9}) {
		t.Fatalf("checkpoints %v", vs)
	}
	l := ckStore(fsys, nil)
	st, _, err := l.replay(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ckSame(t, "open", st, ckFull(t, fsys, 11))
	seed, cov := l.takeCheckpointSeed()
	if seed.versionOrZero() != 9 || cov == nil {
		t.Fatalf("seed %d with %d coverage bytes", seed.versionOrZero(), len(cov))
	}
	fresh := mustOpen(t, fsys, ckOptions(nil))
	c, err := fresh.loadCoverage(ctx, seed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cov, c.encode()) {
		t.Fatal("the coverage section is not the table coverage of version 9")
	}
	set, err := coverage.Decode(cov, true)
	if err != nil || !set.IsEntity() {
		t.Fatalf("coverage section: %v", err)
	}
	if seed.Coverage == nil || seed.Coverage.Path != ckFull(t, fsys, 9).Coverage.Path {
		t.Fatal("the seed's coverage pointer is not version 9's")
	}

	// Pointers to snapshots that do not exist, segments without sidecars.
	other := storage.NewMem()
	ckVariedLog(t, other, 12)
	buf := &lockedBuffer{}
	o := ckOptions(buf)
	o.CheckpointInterval = 12
	tb2 := mustOpen(t, other, o)
	tb2.maybeCheckpoint(ctx, tb2.State())
	if !strings.Contains(buf.String(), "without its coverage section") {
		t.Fatalf("log %q", buf.String())
	}
	data, err := other.ReadFile(checkpointPath(12))
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := parseCheckpointHeader(data); h.flags != 0 || h.covLen != 0 {
		t.Fatalf("flags %d, coverage %d bytes", h.flags, h.covLen)
	}
	l2 := ckStore(other, nil)
	if _, _, err := l2.replay(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if s, c := l2.takeCheckpointSeed(); s.versionOrZero() != 12 || c != nil {
		t.Fatalf("seed %d with coverage %v", s.versionOrZero(), c)
	}
}

// ckEqual is ckSame for goroutines: true when the states are the same.
func ckEqual(a, b *State) bool {
	if a != nil && b != nil && len(a.Segments) == 0 && len(b.Segments) == 0 {
		a2 := *a
		a2.Segments = b.Segments
		a = &a2
	}
	return reflect.DeepEqual(a, b)
}

// Writers checkpointing on every commit (two handles, so that both race
// for the same names) while readers open the table over and over: every
// open gives the state of a full replay at its version.
func TestCheckpointConcurrentReadersAndWriters(t *testing.T) {
	ctx := context.Background()
	fsys := storage.NewMem()
	opts := ckEvery(nil, 1)
	w1 := mustCreateTable(t, fsys, CreateOptions{Index: tsIndex()}, opts)
	w2 := mustOpen(t, fsys, opts)
	const commits = 60
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := 0; i < commits; i++ {
			w := []*Table{w1, w2}[i%2]
			if _, err := w.Refresh(ctx); err != nil {
				fail("refresh: %v", err)
				return
			}
			if _, err := w.Commit(ctx, w.State().Version, marker(fmt.Sprint(i))); err != nil {
				fail("commit: %v", err)
				return
			}
			w.maybeCheckpoint(ctx, w.State())
			other := []*Table{w2, w1}[i%2] // the other handle writes the same one
			if err := other.log.writeCheckpoint(w.State(), nil); err != nil {
				fail("second write: %v", err)
			}
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-done:
					if n == 0 {
						fail("a reader never ran")
					}
					return
				default:
				}
				l := &logStore{fs: fsys, opts: ckOptions(nil)}
				st, _, err := l.replay(ctx, nil)
				if err != nil {
					fail("replay: %v", err)
					return
				}
				want, err := (&logStore{fs: fsys, opts: ckOptions(nil)}).replayLogTo(ctx, st.Version)
				if err != nil {
					fail("full replay: %v", err)
					return
				}
				if !ckEqual(st, want) {
					fail("the state at version %d differs from a full replay", st.Version)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatal(strings.Join(failures, "\n"))
	}
	ckAllValid(t, fsys, "after the race")
	if vs, temps := ckList(t, fsys); len(vs) != checkpointKeep || vs[len(vs)-1] != commits+1 || len(temps) != 0 {
		t.Fatalf("checkpoints %v, temporary files %v", vs, temps)
	}
}

// The remaining corners of the write path: a head nested deeper than
// readers accept is refused by the commit encoder; nil, cancelled and
// not-due calls do nothing; a listing that fails when the handle thinks a
// checkpoint is overdue writes none.
func TestCheckpointWriteCorners(t *testing.T) {
	ctx := context.Background()
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, 12)
	deep := ckFull(t, fsys, 12).replayCopy()
	m := deep.Meta.Clone()
	f := Field{Name: "leaf", Type: DataType{Kind: TypeInt64}, Nullable: true}
	for range 40 {
		f = Field{Name: "s", Type: DataType{Kind: TypeStruct, Fields: []Field{f}}, Nullable: true}
	}
	m.Schema = &Schema{Columns: append(slices.Clone(m.Schema.Columns), f)}
	deep.Meta = m
	if err := ckStore(fsys, nil).writeCheckpoint(deep, nil); err == nil || !strings.Contains(err.Error(), "nests") {
		t.Fatalf("a head nested too deep: %v", err)
	}

	f2 := storage.NewFaultFS(fsys)
	opts := ckEvery(nil, 5)
	tb := mustOpen(t, f2, opts)
	st := tb.State()
	before := len(f2.Trace())
	tb.maybeCheckpoint(ctx, nil)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	tb.maybeCheckpoint(cancelled, st)
	// Behind (no checkpoint, version 12 ≥ 5) but the listing fails.
	f2.Inject(storage.Fault{Op: storage.OpList, Match: func(n string) bool { return n == checkpointDir }, Err: errors.New("EIO")})
	tb.maybeCheckpoint(ctx, st)
	for _, e := range f2.Trace()[before:] {
		if e.Op != storage.OpList {
			t.Fatalf("a call that writes no checkpoint did %v", e)
		}
	}
	if vs, _ := ckList(t, fsys); len(vs) != 0 {
		t.Fatalf("checkpoints %v", vs)
	}
	if st, err := ckStore(fsys, nil).replayLogTo(ctx, 0); st != nil || err != nil {
		t.Fatalf("replayLogTo(0): %v, %v", st, err)
	}
}
