package tableformat

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// memFiles lists every file of a MemFS outside the log.
func memFiles(t *testing.T, fsys storage.FS) []string {
	t.Helper()
	var out []string
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fsys.List(dir)
		if err != nil {
			return
		}
		for _, n := range names {
			p := n
			if dir != "." {
				p = dir + "/" + n
			}
			if info, err := fsys.Stat(p); err == nil && info.IsDir {
				walk(p)
			} else if !strings.HasPrefix(p, LogDir) {
				out = append(out, p)
			}
		}
	}
	walk(".")
	return out
}

// TestAppendFailureRemovesItsFiles: a definite commit failure removes the
// segment and both sidecars; an ambiguous one keeps them and names the
// segment.
func TestAppendFailureRemovesItsFiles(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	cases := []struct {
		name      string
		fault     storage.Fault
		ambiguous bool
	}{
		{"link fails", storage.Fault{Op: storage.OpLink, Match: func(n string) bool { return strings.HasSuffix(n, "0000000002.json") }, Err: errors.New("disk on fire")}, false},
		{"log sync fails after link", storage.Fault{Op: storage.OpSyncDir, Match: func(n string) bool { return n == LogDir }, Nth: 1, Err: errors.New("EIO")}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := storage.NewMem()
			mustCreateTable(t, fsys, CreateOptions{Index: tsIndex()}, nil)
			ffs, tb := openFaulty(t, fsys, nil)
			ffs.Inject(c.fault)
			rdr := readerOf(t, inSchema(), inBatch(mem, row{0, "h", 1}))
			defer rdr.Release()
			o := DefaultAppendOptions()
			o.Alloc = mem
			_, err := tb.Append(ctx, rdr, o)
			// The segment-union marker is the table's, not the attempt's:
			// written once, before the first commit that names it.
			files := slices.DeleteFunc(memFiles(t, fsys), func(p string) bool { return p == unionCoveragePath })
			if !c.ambiguous {
				if err == nil || errors.Is(err, ErrAmbiguousOutcome) {
					t.Fatalf("got %v, want a definite failure", err)
				}
				if len(files) != 0 {
					t.Fatalf("a failed append left %v", files)
				}
				return
			}
			if !errors.Is(err, ErrAmbiguousOutcome) || !strings.Contains(err.Error(), "data/_managed/append/") {
				t.Fatalf("got %v, want an ambiguous outcome naming the segment", err)
			}
			if len(files) != 2 {
				t.Fatalf("an ambiguous append must keep its segment and sidecar, found %v", files)
			}
			// The commit is in fact visible: reopening shows it.
			re, err := Open(ctx, fsys, nil)
			if err != nil || re.State().Version != 2 || len(re.State().Segments) != 1 {
				t.Fatalf("reopen after ambiguity: %v", err)
			}
		})
	}
}
