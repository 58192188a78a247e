package tableformat

// Benchmarks of checkpoints: opening a table of 10,000 one-segment commits
// with and without checkpoints, and the cost of writing one at 10,000 live
// segments. The log is written directly (commit files and CURRENT, as
// Table.Commit would write them, without its per-commit fsyncs), since the
// log replay never opens Parquet files; the newest table coverage pointer
// names a real snapshot so that maybeCheckpoint has a coverage section to
// write.
//
//	go test -run '^$' -bench Checkpoint -benchtime 20x ./tableformat/

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// ckFakeSegment is the i-th one-row segment of host "h" at 10 s steps,
// shaped like the segments appends write.
func ckFakeSegment(i int) SegmentMeta {
	ts := t0.Add(time.Duration(i) * 10 * time.Second)
	size := uint64(1400 + i%100)
	return SegmentMeta{
		Path:         fmt.Sprintf("%s/%08x-0000-4000-8000-%012x.parquet", appendDir, i, i),
		Format:       FormatParquet,
		Layout:       EntityLayout{Kind: LayoutSingle, Identity: Identity{{Type: EntityUtf8, Str: "h"}}},
		IndexMin:     TimeValue(ts),
		IndexMax:     TimeValue(ts),
		RowCount:     1,
		FileSize:     &size,
		CoveragePath: fmt.Sprintf("%s/segcov-%032x-%08x-0000-4000-8000-%012x.roar", segmentCoverageDir, i, i, i),
	}
}

// ckWriteFile writes name in fsys (not synced: benchmark setup only).
func ckWriteFile(tb testing.TB, fsys storage.FS, name string, data []byte) {
	tb.Helper()
	writeFSFile(tb, fsys, name, data, false)
}

// ckBuildLog writes a log of n commits into fsys: commit 1 creates the
// table (tsIndex, tsSchema), each later commit adds one segment and points
// at a table coverage snapshot, as an append does. Only the newest
// snapshot exists (with the coverage of all n-1 segments).
func ckBuildLog(tb testing.TB, fsys storage.FS, n int) {
	tb.Helper()
	ix := tsIndex()
	meta := TableMeta{Index: &ix, Schema: tsSchema(), CreatedAt: t0, Protocol: ProtocolVersion, ReaderFeatures: []string{}, WriterFeatures: []string{}}
	cov := newSegmentCoverage(&ix, true)
	for v := 1; v <= n; v++ {
		c := &Commit{Version: uint64(v), BaseVersion: uint64(v - 1), Timestamp: t0.Add(time.Duration(v) * time.Millisecond)}
		if v == 1 {
			c.Actions = []Action{UpdateTableMeta{Meta: meta}}
		} else {
			seg := ckFakeSegment(v - 2)
			p := fmt.Sprintf("%s/%d-tblcov-%032x-%s.roar", tableCoverageDir, v, v, uuid.NewString())
			c.Actions = []Action{AddSegment{Segment: seg}, UpdateTableCoverage{Coverage: CoveragePointer{IndexKind: ix.Kind, Path: p}}}
			id, err := cov.domain.TimestampID(seg.IndexMin.Time.Unix(), 1)
			if err != nil {
				tb.Fatal(err)
			}
			if _, err := cov.set.Add(identityToCoverage(seg.Layout.Identity), id); err != nil {
				tb.Fatal(err)
			}
			if v == n {
				ckWriteFile(tb, fsys, p, cov.encode())
			}
		}
		data, err := c.MarshalJSON()
		if err != nil {
			tb.Fatal(err)
		}
		ckWriteFile(tb, fsys, CommitPath(uint64(v)), data)
	}
	ckWriteFile(tb, fsys, currentPath, []byte(strconv.Itoa(n)+"\n"))
}

// ckLocalLog builds the log of n commits once per process in a directory
// that outlives the benchmark's runs (removed by the last cleanup).
var ckLocalLogs = map[int]string{}

func ckLocalLog(b *testing.B, n int) string {
	b.Helper()
	if dir, ok := ckLocalLogs[n]; ok {
		return dir
	}
	dir, err := os.MkdirTemp("", "tsflight-ckbench-")
	if err != nil {
		b.Fatal(err)
	}
	ckBuildLog(b, storage.Local(dir), n)
	ckLocalLogs[n] = dir
	return dir
}

// ckCloneDir copies a table directory (commit files and CURRENT only).
func ckCloneDir(b *testing.B, from string) string {
	b.Helper()
	to := b.TempDir()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		b.Fatal(err)
	}
	return to
}

// ckClonedLog is a copy of the log of n commits (ckLocalLog) in the
// benchmark's own directory; the shared log is removed when the benchmark
// ends.
func ckClonedLog(b *testing.B, n int) string {
	b.Helper()
	dir := ckCloneDir(b, ckLocalLog(b, n))
	b.Cleanup(func() {
		if d, ok := ckLocalLogs[n]; ok {
			os.RemoveAll(d)
			delete(ckLocalLogs, n)
		}
	})
	return dir
}

// BenchmarkCheckpointOpen opens a table of 10,000 commits (9,999 live
// segments) on the local disk: replaying the whole log, from a checkpoint
// at the newest version, and from one 99 commits behind (the worst case of
// the default interval of 100).
func BenchmarkCheckpointOpen(b *testing.B) {
	const n = 10000
	base := ckLocalLog(b, n)
	b.Cleanup(func() { os.RemoveAll(base) })
	ctx := context.Background()
	for _, c := range []struct {
		name string
		at   uint64 // 0: no checkpoint
	}{{"replay", 0}, {"checkpoint", n}, {"checkpoint-99-behind", n - 99}} {
		dir := base
		if c.at > 0 {
			dir = ckCloneDir(b, base)
			fsys := storage.Local(dir)
			l := &logStore{fs: fsys, opts: DefaultOptions()}
			st, err := l.replayTo(ctx, nil, c.at)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.writeCheckpoint(st, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.name, func(b *testing.B) {
			fsys := storage.Local(dir)
			for b.Loop() {
				tb, err := Open(ctx, fsys, &Options{ReadOnly: true})
				if err != nil || tb.State().Version != n {
					b.Fatalf("open: %v", err)
				}
			}
		})
	}
}

// BenchmarkCheckpointWrite is maybeCheckpoint at 10,000 live segments on
// the local disk: the coverage section from the table's (cached) coverage,
// encoding, the round-trip self-check, the durable write and the pruning.
// "encode" is encodeCheckpoint alone, "decode" decodeCheckpoint alone.
func BenchmarkCheckpointWrite(b *testing.B) {
	const n = 10001
	dir := ckClonedLog(b, n)
	ctx := context.Background()
	opts := DefaultOptions()
	opts.CheckpointInterval = 1
	tb := mustOpen(b, storage.Local(dir), opts)
	st := tb.State()
	if len(st.Segments) != n-1 {
		b.Fatalf("%d segments", len(st.Segments))
	}
	final := filepath.Join(dir, filepath.FromSlash(checkpointPath(st.Version)))
	b.Run("maybeCheckpoint", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			os.Remove(final)
			tb.log.ckpt.known = 0
			b.StartTimer()
			tb.maybeCheckpoint(ctx, st)
		}
		b.StopTimer()
		info, err := os.Stat(final)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(info.Size()), "file-bytes")
	})
	c, err := tb.loadCoverage(ctx, st)
	if err != nil {
		b.Fatal(err)
	}
	cov := c.encode()
	data, err := encodeCheckpoint(st, cov, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := encodeCheckpoint(st, cov, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := decodeCheckpoint(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
