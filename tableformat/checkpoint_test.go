package tableformat

// Checkpoints, reading side: a state started from a checkpoint and the
// commits after it must equal the state replayed from commit 1, and every
// checkpoint that is torn, damaged, of another format, stale or unreadable
// must be passed over for an older one or a full replay, with a warning,
// never giving another state. The writing side is in
// checkpoint_write_test.go.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// ckOptions are options that write no checkpoints by themselves, with a
// logger into buf (nil: discard).
func ckOptions(buf *lockedBuffer) *Options {
	o := DefaultOptions()
	o.CheckpointInterval = 0
	if buf != nil {
		o.Logger = hclog.New(&hclog.LoggerOptions{Output: buf, Level: hclog.Warn})
	}
	return o
}

// ckStore is a logStore on fsys, as a fresh handle has.
// ckEvery is ckOptions(buf) with a checkpoint every n commits.
func ckEvery(buf *lockedBuffer, n int) *Options {
	o := ckOptions(buf)
	o.CheckpointInterval = n
	return o
}

func ckStore(fsys storage.FS, buf *lockedBuffer) *logStore {
	return &logStore{fs: fsys, opts: ckOptions(buf)}
}

// ckFull is the state at version v replayed from commit 1, ignoring
// checkpoints.
func ckFull(t testing.TB, fsys storage.FS, v uint64) *State {
	t.Helper()
	st, err := ckStore(fsys, nil).replayLogTo(context.Background(), v)
	if err != nil {
		t.Fatalf("full replay to %d: %v", v, err)
	}
	return st
}

// ckSame fails unless got and want are the same state, unexported fields
// (segment index, commit digests) included.
func ckSame(t testing.TB, what string, got, want *State) {
	t.Helper()
	// A replay that added and removed every segment has an empty list, a
	// checkpoint of it a nil one: the same state.
	if got != nil && want != nil && len(got.Segments) == 0 && len(want.Segments) == 0 && (got.Segments == nil) != (want.Segments == nil) {
		g := *got
		g.Segments = want.Segments
		got = &g
	}
	if reflect.DeepEqual(got, want) {
		return
	}
	switch {
	case got == nil || want == nil:
		t.Fatalf("%s: state %v, want %v", what, got, want)
	case got.Version != want.Version:
		t.Fatalf("%s: version %d, want %d", what, got.Version, want.Version)
	case got.digest != want.digest || got.origin != want.origin:
		t.Fatalf("%s: commit digests differ", what)
	case !reflect.DeepEqual(got.Meta, want.Meta):
		t.Fatalf("%s: metadata differs:\n%+v\n%+v", what, got.Meta, want.Meta)
	case !reflect.DeepEqual(got.Segments, want.Segments):
		for i := range min(len(got.Segments), len(want.Segments)) {
			if !reflect.DeepEqual(got.Segments[i], want.Segments[i]) {
				t.Fatalf("%s: segment %d differs:\n%+v\n%+v", what, i, got.Segments[i], want.Segments[i])
			}
		}
		t.Fatalf("%s: %d segments, want %d", what, len(got.Segments), len(want.Segments))
	default:
		t.Fatalf("%s: states differ:\n%+v\n%+v", what, got, want)
	}
}

// ckVariedLog builds a table of n commits on fsys: a schema adopted at 2,
// one-segment commits of every layout and optional field, removals, a
// column added half way (schema_add_columns), coverage pointers. Its
// handle writes no checkpoints.
// ckCheckpointedLog is a MemFS holding ckVariedLog of n commits and the
// checkpoints of versions at.
func ckCheckpointedLog(t testing.TB, n int, at ...uint64) *storage.MemFS {
	t.Helper()
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, n)
	for _, v := range at {
		ckWrite(t, fsys, v)
	}
	return fsys
}

func ckVariedLog(t testing.TB, fsys storage.FS, n int) *Table {
	t.Helper()
	ctx := context.Background()
	tb := mustCreateTable(t, fsys, CreateOptions{Index: tsIndex()}, ckOptions(nil))
	ix := tsIndex()
	for v := 2; v <= n; v++ {
		st := tb.State()
		var acts []Action
		switch {
		case v == 2:
			acts = adoptSchema(st)
		case v == n/2+1:
			m := st.Meta.Clone()
			m.Schema = tsSchema(Field{Name: "extra", Type: DataType{Kind: TypeFloat64}, Nullable: true})
			m.ReaderFeatures = []string{FeatureSchemaAddColumns}
			acts = []Action{UpdateTableMeta{Meta: *m}}
		case v%7 == 0 && len(st.Segments) > 2:
			acts = []Action{RemoveSegment{Path: st.Segments[1].Path}, RemoveSegment{Path: "data/never/there.parquet"}}
		default:
			seg := ckFakeSegment(v)
			switch v % 4 {
			case 0:
				seg.Layout = EntityLayout{Kind: LayoutMixed}
				seg.IndexMax = TimeValue(seg.IndexMin.Time.Add(time.Hour + 123456789))
			case 1:
				seg.FileSize = nil
			case 2:
				seg.CoveragePath = ""
			case 3:
				seg.Layout.Identity = Identity{{Type: EntityUtf8, Str: "hé\u2028<&>\"\\\x01"}}
			}
			acts = []Action{AddSegment{Segment: seg}}
			if v%3 == 0 {
				acts = append(acts, UpdateTableCoverage{Coverage: CoveragePointer{IndexKind: ix.Kind, Path: fmt.Sprintf("%s/%d-tblcov-%032x-x.roar", tableCoverageDir, v, v)}})
			}
		}
		if _, err := tb.Commit(ctx, st.Version, acts); err != nil {
			t.Fatalf("commit %d: %v", v, err)
		}
	}
	return tb
}

// ckWrite writes the checkpoint of the state at v (from a full replay).
func ckWrite(t testing.TB, fsys storage.FS, v uint64) []byte {
	t.Helper()
	if err := ckStore(fsys, nil).writeCheckpoint(ckFull(t, fsys, v), nil); err != nil {
		t.Fatalf("checkpoint %d: %v", v, err)
	}
	data, err := fsys.ReadFile(checkpointPath(v))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// ckOpen replays fsys without a base through a fresh store and returns the
// state and the version of the checkpoint it started from (0: none).
func ckOpen(t testing.TB, fsys storage.FS, buf *lockedBuffer) (*State, uint64) {
	t.Helper()
	l := ckStore(fsys, buf)
	st, _, err := l.replay(context.Background(), nil)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	seed, _ := l.takeCheckpointSeed()
	return st, seed.versionOrZero()
}

// ckPut replaces the file name in fsys by data (damage done from outside).
func ckPut(t testing.TB, fsys storage.FS, name string, data []byte) {
	t.Helper()
	writeFSFile(t, fsys, name, data, true)
}

// The state from a checkpoint plus the commits after it equals the state
// replayed from commit 1, for a checkpoint at every version and replays
// to every later one; Open, Refresh of a fresh handle and replayTo agree,
// and the seed is the checkpoint's state.
func TestCheckpointStateEqualsReplay(t *testing.T) {
	ctx := context.Background()
	const n = 40
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, n)
	full := make([]*State, n+1)
	for v := 1; v <= n; v++ {
		full[v] = ckFull(t, fsys, uint64(v))
	}
	for v := 1; v <= n; v++ {
		ckWrite(t, fsys, uint64(v))
		st, from := ckOpen(t, fsys, nil)
		if from != uint64(v) {
			t.Fatalf("checkpoint %d written, replay started from %d", v, from)
		}
		ckSame(t, fmt.Sprintf("replay from checkpoint %d", v), st, full[n])
		tb := mustOpen(t, fsys, ckOptions(nil))
		ckSame(t, fmt.Sprintf("open with checkpoint %d", v), tb.State(), full[n])
		l := ckStore(fsys, nil)
		for w := max(1, v-4); w <= n; w++ {
			got, err := l.replayTo(ctx, nil, uint64(w))
			if err != nil {
				t.Fatalf("replayTo(%d) with checkpoints up to %d: %v", w, v, err)
			}
			ckSame(t, fmt.Sprintf("replayTo(%d) with checkpoints up to %d", w, v), got, full[w])
			seed, _ := l.takeCheckpointSeed()
			// Kept: the newest checkpointKeep, v-2..v.
			want := uint64(0)
			if w >= v-2 {
				want = uint64(min(w, v))
			}
			if seed.versionOrZero() != want {
				t.Fatalf("replayTo(%d) with checkpoints %d..%d started from checkpoint %d, want %d", w, v-2, v, seed.versionOrZero(), want)
			}
		}
		if got, _ := l.takeCheckpointSeed(); got != nil {
			t.Fatal("a seed was taken twice")
		}
	}
	if vs, _, _ := ckStore(fsys, nil).listCheckpoints(); !reflect.DeepEqual(vs, []uint64{n - 2, n - 1, n}) {
		t.Fatalf("checkpoints kept: %v", vs)
	}
}

// A checkpoint above CURRENT (CURRENT lagging after a crash) is used, and
// counts as rolled forward, so that CURRENT is republished.
func TestCheckpointAboveCurrent(t *testing.T) {
	ctx := context.Background()
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, 30)
	ckWrite(t, fsys, 20)
	ckPut(t, fsys, currentPath, []byte("5\n"))
	l := ckStore(fsys, nil)
	st, rolled, err := l.replay(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ckSame(t, "replay", st, ckFull(t, fsys, 30))
	if rolled != 25 {
		t.Fatalf("rolled forward over %d commits, want 25", rolled)
	}
	if _, err := Open(ctx, fsys, ckOptions(nil)); err != nil {
		t.Fatal(err)
	}
	if cur, _ := l.readCurrent(); cur != 30 {
		t.Fatalf("CURRENT is %d after open, want 30", cur)
	}
	// CURRENT below a checkpoint and a commit above it missing: still the
	// newest commit, and the missing one is not needed.
	ckPut(t, fsys, currentPath, []byte("25\n"))
	if err := fsys.Remove(CommitPath(22)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ckStore(fsys, nil).replay(ctx, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("commit 22 below CURRENT is missing after checkpoint 20: %v, want ErrCorrupt", err)
	}
}

// Truncated at every byte offset, the newest checkpoint is passed over for
// the older one (and, with that one truncated too, for a full replay),
// with a warning, and the state is the full replay's.
func TestCheckpointTornAtEveryOffset(t *testing.T) {
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, 12)
	ckWrite(t, fsys, 6)
	data := ckWrite(t, fsys, 12)
	want := ckFull(t, fsys, 12)
	buf := &lockedBuffer{}
	for k := range len(data) {
		if _, _, err := decodeCheckpoint(data[:k]); err == nil {
			t.Fatalf("a checkpoint cut at byte %d of %d decodes", k, len(data))
		}
		ckPut(t, fsys, checkpointPath(12), data[:k])
		st, from := ckOpen(t, fsys, buf)
		ckSame(t, fmt.Sprintf("cut at %d", k), st, want)
		if from != 6 {
			t.Fatalf("cut at %d: started from checkpoint %d, want 6", k, from)
		}
	}
	if !strings.Contains(buf.String(), "ignoring a checkpoint") || !strings.Contains(buf.String(), checkpointPath(12)) {
		t.Fatalf("the torn checkpoint was not logged: %.300s", buf.String())
	}
	older, err := fsys.ReadFile(checkpointPath(6))
	if err != nil {
		t.Fatal(err)
	}
	ckPut(t, fsys, checkpointPath(12), data[:len(data)-1])
	for _, k := range []int{0, 7, checkpointHeaderSize - 1, checkpointHeaderSize, len(older) / 2, len(older) - 1} {
		ckPut(t, fsys, checkpointPath(6), older[:k])
		st, from := ckOpen(t, fsys, nil)
		ckSame(t, fmt.Sprintf("both cut (%d)", k), st, want)
		if from != 0 {
			t.Fatalf("both checkpoints torn: started from %d", from)
		}
	}
}

// A flipped bit anywhere is caught (by the checksum, or before it by the
// magic and format checks) and the checkpoint ignored.
func TestCheckpointFlippedBits(t *testing.T) {
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, 12)
	data := ckWrite(t, fsys, 12)
	want := ckFull(t, fsys, 12)
	for k := range len(data) {
		bad := bytes.Clone(data)
		bad[k] ^= 1 << (k % 8)
		if _, _, err := decodeCheckpoint(bad); err == nil {
			t.Fatalf("bit %d of byte %d flipped: the checkpoint decodes", k%8, k)
		}
		ckPut(t, fsys, checkpointPath(12), bad)
		st, from := ckOpen(t, fsys, nil)
		ckSame(t, fmt.Sprintf("flip at %d", k), st, want)
		if from != 0 {
			t.Fatalf("flip at %d: started from checkpoint %d", k, from)
		}
	}
	bad := bytes.Clone(data)
	bad[len(bad)-1] ^= 0xff // the checksum itself
	if _, _, err := decodeCheckpoint(bad); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("damaged checksum: %v", err)
	}
}

// ---- hand-made checkpoints: every structural check ----

// ckParts are the pieces of a checkpoint file, assembled with a valid
// checksum by bytes(), so that each test exercises one check past it.
type ckParts struct {
	magic                   string
	format, flags           uint32
	version, covVersion     uint64
	origin, tail            commitDigest
	head, segs, cov         []byte
	segCount                uint64
	headLen, segLen, covLen *uint64 // override the real lengths
}

func (p ckParts) bytes() []byte {
	b := make([]byte, checkpointHeaderSize)
	copy(b, p.magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], p.format)
	le.PutUint32(b[12:], p.flags)
	le.PutUint64(b[16:], p.version)
	le.PutUint64(b[24:], p.covVersion)
	copy(b[32:], p.origin[:])
	copy(b[64:], p.tail[:])
	lens := []uint64{uint64(len(p.head)), uint64(len(p.segs)), uint64(len(p.cov))}
	for i, o := range []*uint64{p.headLen, p.segLen, p.covLen} {
		if o != nil {
			lens[i] = *o
		}
	}
	le.PutUint64(b[96:], lens[0])
	le.PutUint64(b[104:], lens[1])
	le.PutUint64(b[112:], lens[2])
	le.PutUint64(b[120:], p.segCount)
	b = append(append(append(b, p.head...), p.segs...), p.cov...)
	return le.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// ckPartsOf splits a real checkpoint into its parts.
func ckPartsOf(t testing.TB, data []byte) ckParts {
	t.Helper()
	h, err := parseCheckpointHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	off := uint64(checkpointHeaderSize)
	p := ckParts{magic: checkpointMagic, format: checkpointFormat, flags: h.flags, version: h.version, covVersion: h.coverageVersion,
		origin: h.origin, tail: h.tail, segCount: h.segCount}
	p.head = bytes.Clone(data[off : off+h.headLen])
	off += h.headLen
	p.segs = bytes.Clone(data[off : off+h.segLen])
	off += h.segLen
	p.cov = bytes.Clone(data[off : off+h.covLen])
	return p
}

// ckHead is the head of a checkpoint of version v with these actions.
func ckHead(t testing.TB, v uint64, acts ...Action) []byte {
	t.Helper()
	b, err := (&Commit{Version: v, BaseVersion: v - 1, Timestamp: t0, Actions: acts}).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ckRecords(t testing.TB, segs ...SegmentMeta) []byte {
	t.Helper()
	var b []byte
	for i := range segs {
		var err error
		if b, err = appendSegmentRecord(b, &segs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// Every check of decodeCheckpoint rejects a file built to fail it (with a
// valid checksum), and such a file in the table is ignored.
func TestCheckpointRejectsMalformed(t *testing.T) {
	fsys := storage.NewMem()
	tb := ckVariedLog(t, fsys, 12)
	want := ckFull(t, fsys, 12)
	good := ckPartsOf(t, ckWrite(t, fsys, 12))
	one := ckPartsOf(t, ckWrite(t, fsys, 1))
	if err := fsys.Remove(checkpointPath(1)); err != nil {
		t.Fatal(err)
	}
	meta := *want.Meta
	ptr := *want.Coverage
	seg := want.Segments[0]
	rec := func(mut func(s *SegmentMeta)) []byte {
		s := seg
		mut(&s)
		return ckRecords(t, s)
	}
	// A record with its bytes edited: the path is the first field.
	raw := ckRecords(t, seg)
	edit := func(at int, b ...byte) []byte {
		r := bytes.Clone(raw)
		copy(r[at:], b)
		return r
	}
	pathLen := int(raw[0]) // the paths of ckFakeSegment are shorter than 128 bytes
	afterPath := 1 + pathLen
	afterFormat := afterPath + 1 + len(FormatParquet)
	unsupported := meta
	unsupported.ReaderFeatures = []string{"time_machine"}
	noSchema := meta
	noSchema.Schema = nil
	otherKind := ptr
	otherKind.IndexKind = IndexKind{Type: IndexInt64, Width: 5}
	int64Bounds := func(s *SegmentMeta) { s.IndexMin, s.IndexMax = Int64Value(1), Int64Value(2) }

	cases := []struct {
		name string
		mut  func(p *ckParts)
		want string
	}{
		{"magic", func(p *ckParts) { p.magic = "TSFCHKPX" }, "bad magic"},
		{"format version", func(p *ckParts) { p.format = 2 }, "format version 2"},
		{"unknown flag", func(p *ckParts) { p.flags |= 4 }, "unknown flags"},
		{"version 0", func(p *ckParts) { p.version = 0 }, "version 0"},
		{"coverage bytes without the flag", func(p *ckParts) { p.cov = []byte{1, 2} }, "without the coverage flag"},
		{"head length", func(p *ckParts) { p.headLen = u64p(uint64(len(p.head)) + 1) }, "do not add up"},
		{"head length past the end", func(p *ckParts) { p.headLen = u64p(math.MaxUint64) }, "do not add up"},
		{"segments length past the end", func(p *ckParts) { p.segLen = u64p(math.MaxUint64 - 10) }, "do not add up"},
		{"coverage length", func(p *ckParts) { p.flags, p.covLen = checkpointFlagCoverage, u64p(7) }, "do not add up"},
		{"head not JSON", func(p *ckParts) { p.head = []byte("{not json") }, "head:"},
		{"head of another version", func(p *ckParts) { p.head = ckHead(t, 11, UpdateTableMeta{Meta: meta}) }, "head holds version 11"},
		{"head with an unknown action", func(p *ckParts) {
			p.head = []byte(strings.Replace(string(p.head), `"actions":[`, `"actions":[{"Frobnicate":{}},`, 1))
		}, "unknown actions"},
		{"head without actions", func(p *ckParts) {
			p.head = []byte(`{"version":12,"base_version":11,"timestamp":"2024-06-01T00:00:00Z","actions":[]}`)
		}, "0 actions"},
		{"head with three actions", func(p *ckParts) {
			p.head = ckHead(t, 12, UpdateTableMeta{Meta: meta}, UpdateTableCoverage{Coverage: ptr}, UpdateTableCoverage{Coverage: ptr})
		}, "are not UpdateTableMeta"},
		{"head with four actions", func(p *ckParts) {
			p.head = ckHead(t, 12, UpdateTableMeta{Meta: meta}, UpdateTableCoverage{Coverage: ptr}, UpdateTableCoverage{Coverage: ptr}, UpdateTableCoverage{Coverage: ptr})
		}, "4 actions"},
		{"head starting with a segment", func(p *ckParts) { p.head = ckHead(t, 12, AddSegment{Segment: seg}) }, "are not UpdateTableMeta"},
		{"head with a removal", func(p *ckParts) { p.head = ckHead(t, 12, UpdateTableMeta{Meta: meta}, RemoveSegment{Path: seg.Path}) }, "are not UpdateTableMeta"},
		{"head with an unsupported reader feature", func(p *ckParts) { p.head = ckHead(t, 12, UpdateTableMeta{Meta: unsupported}) }, "time_machine"},
		{"coverage version 0 with a pointer", func(p *ckParts) { p.covVersion = 0 }, "coverage version 0 outside"},
		{"coverage version above the version", func(p *ckParts) { p.covVersion = 13 }, "coverage version 13 outside"},
		{"coverage version without a pointer", func(p *ckParts) { p.head = ckHead(t, 12, UpdateTableMeta{Meta: meta}) }, "without a coverage pointer"},
		{"too many records", func(p *ckParts) { p.segCount = uint64(len(p.segs)) }, "cannot fit"},
		{"too few records", func(p *ckParts) { p.segCount-- }, "after the last record"},
		{"too many records for the bytes", func(p *ckParts) { p.segCount++ }, "record"},
		{"format", func(p *ckParts) { p.segs, p.segCount = rec(func(s *SegmentMeta) { s.Format = "orc" }), 1 }, "unknown segment format"},
		{"layout tag", func(p *ckParts) { p.segs, p.segCount = edit(afterFormat, 9), 1 }, "unknown entity layout tag 9"},
		{"empty identity", func(p *ckParts) { p.segs, p.segCount = edit(afterFormat+1, 0), 1 }, "identity of 0 components"},
		{"entity type", func(p *ckParts) { p.segs, p.segCount = edit(afterFormat+2, 9), 1 }, "unknown entity type 9"},
		{"int32 range", func(p *ckParts) {
			p.segs, p.segCount = rec(func(s *SegmentMeta) { s.Layout.Identity = Identity{{Type: EntityInt32, Int: math.MaxInt32 + 1}} }), 1
		}, "int32 component"},
		{"index tag", func(p *ckParts) {
			p.segs, p.segCount = rec(func(s *SegmentMeta) { s.Layout = EntityLayout{Kind: LayoutMixed} }), 1
			p.segs[afterFormat+1] = 7
		}, "unknown index value tag 7"},
		{"nanoseconds", func(p *ckParts) {
			r := rec(func(s *SegmentMeta) { s.Layout = EntityLayout{Kind: LayoutMixed} })
			i := afterFormat + 2 // after the timestamp tag: seconds, then nanoseconds
			_, n := binary.Varint(r[i:])
			p.segs = append(append(append([]byte(nil), r[:i+n]...), binary.AppendUvarint(nil, 1e9)...), r[i+n+1:]...)
			p.segCount = 1
		}, "nanoseconds 1000000000"},
		{"file size flag", func(p *ckParts) {
			r := rec(func(s *SegmentMeta) { s.FileSize, s.CoveragePath = nil, "" })
			r[len(r)-2] = 5
			p.segs, p.segCount = r, 1
		}, "file size flag 5"},
		{"string past the end", func(p *ckParts) { p.segs, p.segCount = append([]byte{100}, "aaaaaaaaaa"...), 1 }, "runs past the end"},
		{"truncated varint", func(p *ckParts) {
			p.segs, p.segCount = append(bytes.Repeat([]byte{0x80}, 11), 0, 0, 0, 0, 0, 0, 0, 0), 1
		}, "varint"},
		{"invalid UTF-8", func(p *ckParts) { p.segs, p.segCount = rec(func(s *SegmentMeta) { s.Path = "data/\xff.parquet" }), 1 }, "not valid UTF-8"},
		{"trailing bytes", func(p *ckParts) { p.segs = append(p.segs, 0) }, "after the last record"},
		{"bytes but no records", func(p *ckParts) { p.segCount = 0 }, "after the last record"},
		{"truncated signed varint", func(p *ckParts) {
			r := rec(func(s *SegmentMeta) { s.Layout = EntityLayout{Kind: LayoutMixed} })
			p.segs = append(append(r[:afterFormat+2:afterFormat+2], bytes.Repeat([]byte{0xff}, 11)...), make([]byte, 20)...)
			p.segCount = 1
		}, "signed varint"},
		{"duplicate segment", func(p *ckParts) { p.segs, p.segCount = ckRecords(t, seg, seg), 2 }, "listed twice"},
		{"path", func(p *ckParts) { p.segs, p.segCount = rec(func(s *SegmentMeta) { s.Path = "data/../x.parquet" }), 1 }, "segment 0:"},
		{"coverage path", func(p *ckParts) { p.segs, p.segCount = rec(func(s *SegmentMeta) { s.CoveragePath = "/abs.roar" }), 1 }, "coverage_path"},
		{"bounds reversed", func(p *ckParts) {
			p.segs, p.segCount = rec(func(s *SegmentMeta) {
				s.IndexMin, s.IndexMax = s.IndexMax, TimeValue(s.IndexMin.Time.Add(-time.Second))
			}), 1
		}, "state:"},
		{"bounds of another type", func(p *ckParts) { p.segs, p.segCount = rec(int64Bounds), 1 }, "state:"},
		{"segments without a schema", func(p *ckParts) {
			p.head = ckHead(t, 12, UpdateTableMeta{Meta: noSchema}, UpdateTableCoverage{Coverage: ptr})
		}, "no logical schema"},
		{"coverage pointer of another kind", func(p *ckParts) {
			p.head = ckHead(t, 12, UpdateTableMeta{Meta: meta}, UpdateTableCoverage{Coverage: otherKind})
		}, "index kind"},
		{"coverage section", func(p *ckParts) { p.flags, p.cov = checkpointFlagCoverage, []byte("not a bitmap") }, "coverage section"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := good
			p.head, p.segs, p.cov = bytes.Clone(good.head), bytes.Clone(good.segs), bytes.Clone(good.cov)
			c.mut(&p)
			_, _, err := decodeCheckpoint(p.bytes())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("decode: %v, want an error with %q", err, c.want)
			}
			ckPut(t, fsys, checkpointPath(12), p.bytes())
			buf := &lockedBuffer{}
			st, from := ckOpen(t, fsys, buf)
			ckSame(t, c.name, st, want)
			if from != 0 || !strings.Contains(buf.String(), c.want) {
				t.Fatalf("started from %d; log %q", from, buf.String())
			}
		})
	}
	// Version 1: one commit, so both digests are of it.
	p := one
	p.tail[0] ^= 1
	if _, _, err := decodeCheckpoint(p.bytes()); err == nil || !strings.Contains(err.Error(), "two different commit digests") {
		t.Fatalf("version 1 with two digests: %v", err)
	}
	// The good parts reassembled are a good checkpoint.
	if st, _, err := decodeCheckpoint(good.bytes()); err != nil {
		t.Fatal(err)
	} else {
		ckSame(t, "reassembled", st, want)
	}
	_ = tb
}

// A table directory replaced by another table with the same number of
// commits, its checkpoints carried over: none of them is used, because
// commit 1 (another table) or the commit at the checkpoint's version (a
// table with the same first commits, then diverged) is not the one the
// checkpoint was built from; a fresh open and a live handle's refresh show
// the new table exactly.
func TestCheckpointStaleAfterReplace(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	live, other, sibling := filepath.Join(root, "t"), filepath.Join(root, "other"), filepath.Join(root, "sibling")
	a := rpBuild(t, live, "a", 0, 10, 20, 30)
	rpCopy(t, live, sibling) // shares commits 1..5 with live
	for _, s := range []int64{40, 50, 60} {
		if _, err := rpAppend(t, a, "a", s); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []uint64{4, 6, 8} {
		ckWrite(t, storage.Local(live), v)
	}
	if a.State().Version != 8 {
		t.Fatalf("version %d", a.State().Version)
	}
	handle := mustOpen(t, storage.Local(live), ckOptions(nil))
	// The sibling diverges after commit 5 and reaches version 8 too.
	sib := mustOpen(t, storage.Local(sibling), ckOptions(nil))
	for _, s := range []int64{100, 110, 120} {
		if _, err := rpAppend(t, sib, "b", s); err != nil {
			t.Fatal(err)
		}
	}
	rpBuild(t, other, "c", 200, 210, 220, 230, 240, 250, 260) // version 8, another table
	for _, c := range []struct {
		name, dir string
		why       string
	}{{"another table", other, "commit 1 on disk is not"}, {"a diverged copy", sibling, "commit 8 on disk is not"}} {
		t.Run(c.name, func(t *testing.T) {
			if err := os.CopyFS(filepath.Join(c.dir, filepath.FromSlash(checkpointDir)), os.DirFS(filepath.Join(live, filepath.FromSlash(checkpointDir)))); err != nil {
				t.Fatal(err)
			}
			want := ckFull(t, storage.Local(c.dir), 8)
			buf := &lockedBuffer{}
			st, from := ckOpen(t, storage.Local(c.dir), buf)
			ckSame(t, "open", st, want)
			if from > 5 || (c.dir == other && from != 0) {
				t.Fatalf("started from stale checkpoint %d", from)
			}
			if !strings.Contains(buf.String(), "stale") || !strings.Contains(buf.String(), c.why) {
				t.Fatalf("log: %s", buf.String())
			}
			// Swap it in under the live handle.
			rpSwap(t, live, c.dir)
			got, err := handle.Refresh(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ckSame(t, "refresh after the swap", got, want)
		})
	}
}

// A log rewound below its newest checkpoint (restored from an older
// backup), and then grown again with other commits: the checkpoints above
// the log, and those whose version now holds another commit, are ignored.
func TestCheckpointNewerThanLog(t *testing.T) {
	ctx := context.Background()
	fsys := ckCheckpointedLog(t, 30, 10, 20, 30)
	rewind := func(to uint64, from uint64) {
		for v := to + 1; v <= from; v++ {
			if err := fsys.Remove(CommitPath(v)); err != nil {
				t.Fatal(err)
			}
		}
		ckPut(t, fsys, currentPath, []byte(strconv.FormatUint(to, 10)+"\n"))
	}
	rewind(25, 30)
	buf := &lockedBuffer{}
	st, from := ckOpen(t, fsys, buf)
	ckSame(t, "rewound to 25", st, ckFull(t, fsys, 25))
	if from != 20 || !strings.Contains(buf.String(), "the log has no commit 30") {
		t.Fatalf("started from %d; log %s", from, buf.String())
	}
	rewind(15, 25)
	tb := mustOpen(t, fsys, ckOptions(nil))
	ckSame(t, "rewound to 15", tb.State(), ckFull(t, fsys, 15))
	for v := 16; v <= 30; v++ { // other commits under the old numbers
		if _, err := tb.Commit(ctx, tb.State().Version, marker(fmt.Sprint("regrown", v))); err != nil {
			t.Fatal(err)
		}
	}
	buf = &lockedBuffer{}
	st, from = ckOpen(t, fsys, buf)
	ckSame(t, "regrown to 30", st, ckFull(t, fsys, 30))
	if from != 10 || !strings.Contains(buf.String(), "commit 20 on disk is not") || !strings.Contains(buf.String(), "commit 30 on disk is not") {
		t.Fatalf("started from %d; log %s", from, buf.String())
	}
	for _, v := range []uint64{17, 25, 30} {
		got, err := ckStore(fsys, nil).replayTo(ctx, nil, v)
		if err != nil {
			t.Fatal(err)
		}
		ckSame(t, fmt.Sprintf("replayTo(%d)", v), got, ckFull(t, fsys, v))
	}
}

// No checkpoint directory, an empty one, and names that are not
// checkpoints: a full replay, quietly. A checkpoint file under another
// version's name is ignored.
func TestCheckpointMissingAndJunk(t *testing.T) {
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, 12)
	want := ckFull(t, fsys, 12)
	check := func(what string, wantFrom uint64, wantLog string) {
		t.Helper()
		buf := &lockedBuffer{}
		st, from := ckOpen(t, fsys, buf)
		ckSame(t, what, st, want)
		if from != wantFrom {
			t.Fatalf("%s: started from %d, want %d", what, from, wantFrom)
		}
		if (wantLog == "") != (buf.String() == "") || !strings.Contains(buf.String(), wantLog) {
			t.Fatalf("%s: log %q, want %q", what, buf.String(), wantLog)
		}
	}
	check("no directory", 0, "")
	if err := fsys.MkdirAll(checkpointDir); err != nil {
		t.Fatal(err)
	}
	check("empty directory", 0, "")
	for _, n := range []string{"x", "12.checkpoint", "00000000000000000012.checkpoint.bak", "00000000000000000000.checkpoint",
		".00000000000000000012.checkpoint.partial-0123456789abcdef", "0000000000000000012.checkpoint"} {
		ckPut(t, fsys, checkpointDir+"/"+n, []byte("junk"))
	}
	if err := fsys.MkdirAll(checkpointDir + "/00000000000000000011.checkpoint.d"); err != nil {
		t.Fatal(err)
	}
	check("junk names", 0, "")
	data := ckWrite(t, fsys, 9)
	check("checkpoint 9", 9, "")
	ckPut(t, fsys, checkpointPath(11), data)
	check("checkpoint 9 also named 11", 9, "the file holds version 9")
	if err := fsys.MkdirAll(checkpointPath(12)); err != nil { // a directory
		t.Fatal(err)
	}
	check("a directory named like a checkpoint", 9, checkpointPath(12))
}

// Checkpoints that cannot be read (the storage fails) are passed over; a
// checkpoint directory that cannot be listed means a full replay.
func TestCheckpointUnreadable(t *testing.T) {
	mem := storage.NewMem()
	ckVariedLog(t, mem, 12)
	ckWrite(t, mem, 6)
	ckWrite(t, mem, 12)
	want := ckFull(t, mem, 12)
	eio := errors.New("input/output error")
	for _, c := range []struct {
		name     string
		fault    storage.Fault
		wantFrom uint64
		wantLog  string
	}{
		{"open of the newest fails", storage.Fault{Op: storage.OpOpen, Match: func(n string) bool { return n == checkpointPath(12) }, Err: eio}, 6, "input/output error"},
		{"open of every checkpoint fails", storage.Fault{Op: storage.OpOpen, Match: func(n string) bool { return strings.HasPrefix(n, checkpointDir) }, Err: eio}, 0, "input/output error"},
		{"the listing fails", storage.Fault{Op: storage.OpList, Match: func(n string) bool { return n == checkpointDir }, Err: eio}, 0, "cannot list checkpoints"},
		{"reading commit 12 for the digest fails once", storage.Fault{Op: storage.OpReadFile, Nth: 1, Match: func(n string) bool { return n == CommitPath(12) }, Err: eio}, 6, "input/output error"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := storage.NewFaultFS(mem)
			f.Inject(c.fault)
			buf := &lockedBuffer{}
			st, from := ckOpen(t, f, buf)
			ckSame(t, c.name, st, want)
			if from != c.wantFrom || !strings.Contains(buf.String(), c.wantLog) {
				t.Fatalf("started from %d, log %q", from, buf.String())
			}
		})
	}
	// A storage error on the log itself is still the replay's error.
	f := storage.NewFaultFS(mem)
	f.Inject(storage.Fault{Op: storage.OpReadFile, Match: func(n string) bool { return n == CommitPath(1) }, Err: eio})
	if _, _, err := ckStore(f, nil).replay(context.Background(), nil); !errors.Is(err, ErrStorage) {
		t.Fatalf("commit 1 unreadable: %v, want ErrStorage", err)
	}
}

// StateAt of old versions on a handle opened from a checkpoint: each is
// the state replayed from commit 1.
func TestCheckpointStateAt(t *testing.T) {
	ctx := context.Background()
	fsys := ckCheckpointedLog(t, 250, 100, 200)
	tb := mustOpen(t, fsys, ckOptions(nil))
	ckSame(t, "open", tb.State(), ckFull(t, fsys, 250))
	for _, v := range []uint64{150, 1, 50, 99, 100, 101, 199, 200, 201, 249, 120} {
		st, err := tb.StateAt(ctx, v)
		if err != nil {
			t.Fatalf("StateAt(%d): %v", v, err)
		}
		ckSame(t, fmt.Sprintf("StateAt(%d)", v), st, ckFull(t, fsys, v))
	}
}

// The codec round-trips every shape a state can take: each index type
// with extreme values, every entity component type, no entity columns,
// timezones, schema annotations, absent optional fields.
func TestCheckpointCodecShapes(t *testing.T) {
	ctx := context.Background()
	tz := "Europe/Berlin"
	i64 := func(name string) Field { return Field{Name: name, Type: DataType{Kind: TypeInt64}} }
	u64 := func(name string) Field { return Field{Name: name, Type: DataType{Kind: TypeUInt64}} }
	i32 := func(name string) Field { return Field{Name: name, Type: DataType{Kind: TypeInt32}} }
	utf := func(name string) Field { return Field{Name: name, Type: DataType{Kind: TypeUtf8}} }
	tsf := Field{Name: "ts", Type: DataType{Kind: TypeTimestamp, Unit: Nanos, Timezone: &tz}, Metadata: map[string]string{"k": "v"}}
	type shape struct {
		name   string
		co     CreateOptions
		bounds [][2]IndexValue
		ident  func(i int) EntityLayout
	}
	utc := func(y int, ns int) IndexValue { return TimeValue(time.Date(y, 3, 4, 5, 6, 7, ns, time.UTC)) }
	shapes := []shape{
		{"timestamp, 4 entity types, timezone, annotations",
			CreateOptions{Index: IndexSpec{Column: "ts", EntityColumns: []string{"s", "a", "b", "c"}, Kind: IndexKind{Type: IndexTimestamp, Time: TimeGranularity{Minutes, 5}, Timezone: &tz}},
				Schema: &Schema{Columns: []Field{tsf, utf("s"), i32("a"), i64("b"), u64("c")}, Metadata: map[string]string{"pandas": "{}"}}},
			[][2]IndexValue{{utc(1, 0), utc(9999, 999999999)}, {utc(1969, 1), utc(1970, 0)}, {utc(2024, 500), utc(2024, 500)}},
			func(i int) EntityLayout {
				if i == 1 {
					return EntityLayout{Kind: LayoutMixed}
				}
				return EntityLayout{Kind: LayoutSingle, Identity: Identity{{Type: EntityUtf8, Str: strings.Repeat("é", i*100)},
					{Type: EntityInt32, Int: math.MinInt32 + int64(i)}, {Type: EntityInt64, Int: math.MaxInt64 - int64(i)}, {Type: EntityUInt64, Uint: math.MaxUint64 - uint64(i)}}}
			}},
		{"int64, no entities",
			CreateOptions{Index: IndexSpec{Column: "k", Kind: IndexKind{Type: IndexInt64, Width: 7}}, Schema: &Schema{Columns: []Field{i64("k")}}},
			[][2]IndexValue{{Int64Value(math.MinInt64), Int64Value(math.MaxInt64)}, {Int64Value(-1), Int64Value(0)}},
			func(int) EntityLayout { return EntityLayout{Kind: LayoutNotApplicable} }},
		{"uint64, an int32 entity",
			CreateOptions{Index: IndexSpec{Column: "k", EntityColumns: []string{"e"}, Kind: IndexKind{Type: IndexUInt64, Width: 1}}, Schema: &Schema{Columns: []Field{u64("k"), i32("e")}}},
			[][2]IndexValue{{Uint64Value(0), Uint64Value(math.MaxUint64)}, {Uint64Value(1 << 63), Uint64Value(1<<63 + 1)}},
			func(i int) EntityLayout {
				return EntityLayout{Kind: LayoutSingle, Identity: Identity{{Type: EntityInt32, Int: math.MaxInt32 - int64(i)}}}
			}},
	}
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			fsys := storage.NewMem()
			tb := mustCreateTable(t, fsys, s.co, ckOptions(nil))
			for i, b := range s.bounds {
				seg := ckFakeSegment(i)
				seg.IndexMin, seg.IndexMax, seg.Layout = b[0], b[1], s.ident(i)
				if i%2 == 1 {
					seg.FileSize, seg.CoveragePath = nil, ""
				}
				acts := []Action{AddSegment{Segment: seg}}
				if i == 0 {
					acts = append(acts, UpdateTableCoverage{Coverage: CoveragePointer{IndexKind: s.co.Index.Kind, Path: "_coverage/table/x.roar"}})
				}
				if _, err := tb.Commit(ctx, tb.State().Version, acts); err != nil {
					t.Fatal(err)
				}
			}
			for v := uint64(1); v <= tb.State().Version; v++ {
				st := ckFull(t, fsys, v)
				for _, cov := range [][]byte{nil, {}} {
					data, err := encodeCheckpoint(st, cov, t0)
					if err != nil {
						t.Fatal(err)
					}
					if cov != nil {
						continue // an empty coverage section is not a valid coverage encoding
					}
					got, gotCov, err := decodeCheckpoint(data)
					if err != nil {
						t.Fatalf("version %d: %v", v, err)
					}
					ckSame(t, fmt.Sprintf("version %d", v), got, st)
					if gotCov != nil {
						t.Fatal("a coverage section appeared")
					}
				}
			}
		})
	}
}

// The codec knows every field of the types it encodes: adding a field to
// one of them must come with a change of the segment record (and of
// docs/format/checkpoint.md), or this test fails.
func TestCheckpointCodecCoversTypes(t *testing.T) {
	for _, c := range []struct {
		v      any
		fields int
	}{{SegmentMeta{}, 8}, {EntityLayout{}, 2}, {EntityValue{}, 4}, {IndexValue{}, 4}, {State{}, 9}, {CoveragePointer{}, 2}} {
		if n := reflect.TypeOf(c.v).NumField(); n != c.fields {
			t.Errorf("%T has %d fields; the checkpoint codec was written for %d: update checkpoint.go, checkpoint.md and this test", c.v, n, c.fields)
		}
	}
}

// The bytes of the example in docs/format/checkpoint.md: the checkpoint of
// the ts_entity fixture at version 2, its head stamped 2026-12-01T12:00Z.
// The header and the segment record are spelled out; the whole file is
// pinned by its digest (the head is the commit encoder's output).
func TestCheckpointGolden(t *testing.T) {
	fsys := storage.Local(filepath.Join("..", "testdata", "reference", "tables", "ts_entity"))
	st, err := ckStore(fsys, nil).replayLogTo(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	data, err := encodeCheckpoint(st, nil, time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	const header = "54534643484b5054" + "01000000" + "00000000" + "0200000000000000" + "0200000000000000" +
		"56884628950aaaf927df8e200d88c40e1626f8d81f6862189767163827f7eeac" +
		"22be21094e2054103384d629683aff77032f3272beb882ac763a2ad167f9f3b9" +
		"5303000000000000" + "ca00000000000000" + "0000000000000000" + "0100000000000000"
	const record = "41" + "646174612f5f6d616e616765642f617070656e642f38613632376136632d656639662d346434642d383363622d3364656531353033343463312e70617271756574" +
		"07" + "70617271756574" + "02" + "01" + "01" + "04" + "4e564441" +
		"01" + "8092d3e50c" + "00" + "01" + "e095bce60c" + "00" + "f001" + "01" + "c514" +
		"64" + "5f636f7665726167652f7365676d656e74732f736567636f762d38323566336462386633363433626562383266393738343364343566363263372d35653830653436312d616438632d346334662d386331382d3739666538663639633238382e726f6172"
	const crc = "82bc11f5"
	if got := fmt.Sprintf("%x", data[:checkpointHeaderSize]); got != header {
		t.Errorf("header\n%s\nwant\n%s", got, header)
	}
	if got := fmt.Sprintf("%x", data[checkpointHeaderSize+0x353:]); got != record+crc {
		t.Errorf("segment record and checksum\n%s\nwant\n%s", got, record+crc)
	}
	if got := fmt.Sprintf("%x", sha256Sum(data)); got != "280223683c03cd013734e60fe3021ddc90a0280b21e5b5fb1eacd3a7976fb6f8" {
		t.Errorf("the file's SHA-256 is %s", got)
	}
	back, _, err := decodeCheckpoint(data)
	if err != nil {
		t.Fatal(err)
	}
	ckSame(t, "golden", back, st)
}

func sha256Sum(b []byte) [32]byte { return digestOf(b) }

// A cancelled replay stops even with a checkpoint to start from; a
// checkpoint file that shrinks while it is read is passed over; leftover
// checkpoints of a table whose log is gone are ignored, and Create makes
// a new table there.
func TestCheckpointReadCorners(t *testing.T) {
	ctx := context.Background()
	fsys := storage.NewMem()
	ckVariedLog(t, fsys, 12)
	ckWrite(t, fsys, 6)
	ckWrite(t, fsys, 12)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := ckStore(fsys, nil).replay(cancelled, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled replay: %v", err)
	}
	if _, err := ckStore(fsys, nil).replayTo(cancelled, nil, 12); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled replayTo: %v", err)
	}

	// On disk: the newest checkpoint is truncated in place between the
	// header read and the rest (when its commit's digest is read).
	dir := t.TempDir()
	copyToDisk(t, fsys, dir)
	ckFile := filepath.Join(dir, filepath.FromSlash(checkpointPath(12)))
	f := storage.NewFaultFS(storage.Local(dir))
	f.Inject(storage.Fault{Op: storage.OpReadFile, Match: func(n string) bool {
		if n == CommitPath(12) {
			if err := os.Truncate(ckFile, 200); err != nil {
				t.Error(err)
			}
		}
		return false
	}})
	buf := &lockedBuffer{}
	st, from := ckOpen(t, f, buf)
	ckSame(t, "checkpoint shrunk while read", st, ckFull(t, fsys, 12))
	if from != 6 || !strings.Contains(buf.String(), "read "+checkpointPath(12)) {
		t.Fatalf("started from %d, log %q", from, buf.String())
	}

	// The log is gone, the checkpoints stay.
	for v := uint64(1); v <= 12; v++ {
		if err := fsys.Remove(CommitPath(v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fsys.Remove(currentPath); err != nil {
		t.Fatal(err)
	}
	buf = &lockedBuffer{}
	if _, err := Open(ctx, fsys, ckOptions(buf)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open without a log: %v", err)
	}
	if !strings.Contains(buf.String(), "the log has no commit 1") {
		t.Fatalf("log %q", buf.String())
	}
	tb := mustCreateTable(t, fsys, CreateOptions{Index: tsIndex()}, ckOptions(nil))
	ckSame(t, "re-created", tb.State(), ckFull(t, fsys, 1))
	ckWrite(t, fsys, 1) // prunes the old table's 6 and 12 above it
	if vs, _ := ckList(t, fsys); !slices.Equal(vs, []uint64{1}) {
		t.Fatalf("checkpoints %v", vs)
	}
}
