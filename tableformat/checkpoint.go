// Checkpoints: the replayed state of a table at one version, kept beside
// the log so that opening a long log costs one file plus the commits after
// it instead of every commit from 1. This file is the codec; the files,
// their discovery, writing and pruning are in checkpoint_store.go. The
// bytes are described in docs/format/checkpoint.md.

package tableformat

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"
	"unicode/utf8"

	"github.com/tsflight/tsflight/coverage"
)

// Checkpoint names and layout. NB: on-disk values; must not change (a
// change of the layout is a new checkpointFormat).
const (
	// checkpointDir holds the checkpoints. Neither timeseries-table-format
	// 0.9.0 nor tsflight's vacuum looks inside it.
	checkpointDir = LogDir + "/_checkpoints"
	// checkpointMagic starts every checkpoint file.
	checkpointMagic = "TSFCHKPT"
	// checkpointFormat is the only layout this build reads and writes.
	checkpointFormat = 1
	// checkpointHeaderSize is the fixed part before the sections and
	// checkpointTrailerSize the CRC-32C after them.
	checkpointHeaderSize  = 128
	checkpointTrailerSize = 4
	// checkpointFlagCoverage marks a file that has a coverage section.
	checkpointFlagCoverage = 1
)

// The segment record tags. NB: on-disk values.
const (
	ckLayoutNotApplicable = 0
	ckLayoutMixed         = 1
	ckLayoutSingle        = 2

	ckIndexTimestamp = 1
	ckIndexInt64     = 2
	ckIndexUInt64    = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCheckpointFormat marks a checkpoint of a format version this build
// does not read (written by a newer build, say).
var errCheckpointFormat = errors.New("unknown checkpoint format version")

// checkpointPath returns the table-relative name of the checkpoint of
// version v: the version zero-padded to 20 digits, the width of the
// largest uint64, so that the sorted directory listing is in version order.
func checkpointPath(v uint64) string {
	return fmt.Sprintf("%s/%020d.checkpoint", checkpointDir, v)
}

// checkpointHeader is the fixed-size start of a checkpoint file.
type checkpointHeader struct {
	flags           uint32
	version         uint64 // the table version the checkpoint captures
	coverageVersion uint64 // State.CoverageVersion
	origin, tail    commitDigest
	headLen         uint64 // the head: a commit document (JSON)
	segLen          uint64 // the segments section (binary records)
	covLen          uint64 // the coverage section (opaque)
	segCount        uint64 // records in the segments section
	raw             [checkpointHeaderSize]byte
}

// parseCheckpointHeader reads the header in b (at least
// checkpointHeaderSize bytes). It checks the magic and the format version
// only: nothing else in it can be trusted before the checksum passed.
func parseCheckpointHeader(b []byte) (checkpointHeader, error) {
	var h checkpointHeader
	if len(b) < checkpointHeaderSize {
		return h, fmt.Errorf("%d bytes, shorter than the %d-byte header", len(b), checkpointHeaderSize)
	}
	if string(b[:8]) != checkpointMagic {
		return h, fmt.Errorf("bad magic %q (want %q)", b[:8], checkpointMagic)
	}
	if f := binary.LittleEndian.Uint32(b[8:]); f != checkpointFormat {
		return h, fmt.Errorf("%w %d (this build reads only %d)", errCheckpointFormat, f, checkpointFormat)
	}
	copy(h.raw[:], b)
	le := binary.LittleEndian
	h.flags = le.Uint32(b[12:])
	h.version = le.Uint64(b[16:])
	h.coverageVersion = le.Uint64(b[24:])
	copy(h.origin[:], b[32:64])
	copy(h.tail[:], b[64:96])
	h.headLen = le.Uint64(b[96:])
	h.segLen = le.Uint64(b[104:])
	h.covLen = le.Uint64(b[112:])
	h.segCount = le.Uint64(b[120:])
	return h, nil
}

// encodeCheckpoint serializes st (with the encoded table coverage cov, or
// nil for none) as a checkpoint file. now is the head's timestamp.
func encodeCheckpoint(st *State, cov []byte, now time.Time) ([]byte, error) {
	if st == nil || st.Version == 0 || st.Meta == nil {
		return nil, errors.New("no state to checkpoint")
	}
	if st.digest == (commitDigest{}) || st.origin == (commitDigest{}) {
		return nil, fmt.Errorf("the state of version %d does not know the digests of its commits", st.Version)
	}
	actions := []Action{UpdateTableMeta{Meta: *st.Meta}}
	if st.Coverage != nil {
		actions = append(actions, UpdateTableCoverage{Coverage: *st.Coverage})
	}
	if a, ok := st.propertiesAction(); ok {
		actions = append(actions, a) // tables without properties keep their bytes
	}
	head, err := (&Commit{Version: st.Version, BaseVersion: st.Version - 1, Timestamp: now.UTC(), Actions: actions}).MarshalJSON()
	if err != nil {
		return nil, err
	}
	size := checkpointHeaderSize + len(head) + len(cov) + checkpointTrailerSize
	for i := range st.Segments {
		size += 64 + len(st.Segments[i].Path) + len(st.Segments[i].CoveragePath)
	}
	b := make([]byte, checkpointHeaderSize, size)
	b = append(b, head...)
	segStart := len(b)
	for i := range st.Segments {
		if b, err = appendSegmentRecord(b, &st.Segments[i]); err != nil {
			return nil, fmt.Errorf("segment %q: %w", st.Segments[i].Path, err)
		}
	}
	segLen := len(b) - segStart
	b = append(b, cov...)
	var flags uint32
	if cov != nil {
		flags |= checkpointFlagCoverage
	}
	le := binary.LittleEndian
	copy(b[0:8], checkpointMagic)
	le.PutUint32(b[8:], checkpointFormat)
	le.PutUint32(b[12:], flags)
	le.PutUint64(b[16:], st.Version)
	le.PutUint64(b[24:], st.CoverageVersion)
	copy(b[32:64], st.origin[:])
	copy(b[64:96], st.digest[:])
	le.PutUint64(b[96:], uint64(len(head)))
	le.PutUint64(b[104:], uint64(segLen))
	le.PutUint64(b[112:], uint64(len(cov)))
	le.PutUint64(b[120:], uint64(len(st.Segments)))
	return le.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// decodeCheckpoint reads a whole checkpoint file and returns the state it
// holds and its coverage section (nil when it has none). It checks, in
// order: the size, magic and format version; the CRC-32C over everything;
// the header's lengths against the size; the head with the commit decoder
// (which runs the reader compatibility check on the metadata before it
// decodes anything else); the segment records; and then the state with the
// replay code, exactly as a commit installing it all at once would be
// checked. The digests are not compared with the log here (the caller
// does); an error means the file must be ignored.
func decodeCheckpoint(data []byte) (*State, []byte, error) {
	h, err := parseCheckpointHeader(data)
	if err != nil {
		return nil, nil, err
	}
	if len(data) < checkpointHeaderSize+checkpointTrailerSize {
		return nil, nil, fmt.Errorf("%d bytes, too short for a header and a checksum", len(data))
	}
	body := data[:len(data)-checkpointTrailerSize]
	if want, got := binary.LittleEndian.Uint32(data[len(body):]), crc32.Checksum(body, castagnoli); want != got {
		return nil, nil, fmt.Errorf("checksum mismatch (CRC-32C %08x, the file says %08x): torn or damaged", got, want)
	}
	if h.flags&^checkpointFlagCoverage != 0 {
		return nil, nil, fmt.Errorf("unknown flags %#x", h.flags)
	}
	if h.version == 0 {
		return nil, nil, errors.New("version 0")
	}
	if h.flags&checkpointFlagCoverage == 0 && h.covLen != 0 {
		return nil, nil, fmt.Errorf("a %d-byte coverage section without the coverage flag", h.covLen)
	}
	rest := uint64(len(body) - checkpointHeaderSize)
	if h.headLen > rest || h.segLen > rest-h.headLen || h.covLen != rest-h.headLen-h.segLen {
		return nil, nil, fmt.Errorf("section lengths %d+%d+%d do not add up to the %d bytes after the header", h.headLen, h.segLen, h.covLen, rest)
	}
	if h.version == 1 && h.origin != h.tail {
		return nil, nil, errors.New("version 1 with two different commit digests")
	}
	off := uint64(checkpointHeaderSize)
	headBytes := body[off : off+h.headLen]
	off += h.headLen
	segBytes := body[off : off+h.segLen]
	off += h.segLen
	var cov []byte
	if h.flags&checkpointFlagCoverage != 0 {
		cov = body[off : off+h.covLen]
	}

	c, err := decodeCommit(headBytes)
	if err != nil {
		return nil, nil, fmt.Errorf("head: %w", err)
	}
	if c.Version != h.version {
		return nil, nil, fmt.Errorf("head holds version %d, the header %d", c.Version, h.version)
	}
	if len(c.Skipped) > 0 {
		return nil, nil, fmt.Errorf("head has unknown actions %v", c.Skipped)
	}
	const headShape = "UpdateTableMeta [, UpdateTableCoverage] [, SetTableProperties]"
	acts := c.Actions
	if n := len(acts); n == 0 || n > 3 {
		return nil, nil, fmt.Errorf("head has %d actions, want %s", n, headShape)
	}
	if _, ok := acts[0].(UpdateTableMeta); !ok {
		return nil, nil, errors.New("head actions are not " + headShape)
	}
	tail := acts[1:]
	var hasCoverage bool
	if len(tail) > 0 {
		_, hasCoverage = tail[0].(UpdateTableCoverage)
		if hasCoverage {
			tail = tail[1:]
		}
	}
	if len(tail) > 1 {
		return nil, nil, errors.New("head actions are not " + headShape)
	}
	if len(tail) == 1 {
		if _, ok := tail[0].(SetTableProperties); !ok {
			return nil, nil, errors.New("head actions are not " + headShape)
		}
	}
	if hasCoverage {
		if h.coverageVersion == 0 || h.coverageVersion > h.version {
			return nil, nil, fmt.Errorf("coverage version %d outside 1..%d", h.coverageVersion, h.version)
		}
	} else if h.coverageVersion != 0 {
		return nil, nil, fmt.Errorf("coverage version %d without a coverage pointer", h.coverageVersion)
	}

	segs, err := decodeSegmentRecords(segBytes, h.segCount)
	if err != nil {
		return nil, nil, fmt.Errorf("segments: %w", err)
	}
	byPath := make(map[string]int, len(segs)+1)
	for i := range segs {
		seg := &segs[i]
		if err := ValidatePath(seg.Path); err != nil {
			return nil, nil, fmt.Errorf("segment %d: %w", i, err)
		}
		if seg.CoveragePath != "" {
			if err := ValidatePath(seg.CoveragePath); err != nil {
				return nil, nil, fmt.Errorf("segment %d: coverage_path: %w", i, err)
			}
		}
		if _, dup := byPath[seg.Path]; dup {
			return nil, nil, fmt.Errorf("segment %q is listed twice", seg.Path)
		}
		byPath[seg.Path] = i
	}
	// The replay code checks the rest: the head applied to the segments
	// as one commit that installs the metadata (so every segment is
	// validated against it), the coverage pointer and the state rules.
	base := &State{Version: h.version - 1, Segments: segs, byPath: byPath}
	st, err := base.applyOwned(c, checkpointPath(h.version))
	if err != nil {
		return nil, nil, fmt.Errorf("state: %w", err)
	}
	st.CoverageVersion = h.coverageVersion
	st.digest, st.origin = h.tail, h.origin
	if cov != nil {
		if _, err := coverage.Decode(cov, len(st.Meta.Index.EntityColumns) > 0); err != nil {
			return nil, nil, fmt.Errorf("coverage section: %w", err)
		}
		cov = bytes.Clone(cov)
	}
	return st, cov, nil
}

// ---- segment records ----

func appendCkString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendCkIndexValue(b []byte, v *IndexValue) ([]byte, error) {
	switch v.Type {
	case IndexTimestamp:
		b = append(b, ckIndexTimestamp)
		b = binary.AppendVarint(b, v.Time.Unix())
		return binary.AppendUvarint(b, uint64(v.Time.Nanosecond())), nil
	case IndexInt64:
		b = append(b, ckIndexInt64)
		return binary.AppendVarint(b, v.Int), nil
	case IndexUInt64:
		b = append(b, ckIndexUInt64)
		return binary.AppendUvarint(b, v.Uint), nil
	}
	return nil, fmt.Errorf("unknown index value type %q", v.Type)
}

// appendSegmentRecord appends one segment record (see checkpoint.md).
func appendSegmentRecord(b []byte, seg *SegmentMeta) ([]byte, error) {
	b = appendCkString(b, seg.Path)
	b = appendCkString(b, seg.Format)
	switch seg.Layout.Kind {
	case LayoutNotApplicable:
		b = append(b, ckLayoutNotApplicable)
	case LayoutMixed:
		b = append(b, ckLayoutMixed)
	case LayoutSingle:
		b = append(b, ckLayoutSingle)
		b = binary.AppendUvarint(b, uint64(len(seg.Layout.Identity)))
		for _, c := range seg.Layout.Identity {
			b = append(b, byte(c.Type))
			switch c.Type {
			case EntityUtf8:
				b = appendCkString(b, c.Str)
			case EntityInt32, EntityInt64:
				b = binary.AppendVarint(b, c.Int)
			case EntityUInt64:
				b = binary.AppendUvarint(b, c.Uint)
			default:
				return nil, fmt.Errorf("unknown entity type %d", c.Type)
			}
		}
	default:
		return nil, fmt.Errorf("unknown entity layout %q", seg.Layout.Kind)
	}
	var err error
	if b, err = appendCkIndexValue(b, &seg.IndexMin); err != nil {
		return nil, err
	}
	if b, err = appendCkIndexValue(b, &seg.IndexMax); err != nil {
		return nil, err
	}
	b = binary.AppendUvarint(b, seg.RowCount)
	if seg.FileSize == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.AppendUvarint(b, *seg.FileSize)
	}
	return appendCkString(b, seg.CoveragePath), nil
}

// ckReader reads segment records. Strings are cut from one string copy of
// the whole section, so decoding allocates a handful of large blocks, not
// several small ones per segment. The first error sticks.
type ckReader struct {
	b   []byte
	s   string // the same bytes as b
	off int
	err error
}

func (r *ckReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.off, fmt.Sprintf(format, args...))
	}
}

func (r *ckReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("unexpected end")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *ckReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad or truncated unsigned varint")
		return 0
	}
	r.off += n
	return v
}

func (r *ckReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail("bad or truncated signed varint")
		return 0
	}
	r.off += n
	return v
}

func (r *ckReader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail("string of %d bytes runs past the end", n)
		return ""
	}
	s := r.s[r.off : r.off+int(n)]
	if !utf8.ValidString(s) {
		r.fail("string is not valid UTF-8")
		return ""
	}
	r.off += int(n)
	return s
}

func (r *ckReader) indexValue() IndexValue {
	switch tag := r.byte(); tag {
	case ckIndexTimestamp:
		sec, ns := r.varint(), r.uvarint()
		if ns >= 1e9 {
			r.fail("nanoseconds %d out of range", ns)
		}
		return IndexValue{Type: IndexTimestamp, Time: time.Unix(sec, int64(ns)).UTC()}
	case ckIndexInt64:
		return IndexValue{Type: IndexInt64, Int: r.varint()}
	case ckIndexUInt64:
		return IndexValue{Type: IndexUInt64, Uint: r.uvarint()}
	default:
		r.fail("unknown index value tag %d", tag)
		return IndexValue{}
	}
}

// minSegmentRecord is the smallest record: empty strings, a layout byte,
// two one-byte int64 bounds with their tags, row count and size flag.
const minSegmentRecord = 1 + 1 + 1 + 2 + 2 + 1 + 1 + 1

// decodeSegmentRecords reads exactly count records filling b.
func decodeSegmentRecords(b []byte, count uint64) ([]SegmentMeta, error) {
	if count > uint64(len(b)/minSegmentRecord) {
		return nil, fmt.Errorf("%d records cannot fit in %d bytes", count, len(b))
	}
	if count == 0 {
		if len(b) != 0 {
			return nil, fmt.Errorf("%d bytes after the last record", len(b))
		}
		return nil, nil // as a replay that never added a segment has it
	}
	r := &ckReader{b: b, s: string(b)}
	segs := make([]SegmentMeta, count)
	sizes := make([]uint64, count) // FileSize points into this
	var idents []EntityValue       // Single identities are carved from this
	for i := range segs {
		seg := &segs[i]
		seg.Path = r.string()
		seg.Format = r.string()
		if seg.Format != FormatParquet && r.err == nil {
			r.fail("unknown segment format %q", seg.Format)
		}
		switch tag := r.byte(); tag {
		case ckLayoutNotApplicable:
			seg.Layout.Kind = LayoutNotApplicable
		case ckLayoutMixed:
			seg.Layout.Kind = LayoutMixed
		case ckLayoutSingle:
			seg.Layout.Kind = LayoutSingle
			n := r.uvarint()
			if r.err == nil && (n == 0 || n > uint64(len(b)-r.off)/2) {
				r.fail("identity of %d components", n)
			}
			if r.err != nil {
				break
			}
			if uint64(cap(idents)-len(idents)) < n {
				idents = make([]EntityValue, 0, max(n, 1024))
			}
			start := len(idents)
			for range n {
				var e EntityValue
				switch e.Type = EntityType(r.byte()); e.Type {
				case EntityUtf8:
					e.Str = r.string()
				case EntityInt32:
					if e.Int = r.varint(); e.Int < math.MinInt32 || e.Int > math.MaxInt32 {
						r.fail("int32 component %d out of range", e.Int)
					}
				case EntityInt64:
					e.Int = r.varint()
				case EntityUInt64:
					e.Uint = r.uvarint()
				default:
					r.fail("unknown entity type %d", e.Type)
				}
				idents = append(idents, e)
			}
			seg.Layout.Identity = Identity(idents[start:len(idents):len(idents)])
		default:
			r.fail("unknown entity layout tag %d", tag)
		}
		seg.IndexMin = r.indexValue()
		seg.IndexMax = r.indexValue()
		seg.RowCount = r.uvarint()
		switch flag := r.byte(); flag {
		case 0:
		case 1:
			sizes[i] = r.uvarint()
			seg.FileSize = &sizes[i]
		default:
			r.fail("file size flag %d", flag)
		}
		seg.CoveragePath = r.string()
		if r.err != nil {
			return nil, fmt.Errorf("record %d: %w", i, r.err)
		}
	}
	if r.off != len(b) {
		return nil, fmt.Errorf("%d bytes after the last record", len(b)-r.off)
	}
	return segs, nil
}
