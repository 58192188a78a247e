package storage

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

var errBoom = errors.New("boom")

func TestOpString(t *testing.T) {
	seen := map[string]bool{}
	for op := OpReadFile; op <= OpSyncDir; op++ {
		s := op.String()
		if s == "" || strings.HasPrefix(s, "Op(") || seen[s] {
			t.Errorf("Op %d has name %q", int(op), s)
		}
		seen[s] = true
	}
	if got := OpRename.String(); got != "Rename" {
		t.Errorf("OpRename.String() = %q", got)
	}
	if got := Op(0).String(); got != "Op(0)" {
		t.Errorf("Op(0).String() = %q", got)
	}
	if got := Op(99).String(); got != "Op(99)" {
		t.Errorf("Op(99).String() = %q", got)
	}
}

func TestFaultBeforeHasNoEffect(t *testing.T) {
	mem := NewMem()
	writeFile(t, mem, "a", "A")
	f := NewFaultFS(mem)
	f.Inject(
		Fault{Op: OpCreate, Err: errBoom},
		Fault{Op: OpRename, Err: errBoom},
		Fault{Op: OpLink, Err: errBoom},
		Fault{Op: OpRemove, Err: errBoom},
		Fault{Op: OpMkdirAll, Err: errBoom},
	)
	before := mem.String()
	if w, err := f.Create("new"); !errors.Is(err, errBoom) || w != nil {
		t.Fatalf("Create = %v, %v; want errBoom", w, err)
	} else if !strings.Contains(err.Error(), "Create new") {
		t.Errorf("error %q does not name the call and path", err)
	}
	for name, err := range map[string]error{
		"Rename":   f.Rename("a", "b"),
		"Link":     f.Link("a", "b"),
		"Remove":   f.Remove("a"),
		"MkdirAll": f.MkdirAll("d"),
	} {
		if !errors.Is(err, errBoom) {
			t.Errorf("%s = %v, want errBoom", name, err)
		}
	}
	if after := mem.String(); after != before {
		t.Fatalf("the inner FS changed:\n%s\nwas\n%s", after, before)
	}
	wantContent(t, f, "a", "A") // reads are not faulted
	if f.Crashed() {
		t.Fatalf("Crashed after error faults")
	}
}

func TestFaultAfterHasEffect(t *testing.T) {
	mem := NewMem()
	writeFile(t, mem, "a", "A")
	f := NewFaultFS(mem)
	f.Inject(
		Fault{Op: OpRename, After: true, Err: errBoom},
		Fault{Op: OpCreateExclusive, After: true, Err: errBoom},
		Fault{Op: OpReadFile, After: true, Err: errBoom},
	)
	if err := f.Rename("a", "b"); !errors.Is(err, errBoom) {
		t.Fatalf("Rename = %v, want errBoom", err)
	}
	wantNotExist(t, mem, "a")
	wantContent(t, mem, "b", "A")
	if _, err := f.CreateExclusive("c"); !errors.Is(err, errBoom) {
		t.Fatalf("CreateExclusive = %v, want errBoom", err)
	}
	wantContent(t, mem, "c", "")
	if b, err := f.ReadFile("b"); !errors.Is(err, errBoom) || b != nil {
		t.Fatalf("ReadFile = %q, %v; want nil, errBoom", b, err)
	}
}

func TestFaultNth(t *testing.T) {
	mem := NewMem()
	f := NewFaultFS(mem)
	f.Inject(Fault{Op: OpWrite, Nth: 2, Err: errBoom})
	w, err := f.Create("f")
	if err != nil {
		t.Fatal(err)
	}
	var errs []error
	for _, s := range []string{"1", "2", "3"} {
		_, err := w.Write([]byte(s))
		errs = append(errs, err)
	}
	if errs[0] != nil || !errors.Is(errs[1], errBoom) || errs[2] != nil {
		t.Fatalf("Write errors = %v, want only the second to fail", errs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	wantContent(t, mem, "f", "13")

	// Nth 0 fails every matching call.
	f.Inject(Fault{Op: OpStat, Err: errBoom})
	for i := range 3 {
		if _, err := f.Stat("f"); !errors.Is(err, errBoom) {
			t.Fatalf("Stat #%d = %v, want errBoom", i+1, err)
		}
	}

	// Reset restarts the count.
	f.Reset()
	if len(f.Trace()) != 0 {
		t.Fatalf("trace not empty after Reset: %v", f.Trace())
	}
	w, err = f.Create("g")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.Write([]byte("a"))
	if _, err := w.Write([]byte("b")); !errors.Is(err, errBoom) {
		t.Fatalf("second Write after Reset = %v, want errBoom", err)
	}
}

func TestFaultMatch(t *testing.T) {
	mem := NewMem()
	f := NewFaultFS(mem)
	inData := func(name string) bool { return strings.HasPrefix(name, "data/") }
	f.Inject(
		Fault{Op: OpCreate, Match: inData, Err: errBoom},
		Fault{Op: OpRename, Match: inData, Nth: 1, Err: errBoom},
	)
	writeFile(t, f, "tmp/x", "x")
	if _, err := f.Create("data/x"); !errors.Is(err, errBoom) {
		t.Fatalf("Create(data/x) = %v, want errBoom", err)
	}
	if err := f.Rename("tmp/x", "tmp/y"); err != nil {
		t.Fatalf("Rename within tmp: %v", err)
	}
	if err := f.MkdirAll("data"); err != nil {
		t.Fatal(err)
	}
	// Match sees the new name of a Rename too; Nth counts matching calls only.
	if err := f.Rename("tmp/y", "data/y"); !errors.Is(err, errBoom) {
		t.Fatalf("Rename into data = %v, want errBoom", err)
	}
	if err := f.Rename("tmp/y", "data/y"); err != nil {
		t.Fatalf("second Rename into data: %v", err)
	}
	wantContent(t, mem, "data/y", "x")
}

func TestFaultCrash(t *testing.T) {
	mem := NewMem()
	// A second FaultFS between the first and the MemFS shows what reaches it.
	probe := NewFaultFS(mem)
	f := NewFaultFS(probe)
	early := create(t, f, "early", "e")
	writeFile(t, f, "r", "readable")
	r, err := f.Open("r")
	if err != nil {
		t.Fatal(err)
	}
	f.Inject(Fault{Op: OpSync, Match: func(n string) bool { return n == "f" }})
	w := create(t, f, "f", "data")
	if f.Crashed() {
		t.Fatalf("Crashed before the crash")
	}
	if err := w.Sync(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("crashing Sync = %v, want ErrCrashed", err)
	}
	if !f.Crashed() {
		t.Fatalf("Crashed() = false after the crash")
	}
	reached := len(probe.Trace())
	state := mem.String()

	_, werr := early.Write([]byte("more"))
	_, rerr := r.ReadAt(make([]byte, 1), 0)
	_, ferr := f.ReadFile("r")
	_, cerr := f.Create("g")
	_, lerr := f.List(".")
	for name, err := range map[string]error{
		"Write on a file opened earlier":  werr,
		"Sync on a file opened earlier":   early.Sync(),
		"ReadAt on a reader opened early": rerr,
		"ReadFile":                        ferr,
		"Create":                          cerr,
		"List":                            lerr,
		"Rename":                          f.Rename("r", "s"),
		"Remove":                          f.Remove("r"),
		"SyncDir":                         f.SyncDir("."),
		"Close":                           w.Close(),
	} {
		if !errors.Is(err, ErrCrashed) {
			t.Errorf("%s after the crash = %v, want ErrCrashed", name, err)
		}
	}
	if got := probe.Trace()[reached:]; len(got) != 0 {
		t.Fatalf("calls reached the inner FS after the crash: %v", got)
	}
	if got := mem.String(); got != state {
		t.Fatalf("the inner FS changed after the crash:\n%s\nwas\n%s", got, state)
	}
	// The crashing Sync did not run: nothing of f is durable, while r,
	// synced before, is.
	if fi, err := mem.Stat("f"); err != nil || fi.Size != 4 {
		t.Fatalf("Stat(f) = %+v, %v", fi, err)
	}
	mustSyncDir(t, mem, ".") // as the test, not as the crashed process
	c := mem.CrashClone()
	wantContent(t, c, "f", "")
	wantContent(t, c, "r", "readable")
}

func TestFaultCrashAfter(t *testing.T) {
	mem := NewMem()
	f := NewFaultFS(mem)
	f.Inject(Fault{Op: OpSync, After: true})
	w := create(t, f, "f", "data")
	if err := w.Sync(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Sync = %v, want ErrCrashed", err)
	}
	if err := f.SyncDir("."); !errors.Is(err, ErrCrashed) {
		t.Fatalf("SyncDir = %v, want ErrCrashed", err)
	}
	mustSyncDir(t, mem, ".") // as the test, not as the crashed process
	wantContent(t, mem.CrashClone(), "f", "data")
}

func TestFaultTrace(t *testing.T) {
	f := NewFaultFS(NewMem())
	w, _ := f.CreateExclusive("d/a")
	w.Write([]byte("x"))
	w.Sync()
	w.Close()
	f.SyncDir("d")
	f.Link("d/a", "d/b")
	f.Rename("d/b", "c")
	f.Stat("c")
	f.Remove("c")
	f.ReadFile("d/a")
	f.List("d")
	f.MkdirAll("e")
	r, _ := f.Open("d/a")
	r.Close()
	f.Create("../bad")
	want := []Event{
		{OpCreateExclusive, "d/a", ""},
		{OpWrite, "d/a", ""},
		{OpSync, "d/a", ""},
		{OpClose, "d/a", ""},
		{OpSyncDir, "d", ""},
		{OpLink, "d/a", "d/b"},
		{OpRename, "d/b", "c"},
		{OpStat, "c", ""},
		{OpRemove, "c", ""},
		{OpReadFile, "d/a", ""},
		{OpList, "d", ""},
		{OpMkdirAll, "e", ""},
		{OpOpen, "d/a", ""},
		{OpCreate, "../bad", ""},
	}
	if got := f.Trace(); !slices.Equal(got, want) {
		t.Fatalf("Trace =\n%v\nwant\n%v", got, want)
	}
	if n := f.CountOps(OpWrite); n != 1 {
		t.Errorf("CountOps(OpWrite) = %d, want 1", n)
	}
	if n := f.CountOps(OpRemove); n != 1 {
		t.Errorf("CountOps(OpRemove) = %d, want 1", n)
	}
	if s := (Event{OpRename, "a", "b"}).String(); s != "Rename a b" {
		t.Errorf("Event.String() = %q", s)
	}
}

// commit publishes content as name the crash-safe way.
func commit(fsys FS, name, content string) error {
	w, err := fsys.Create("tmp/" + name)
	if err != nil {
		return err
	}
	if _, err := w.Write([]byte(content[:len(content)/2])); err != nil {
		return err
	}
	if _, err := w.Write([]byte(content[len(content)/2:])); err != nil {
		return err
	}
	if err := w.Sync(); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := fsys.Rename("tmp/"+name, "data/"+name); err != nil {
		return err
	}
	return fsys.SyncDir("data")
}

// TestCrashAtEveryStep crashes a commit at each of its calls, before and
// after the call, and checks that what survives is the old or the new
// content, never a mix, and the new one once the commit has returned.
func TestCrashAtEveryStep(t *testing.T) {
	base := func() *MemFS {
		m := NewMem()
		writeFile(t, m, "data/v", "old content")
		mustSyncDir(t, m, "data")
		return m
	}
	rec := NewFaultFS(base())
	if err := commit(rec, "v", "new content"); err != nil {
		t.Fatal(err)
	}
	trace := rec.Trace()
	if len(trace) != 7 {
		t.Fatalf("unexpected trace %v", trace)
	}
	for i, e := range trace {
		nth := 0
		for _, p := range trace[:i+1] {
			if p.Op == e.Op {
				nth++
			}
		}
		for _, after := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v#%d/after=%v", e.Op, nth, after), func(t *testing.T) {
				m := base()
				f := NewFaultFS(m)
				f.Inject(Fault{Op: e.Op, Nth: nth, After: after})
				if err := commit(f, "v", "new content"); !errors.Is(err, ErrCrashed) {
					t.Fatalf("commit = %v, want ErrCrashed", err)
				}
				got := readString(t, m.CrashClone(), "data/v")
				want := "old content"
				if after && i == len(trace)-1 {
					want = "new content" // the final SyncDir ran
				}
				if got != want {
					t.Fatalf("after the crash data/v = %q, want %q\n%s", got, want, m)
				}
			})
		}
	}
}
