package tableformat

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/pierrec/lz4/v4"
)

// Spilled runs: when a compaction's rows do not fit its memory bound, the
// rows are sorted a bufferful at a time and each sorted run is written to
// a temporary file, to be merged later: an Arrow IPC stream (uncompressed
// batches) compressed as one LZ4 frame (independent 64 KiB blocks, no
// checksums), which the kernel and the merge read sequentially.
//
// LZ4 because a sorted run compresses well and cheaply: the rows of one
// series are together, so that strings repeat and numbers change little
// (BenchmarkCompactSpill, TSBS cpu-only rows: 3.5 times smaller for 0.4 s
// more CPU per 156 MB of runs, a seventh of the compaction's CPU). Zstd
// at its fastest level made the runs 2.5 times smaller again, for three
// times the CPU of LZ4; Arrow's own buffer compression (ipc.WithLZ4,
// ipc.WithZstd) compresses each buffer of each batch apart, and cost 1.1
// and 3.2 s for less (docs/design.md, Compaction).
//
// The files live outside the table (CompactOptions.SpillDir, by default
// the system's temporary directory) and have no name: on Linux they are
// created without one (O_TMPFILE), elsewhere (and on file systems without
// O_TMPFILE) they are removed as soon as they are created. The compaction
// reads them through the open descriptor, and the kernel frees them when
// it is closed — at the end of the group, on any failure, and when the
// process dies, SIGKILL included. No table file or commit ever names one.
// A process killed between creating a named file and removing it, and on
// Windows (where an open file cannot be removed, so that they are removed
// when closed) any killed process, leaves tsflight-compact-*.arrows files
// in the directory: the next compaction that spills there removes them
// (sweepSpillFiles). TestCrashTrialsCompact found such a file left by a
// kill before the files were created without a name.

// compactSpillPattern names spill files (os.CreateTemp pattern).
const compactSpillPattern = "tsflight-compact-*.arrows"

// compactSpillBuffer is the buffer of a spill file's writer, and
// compactSpillReadBuffer that of each of the (up to compactFanIn) readers
// of a merge.
const (
	compactSpillBuffer     = 256 << 10
	compactSpillReadBuffer = 64 << 10
)

// Test hooks: called on every write and read of a spill file; an error
// they return is the write's or read's.
var (
	testHookSpillWrite func() error
	testHookSpillRead  func() error
)

// spillRun is one sorted run in a temporary file.
type spillRun struct {
	f     *os.File
	name  string // removed at close where it could not be unlinked at once
	rows  int64
	bytes int64
	// lo and hi are the buckets (compactBuckets keys) of its first and
	// last rows: it holds rows of buckets lo..hi only.
	lo, hi uint64

	bw *bufio.Writer
	cw *lz4.Writer
	w  *ipc.Writer
}

// newSpillRun creates an unlinked temporary file in dir (os.TempDir() when
// empty) for a run of batches of schema.
func newSpillRun(dir string, schema *arrow.Schema, mem memory.Allocator) (*spillRun, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	f, name, err := createSpillFile(dir)
	if err != nil {
		return nil, storageErr("create a compaction spill file in "+dir+" (CompactOptions.SpillDir)", err)
	}
	r := &spillRun{f: f, name: name}
	r.bw = bufio.NewWriterSize(spillWriter{r}, compactSpillBuffer)
	r.cw = lz4.NewWriter(r.bw)
	if err := r.cw.Apply(lz4.BlockSizeOption(lz4.Block64Kb), lz4.ChecksumOption(false), lz4.ConcurrencyOption(1)); err != nil {
		panic(fmt.Errorf("tableformat: the options of a new LZ4 writer: %w", err)) // valid options: unreachable
	}
	r.w = ipc.NewWriter(r.cw, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	return r, nil
}

// createNamedSpillFile creates a new spill file in dir and removes its
// name at once, where the system allows (not on Windows, where an open
// file cannot be removed); name is the file's name while it still has
// one, to be removed at close. A process killed between the creation and
// the removal leaves the file: sweepSpillFiles removes it later.
func createNamedSpillFile(dir string) (*os.File, string, error) {
	f, err := os.CreateTemp(dir, compactSpillPattern)
	if err != nil {
		return nil, "", err
	}
	if runtime.GOOS != "windows" {
		if err := os.Remove(f.Name()); err == nil {
			return f, "", nil
		}
	}
	return f, f.Name(), nil
}

// sweepSpillFiles removes the spill files left in dir by processes that
// died while their files still had a name (see createNamedSpillFile). A
// live process's file is safe: it reads its file through the descriptor
// (the name is not needed once created), and where an open file cannot be
// removed the removal fails.
func sweepSpillFiles(dir string) {
	if dir == "" {
		dir = os.TempDir()
	}
	names, _ := filepath.Glob(filepath.Join(dir, compactSpillPattern))
	for _, n := range names {
		_ = os.Remove(n)
	}
}

// spillWriter counts what reaches the file.
type spillWriter struct{ r *spillRun }

func (s spillWriter) Write(p []byte) (int, error) {
	if h := testHookSpillWrite; h != nil {
		if err := h(); err != nil {
			return 0, err
		}
	}
	n, err := s.r.f.Write(p)
	s.r.bytes += int64(n)
	return n, err
}

// put appends a batch to the run (compactSink).
func (r *spillRun) put(rec arrow.RecordBatch) error {
	if err := r.w.Write(rec); err != nil {
		return storageErr("write a compaction spill file", err)
	}
	r.rows += rec.NumRows()
	return nil
}

// finish ends the stream and flushes it to the file.
func (r *spillRun) finish() error {
	err := r.w.Close()
	r.w = nil
	if r.cw != nil {
		if cerr := r.cw.Close(); err == nil {
			err = cerr
		}
		r.cw = nil
	}
	if err == nil {
		err = r.bw.Flush()
	}
	r.bw = nil // the run is only read from now on
	if err != nil {
		return storageErr("write a compaction spill file", err)
	}
	return nil
}

// open returns a reader of the run's batches from the start.
func (r *spillRun) open(mem memory.Allocator) (*ipc.Reader, error) {
	if _, err := r.f.Seek(0, io.SeekStart); err != nil {
		return nil, storageErr("read a compaction spill file", err)
	}
	src := lz4.NewReader(bufio.NewReaderSize(spillReader{r.f}, compactSpillReadBuffer))
	rd, err := ipc.NewReader(src, ipc.WithAllocator(mem))
	if err != nil {
		return nil, storageErr("read a compaction spill file", err)
	}
	return rd, nil
}

type spillReader struct{ f *os.File }

func (s spillReader) Read(p []byte) (int, error) {
	if h := testHookSpillRead; h != nil {
		if err := h(); err != nil {
			return 0, err
		}
	}
	return s.f.Read(p)
}

// close closes (and so frees) the file.
func (r *spillRun) close() {
	if r.f == nil {
		return
	}
	if r.w != nil {
		_ = r.w.Close()
		r.w = nil
	}
	if r.cw != nil {
		_ = r.cw.Close()
		r.cw = nil
	}
	_ = r.f.Close()
	if r.name != "" {
		_ = os.Remove(r.name)
	}
	r.f = nil
}

func (r *spillRun) String() string { return fmt.Sprintf("run of %d rows (%d bytes)", r.rows, r.bytes) }
