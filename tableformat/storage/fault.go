package storage

import (
	"errors"
	"fmt"
	"sync"
)

// Op names a call on an [FS] or on a [File] it returned, for [FaultFS].
// The zero Op names no call.
type Op int

// The calls a FaultFS records and can fail. OpWrite, OpSync and OpClose are
// calls on a File returned by Create or CreateExclusive, and carry the name
// that file was created with.
const (
	OpReadFile Op = iota + 1
	OpOpen
	OpStat
	OpCreate
	OpCreateExclusive
	OpWrite
	OpSync
	OpClose
	OpLink
	OpRename
	OpRemove
	OpList
	OpMkdirAll
	OpSyncDir
	OpExchange
)

var opNames = [...]string{
	OpReadFile:        "ReadFile",
	OpOpen:            "Open",
	OpStat:            "Stat",
	OpCreate:          "Create",
	OpCreateExclusive: "CreateExclusive",
	OpWrite:           "Write",
	OpSync:            "Sync",
	OpClose:           "Close",
	OpLink:            "Link",
	OpRename:          "Rename",
	OpRemove:          "Remove",
	OpList:            "List",
	OpMkdirAll:        "MkdirAll",
	OpSyncDir:         "SyncDir",
	OpExchange:        "Exchange",
}

// String returns the name of the method, such as "Rename".
func (o Op) String() string {
	if o > 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// Event is one call recorded by a [FaultFS]. Name is the path the call was
// given (for a File call, the name the file was created with); Name2 is the
// new name of a Link or Rename and empty otherwise.
type Event struct {
	Op          Op
	Name, Name2 string
}

// String returns the event as "Op name" or "Op name name2".
func (e Event) String() string {
	if e.Name2 != "" {
		return fmt.Sprintf("%v %s %s", e.Op, e.Name, e.Name2)
	}
	return fmt.Sprintf("%v %s", e.Op, e.Name)
}

// Fault is a rule for [FaultFS.Inject]: which calls fail, when, and how.
type Fault struct {
	// Op is the call the fault applies to.
	Op Op
	// Match, if not nil, restricts the fault to calls whose path it
	// accepts. For Link and Rename it is given both names, and the call
	// matches if either is accepted.
	Match func(name string) bool
	// Nth, if positive, makes the fault fire on the Nth matching call
	// only (counting from 1); 0 makes it fire on every matching call.
	Nth int
	// After runs the call on the wrapped FS before failing it; otherwise
	// the call fails without running.
	After bool
	// Err is wrapped in the error the call returns. Nil means a crash.
	Err error
}

func (flt *Fault) matches(e Event) bool {
	if flt.Op != e.Op {
		return false
	}
	if flt.Match == nil {
		return true
	}
	return flt.Match(e.Name) || (e.Name2 != "" && flt.Match(e.Name2))
}

// FaultFS wraps an [FS], records every call in a trace and fails the calls
// chosen by its faults. It is safe for concurrent use.
//
// A fault with an error makes the call return an error wrapping it and
// naming the call and its path. A fault without one is a crash: from then on
// the FaultFS is crashed, and every call, on it or on a File or Reader it
// returned earlier, fails with an error wrapping [ErrCrashed] and reaches
// nothing in the wrapped FS, not even Close: handles of the wrapped FS that
// are open at the crash stay open (an *os.File is closed by the garbage
// collector). Calls running concurrently with the crashing call may or may
// not reach the wrapped FS, as with a real crash.
//
// When an error fault with After fires on Create, CreateExclusive or Open,
// the file or reader the wrapped FS returned is closed, since the caller
// never sees it.
//
// The trace holds every call made through the FaultFS, even those that
// failed or came after a crash. Calls on a Reader are not recorded and are
// failed only by a crash.
type FaultFS struct {
	inner FS

	mu      sync.Mutex
	faults  []*armedFault
	trace   []Event
	crashed bool
}

type armedFault struct {
	Fault
	seen int // matching calls so far
}

var _ FS = (*FaultFS)(nil)

// NewFaultFS returns a FaultFS over inner, with no faults.
func NewFaultFS(inner FS) *FaultFS {
	return &FaultFS{inner: inner}
}

// Inject adds faults. When one call matches several, each counts it, and
// the first added among those that fire decides its fate. Match functions
// are called with the FaultFS locked and must not call it.
func (f *FaultFS) Inject(faults ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, flt := range faults {
		f.faults = append(f.faults, &armedFault{Fault: flt})
	}
}

// Trace returns a copy of the calls recorded so far, in order.
func (f *FaultFS) Trace() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Event(nil), f.trace...)
}

// CountOps returns how many calls of op the trace holds.
func (f *FaultFS) CountOps(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.trace {
		if e.Op == op {
			n++
		}
	}
	return n
}

// Reset empties the trace and restarts the count of matching calls of every
// fault, so that Nth counts from the next call. The faults themselves stay,
// and so does a crash.
func (f *FaultFS) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trace = nil
	for _, a := range f.faults {
		a.seen = 0
	}
}

// Crashed reports whether a crash fault has fired.
func (f *FaultFS) Crashed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashed
}

func (f *FaultFS) crashErr(e Event) error {
	return fmt.Errorf("%v: %w", e, ErrCrashed)
}

// begin records the call e and decides its fate. A non-nil error means the
// call must fail with it without running. Otherwise, a non-nil fault must be
// applied with end once the call has run.
func (f *FaultFS) begin(e Event) (*Fault, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trace = append(f.trace, e)
	if f.crashed {
		return nil, f.crashErr(e)
	}
	var fired *Fault
	for _, a := range f.faults {
		if !a.matches(e) {
			continue
		}
		a.seen++
		if fired == nil && (a.Nth == 0 || a.seen == a.Nth) {
			flt := a.Fault
			fired = &flt
		}
	}
	switch {
	case fired == nil || fired.After:
		return fired, nil
	case fired.Err == nil:
		f.crashed = true
		return nil, f.crashErr(e)
	default:
		return nil, fmt.Errorf("%v: injected fault: %w", e, fired.Err)
	}
}

// end applies a fault with After to the call e, which has run.
func (f *FaultFS) end(e Event, flt *Fault) error {
	if flt.Err != nil {
		return fmt.Errorf("%v: injected fault after the call: %w", e, flt.Err)
	}
	f.mu.Lock()
	f.crashed = true
	f.mu.Unlock()
	return f.crashErr(e)
}

// do runs call as the call e, applying the faults. It reports whether call
// ran and succeeded, which tells a caller to release what call returned if
// the error came from a fault.
func (f *FaultFS) do(e Event, call func() error) (ok bool, err error) {
	flt, err := f.begin(e)
	if err != nil {
		return false, err
	}
	err = call()
	if flt != nil {
		return err == nil, f.end(e, flt)
	}
	return err == nil, err
}

// ReadFile implements [FS].
func (f *FaultFS) ReadFile(name string) ([]byte, error) {
	var b []byte
	_, err := f.do(Event{Op: OpReadFile, Name: name}, func() (err error) {
		b, err = f.inner.ReadFile(name)
		return err
	})
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Open implements [FS].
func (f *FaultFS) Open(name string) (Reader, error) {
	var r Reader
	ok, err := f.do(Event{Op: OpOpen, Name: name}, func() (err error) {
		r, err = f.inner.Open(name)
		return err
	})
	if err != nil {
		if ok && !errors.Is(err, ErrCrashed) {
			r.Close()
		}
		return nil, err
	}
	return &faultReader{fs: f, r: r, name: name}, nil
}

// Stat implements [FS].
func (f *FaultFS) Stat(name string) (FileInfo, error) {
	var fi FileInfo
	_, err := f.do(Event{Op: OpStat, Name: name}, func() (err error) {
		fi, err = f.inner.Stat(name)
		return err
	})
	if err != nil {
		return FileInfo{}, err
	}
	return fi, nil
}

// Create implements [FS].
func (f *FaultFS) Create(name string) (File, error) {
	return f.create(OpCreate, name, f.inner.Create)
}

// CreateExclusive implements [FS].
func (f *FaultFS) CreateExclusive(name string) (File, error) {
	return f.create(OpCreateExclusive, name, f.inner.CreateExclusive)
}

func (f *FaultFS) create(op Op, name string, open func(string) (File, error)) (File, error) {
	var w File
	ok, err := f.do(Event{Op: op, Name: name}, func() (err error) {
		w, err = open(name)
		return err
	})
	if err != nil {
		if ok && !errors.Is(err, ErrCrashed) {
			w.Close() // the file exists, but the caller never sees it
		}
		return nil, err
	}
	return &faultFile{fs: f, w: w, name: name}, nil
}

// Link implements [FS].
func (f *FaultFS) Link(oldname, newname string) error {
	_, err := f.do(Event{Op: OpLink, Name: oldname, Name2: newname}, func() error {
		return f.inner.Link(oldname, newname)
	})
	return err
}

// Rename implements [FS].
func (f *FaultFS) Rename(oldname, newname string) error {
	_, err := f.do(Event{Op: OpRename, Name: oldname, Name2: newname}, func() error {
		return f.inner.Rename(oldname, newname)
	})
	return err
}

// Exchange implements [FS].
func (f *FaultFS) Exchange(a, b string) error {
	_, err := f.do(Event{Op: OpExchange, Name: a, Name2: b}, func() error {
		return f.inner.Exchange(a, b)
	})
	return err
}

// Remove implements [FS].
func (f *FaultFS) Remove(name string) error {
	_, err := f.do(Event{Op: OpRemove, Name: name}, func() error {
		return f.inner.Remove(name)
	})
	return err
}

// List implements [FS].
func (f *FaultFS) List(dir string) ([]string, error) {
	var names []string
	_, err := f.do(Event{Op: OpList, Name: dir}, func() (err error) {
		names, err = f.inner.List(dir)
		return err
	})
	if err != nil {
		return nil, err
	}
	return names, nil
}

// MkdirAll implements [FS].
func (f *FaultFS) MkdirAll(dir string) error {
	_, err := f.do(Event{Op: OpMkdirAll, Name: dir}, func() error {
		return f.inner.MkdirAll(dir)
	})
	return err
}

// SyncDir implements [FS].
func (f *FaultFS) SyncDir(dir string) error {
	_, err := f.do(Event{Op: OpSyncDir, Name: dir}, func() error {
		return f.inner.SyncDir(dir)
	})
	return err
}

// faultFile is a File of a FaultFS.
type faultFile struct {
	fs   *FaultFS
	w    File
	name string
}

func (w *faultFile) Write(p []byte) (int, error) {
	var n int
	_, err := w.fs.do(Event{Op: OpWrite, Name: w.name}, func() (err error) {
		n, err = w.w.Write(p)
		return err
	})
	return n, err
}

func (w *faultFile) Sync() error {
	_, err := w.fs.do(Event{Op: OpSync, Name: w.name}, w.w.Sync)
	return err
}

func (w *faultFile) Close() error {
	_, err := w.fs.do(Event{Op: OpClose, Name: w.name}, w.w.Close)
	return err
}

// faultReader is a Reader of a FaultFS; it fails every call after a crash.
type faultReader struct {
	fs   *FaultFS
	r    Reader
	name string
}

func (r *faultReader) crashed(op string) error {
	if r.fs.Crashed() {
		return fmt.Errorf("%s %s: %w", op, r.name, ErrCrashed)
	}
	return nil
}

func (r *faultReader) Read(p []byte) (int, error) {
	if err := r.crashed("Read"); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

func (r *faultReader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.crashed("ReadAt"); err != nil {
		return 0, err
	}
	return r.r.ReadAt(p, off)
}

func (r *faultReader) Seek(offset int64, whence int) (int64, error) {
	if err := r.crashed("Seek"); err != nil {
		return 0, err
	}
	return r.r.Seek(offset, whence)
}

func (r *faultReader) Close() error {
	if err := r.crashed("Close"); err != nil {
		return err
	}
	return r.r.Close()
}

func (r *faultReader) Size() int64 { return r.r.Size() }
