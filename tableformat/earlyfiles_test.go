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

// TestEarlyFilesFailures: a small append to a table that has segments
// starts its files before it encodes (earlyfiles.go). Whichever of them
// fails, the append fails with the storage error naming what failed,
// commits nothing, leaves no file behind, and the next append succeeds.
func TestEarlyFilesFailures(t *testing.T) {
	ctx := context.Background()
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	under := func(dir string) func(string) bool {
		return func(n string) bool { return strings.HasPrefix(n, dir+"/") }
	}
	is := func(name string) func(string) bool { return func(n string) bool { return n == name } }
	boom := errors.New("disk on fire")
	cases := []struct {
		name  string
		fault storage.Fault
		names string // what the error must name
	}{
		{"segment create", storage.Fault{Op: storage.OpCreateExclusive, Match: under(appendDir), Err: boom}, appendDir + "/"},
		{"segment sync", storage.Fault{Op: storage.OpSync, Match: under(appendDir), Err: boom}, appendDir + "/"},
		{"segment directory sync", storage.Fault{Op: storage.OpSyncDir, Match: is(appendDir), Err: boom}, appendDir},
		{"sidecar create", storage.Fault{Op: storage.OpCreateExclusive, Match: under(segmentCoverageDir), Err: boom}, segmentCoverageDir + "/"},
		{"sidecar directory sync", storage.Fault{Op: storage.OpSyncDir, Match: is(segmentCoverageDir), Err: boom}, segmentCoverageDir},
		{"commit file create", storage.Fault{Op: storage.OpCreateExclusive, Match: func(n string) bool { return strings.HasPrefix(n, LogDir+"/.") }, Err: boom}, LogDir + "/."},
		{"commit file write", storage.Fault{Op: storage.OpWrite, Match: func(n string) bool { return strings.HasPrefix(n, LogDir+"/.") }, Err: boom}, LogDir + "/."},
		{"CURRENT create", storage.Fault{Op: storage.OpCreateExclusive, Match: func(n string) bool { return strings.HasPrefix(n, LogDir+"/CURRENT.tmp") }, Err: boom}, "CURRENT.tmp"},
		{"CURRENT sync", storage.Fault{Op: storage.OpSync, Match: func(n string) bool { return strings.HasPrefix(n, LogDir+"/CURRENT.tmp") }, Err: boom}, "CURRENT.tmp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := storage.NewMem()
			mustCreateTable(t, fsys, CreateOptions{Index: tsIndex()}, nil)
			ffs, tb := openFaulty(t, fsys, nil)
			o := DefaultAppendOptions()
			o.Alloc = mem
			appendRow := func(r row) error {
				rdr := readerOf(t, inSchema(), inBatch(mem, r))
				defer rdr.Release()
				_, err := tb.Append(ctx, rdr, o)
				return err
			}
			if err := appendRow(row{0, "h", 1}); err != nil {
				t.Fatal(err)
			}
			before := memFiles(t, fsys)
			version := tb.State().Version
			c.fault.Nth = 1 // the next append's call only
			ffs.Inject(c.fault)
			err := appendRow(row{10, "h", 2})
			if err == nil || !errors.Is(err, ErrStorage) || errors.Is(err, ErrAmbiguousOutcome) {
				t.Fatalf("got %v, want a definite storage error", err)
			}
			if !errors.Is(err, boom) || !strings.Contains(err.Error(), c.names) {
				t.Fatalf("error %q does not name %q and the cause", err, c.names)
			}
			if after := memFiles(t, fsys); !slices.Equal(after, before) {
				t.Fatalf("the failed append left files: before %v, after %v", before, after)
			}
			var left []string
			if names, err := fsys.List(LogDir); err == nil {
				for _, n := range names {
					if strings.Contains(n, ".tmp") {
						left = append(left, n)
					}
				}
			}
			if len(left) > 0 {
				t.Fatalf("the failed append left temporary files in the log: %v", left)
			}
			st, err := tb.Refresh(ctx)
			if err != nil || st.Version != version {
				t.Fatalf("after the failure the table is at %d (%v), want %d", st.Version, err, version)
			}
			if err := appendRow(row{10, "h", 2}); err != nil {
				t.Fatalf("the next append: %v", err)
			}
			if n, s := scanCountSum(t, tb, mem, "v"); n != 2 || s != 3 {
				t.Fatalf("scan: %d rows, sum %d; want 2 rows, sum 3", n, s)
			}
		})
	}
}
