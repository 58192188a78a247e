package storage

import (
	"errors"
	"io/fs"
	"testing"
)

// Exchange swaps two directories (and two files) on every implementation;
// a missing name, the root, or a directory with a file is refused and
// changes nothing.
func TestExchange(t *testing.T) {
	for name, newFS := range map[string]func(t *testing.T) FS{
		"local": func(t *testing.T) FS { return Local(t.TempDir()) },
		"mem":   func(t *testing.T) FS { return NewMem() },
		"fault": func(t *testing.T) FS { return NewFaultFS(NewMem()) },
	} {
		t.Run(name, func(t *testing.T) {
			fsys := newFS(t)
			writeFile(t, fsys, "a/1", "one")
			writeFile(t, fsys, "b/2", "two")
			writeFile(t, fsys, "f", "file f")
			writeFile(t, fsys, "g", "file g")
			if err := fsys.Exchange("a", "b"); err != nil {
				t.Fatal(err)
			}
			wantList(t, fsys, "a", "2")
			wantList(t, fsys, "b", "1")
			wantContent(t, fsys, "a/2", "two")
			if err := fsys.Exchange("f", "g"); err != nil {
				t.Fatal(err)
			}
			wantContent(t, fsys, "f", "file g")
			wantContent(t, fsys, "g", "file f")
			if err := fsys.Exchange("a", "missing"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("exchange with a missing name: %v, want ErrNotExist", err)
			}
			if err := fsys.Exchange(".", "a"); err == nil {
				t.Error("exchange of the root succeeded")
			}
			if err := fsys.Exchange("../x", "a"); !errors.Is(err, ErrInvalidPath) {
				t.Errorf("exchange of an invalid path: %v, want ErrInvalidPath", err)
			}
			wantList(t, fsys, "a", "2")
			wantList(t, fsys, ".", "a", "b", "f", "g")
		})
	}
}

// A directory exchange on a MemFS is durable at once, as a directory
// rename is: a crash clone sees it.
func TestMemExchangeDurable(t *testing.T) {
	m := NewMem()
	writeFile(t, m, "a/1", "one")
	writeFile(t, m, "b/2", "two")
	if err := m.SyncDir("a"); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("b"); err != nil {
		t.Fatal(err)
	}
	if err := m.Exchange("a", "b"); err != nil {
		t.Fatal(err)
	}
	c := m.CrashClone()
	wantContent(t, c, "a/2", "two")
	wantContent(t, c, "b/1", "one")
	if err := m.Exchange("a", "a/2"); err == nil {
		t.Error("exchange of a directory with an entry inside it succeeded")
	}
}

// FaultFS records an Exchange with both names and can fail it.
func TestFaultExchange(t *testing.T) {
	f := NewFaultFS(NewMem())
	writeFile(t, f, "a/1", "one")
	writeFile(t, f, "b/2", "two")
	f.Inject(Fault{Op: OpExchange, Err: ErrExchangeUnsupported})
	if err := f.Exchange("a", "b"); !errors.Is(err, ErrExchangeUnsupported) {
		t.Fatalf("exchange: %v, want the injected error", err)
	}
	tr := f.Trace()
	if last := tr[len(tr)-1]; last.Op != OpExchange || last.Name != "a" || last.Name2 != "b" || last.String() != "Exchange a b" {
		t.Fatalf("trace ends with %v", last)
	}
	wantList(t, f, "a", "1")
}
