package tableformat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/google/uuid"

	"github.com/tsflight/tsflight/coverage"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// segmentCoverage is the coverage of the rows an append streams through,
// or of a whole table: a coverage.Set plus the table's index description.
type segmentCoverage struct {
	spec   *IndexSpec
	domain coverage.Domain
	set    *coverage.Set
	// names and bitmaps serve an append to a table whose one entity
	// column is a string: names gives each entity value seen an id, and
	// bitmaps[id] is its bitmap in set, so a row costs one lookup in a
	// strIDs table and no identity key (see add).
	names   *strIDs
	bitmaps []*roaring64.Bitmap
}

func indexDomain(spec *IndexSpec) coverage.Domain {
	d, err := coverageSpec(spec).Domain()
	if err != nil {
		panic(fmt.Sprintf("validated index spec has no domain: %v", err)) // unreachable: specs are validated
	}
	return d
}

func newSegmentCoverage(spec *IndexSpec, entity bool) *segmentCoverage {
	c := &segmentCoverage{spec: spec, domain: indexDomain(spec)}
	if entity {
		c.set = coverage.NewEntity()
	} else {
		c.set = coverage.NewGlobal()
	}
	return c
}

// ids maps a canonical index column to interval ids. A value outside the
// index domain (a timestamp beyond the years the format can represent) is
// refused, naming the row.
func (c *segmentCoverage) ids(idx arrow.Array, ir indexReader, column string) ([]uint64, error) {
	out := make([]uint64, idx.Len())
	var err error
	switch ir.typ {
	case IndexTimestamp:
		// Rows often come in runs of one timestamp (every host's row of
		// one instant, time-major): a run's id is computed once.
		var prev int64
		var prevID uint64
		for i, v := range idx.(*array.Timestamp).TimestampValues() {
			if i > 0 && int64(v) == prev {
				out[i] = prevID
				continue
			}
			if out[i], err = c.domain.TimestampID(int64(v), ir.unitsPerSecond); err != nil {
				return nil, invalidf("index column %q: value %d at row %d of the batch is outside the supported time range", column, int64(v), i)
			}
			prev, prevID = int64(v), out[i]
		}
	case IndexInt64:
		for i, v := range idx.(*array.Int64).Int64Values() {
			if out[i], err = c.domain.Int64ID(v); err != nil {
				return nil, invalidf("index column %q: value %d at row %d: %v", column, v, i, err)
			}
		}
	default:
		for i, v := range idx.(*array.Uint64).Uint64Values() {
			if out[i], err = c.domain.UInt64ID(v); err != nil {
				return nil, invalidf("index column %q: value %d at row %d: %v", column, v, i, err)
			}
		}
	}
	return out, nil
}

// add records the rows of rec (canonical schema) with their interval ids,
// and returns how many were already present and one example. An entity
// value coverage cannot hold (a string that is not UTF-8) is
// ErrInvalidInput naming the column and the row: the row would otherwise
// be stored without coverage.
func (c *segmentCoverage) add(er entityReader, rec arrow.RecordBatch, ids []uint64) (uint64, string, error) {
	var dups uint64
	var example string
	note := func(ident coverage.Identity, id uint64) {
		if dups == 0 {
			example = c.describe(ident, id)
		}
		dups++
	}
	if len(er.cols) == 0 {
		for _, id := range ids {
			if already, _ := c.set.Add(nil, id); already {
				note(nil, id)
			}
		}
		return dups, example, nil
	}
	bad := func(row int, err error) (uint64, string, error) {
		return 0, "", invalidf("entity %s, row %d of the batch: %v", strings.Join(er.names, ", "), row, err)
	}
	if len(er.cols) == 1 && er.types[0] == EntityUtf8 {
		if col, ok := rec.Column(er.cols[0]).(*array.String); ok {
			if row, err := c.addByName(col, ids, note); err != nil {
				return bad(row, err)
			}
			return dups, example, nil
		}
	}
	cols := make([]arrow.Array, len(er.cols))
	for k, ci := range er.cols {
		cols[k] = rec.Column(ci)
	}
	ident := make(coverage.Identity, len(cols))
	for row, id := range ids {
		for k, col := range cols {
			switch er.types[k] {
			case EntityUtf8:
				ident[k] = coverage.Utf8(col.(*array.String).Value(row))
			case EntityInt32:
				ident[k] = coverage.Int32(col.(*array.Int32).Value(row))
			case EntityInt64:
				ident[k] = coverage.Int64(col.(*array.Int64).Value(row))
			default:
				ident[k] = coverage.UInt64(col.(*array.Uint64).Value(row))
			}
		}
		already, err := c.set.Add(ident, id)
		if err != nil {
			return bad(row, err)
		}
		if already {
			note(ident, id)
		}
	}
	return dups, example, nil
}

// addByName is add for one string entity column. It records the same
// pairs: an entity value met for the first time goes through the set's
// identity lookup (which validates it), later rows add to its bitmap. A
// value the set refuses (not UTF-8) stops it: it returns the row. (Adding
// the ids that cannot be duplicates in bulk at the end of each batch,
// roaring's AddMany, cost more: 49 against 43 ns a row,
// BenchmarkCoverageAddTSBS.)
func (c *segmentCoverage) addByName(col *array.String, ids []uint64, note func(coverage.Identity, uint64)) (int, error) {
	if c.names == nil {
		c.names = newStrIDs()
	}
	for row, id := range ids {
		v := col.Value(row)
		var bm *roaring64.Bitmap
		if k, ok := c.names.find(v); ok {
			bm = c.bitmaps[k]
		} else {
			var err error
			if bm, err = c.set.AddTo(coverage.Identity{coverage.Utf8(v)}); err != nil {
				return row, err
			}
			if _, ok := c.names.add(v); ok {
				c.bitmaps = append(c.bitmaps, bm)
			}
		}
		if !bm.CheckedAdd(id) {
			note(coverage.Identity{coverage.Utf8(v)}, id)
		}
	}
	return 0, nil
}

// describe renders an (identity, interval id) pair for error messages, in
// the index's own units.
func (c *segmentCoverage) describe(ident coverage.Identity, id uint64) string {
	var who string
	if len(ident) > 0 {
		parts := make([]string, len(ident))
		for i, comp := range ident {
			parts[i] = c.spec.EntityColumns[i] + "=" + comp.String()
		}
		who = strings.Join(parts, ", ") + " "
	}
	return who + describeInterval(c.spec, c.domain, id)
}

func describeInterval(spec *IndexSpec, d coverage.Domain, id uint64) string {
	if spec.Kind.Type == IndexUInt64 {
		iv, err := d.UnsignedInterval(id)
		if err != nil {
			return fmt.Sprintf("interval id %d", id)
		}
		if iv.EndInclusive {
			return fmt.Sprintf("[%d, %d]", iv.Start, iv.End)
		}
		return fmt.Sprintf("[%d, %d)", iv.Start, iv.End)
	}
	iv, err := d.SignedInterval(id)
	if err != nil {
		return fmt.Sprintf("interval id %d", id)
	}
	closing := ")"
	if iv.EndInclusive {
		closing = "]"
	}
	if spec.Kind.Type == IndexTimestamp {
		return fmt.Sprintf("[%s, %s%s", formatTime(unixUTC(iv.Start)), formatTime(unixUTC(iv.End)), closing)
	}
	return fmt.Sprintf("[%d, %d%s", iv.Start, iv.End, closing)
}

// layout classifies the segment by how many identities it holds.
func (c *segmentCoverage) layout() EntityLayout {
	if !c.set.IsEntity() {
		return EntityLayout{Kind: LayoutNotApplicable}
	}
	if c.set.Len() != 1 {
		return EntityLayout{Kind: LayoutMixed} // without sorting the identities
	}
	return EntityLayout{Kind: LayoutSingle, Identity: identityFromCoverage(c.set.Identities()[0])}
}

func identityFromCoverage(id coverage.Identity) Identity {
	out := make(Identity, len(id))
	for i, c := range id {
		out[i] = EntityValue{Type: EntityType(c.Tag), Str: c.Str, Int: c.Int, Uint: c.Uint}
	}
	return out
}

func identityToCoverage(id Identity) coverage.Identity {
	out := make(coverage.Identity, len(id))
	for i, c := range id {
		out[i] = coverage.Component{Tag: coverage.Tag(c.Type), Str: c.Str, Int: c.Int, Uint: c.Uint}
	}
	return out
}

// coverageSpec describes the index to the coverage package.
func coverageSpec(spec *IndexSpec) coverage.IndexSpec {
	d := coverage.IndexSpec{Column: spec.Column, EntityColumns: spec.EntityColumns}
	if spec.Kind.Timezone != nil {
		d.Timezone, d.HasTimezone = *spec.Kind.Timezone, true
	}
	switch spec.Kind.Type {
	case IndexTimestamp:
		d.Kind = coverage.KindTimestamp
		d.Unit = map[TimeUnitName]coverage.Unit{Seconds: coverage.UnitSeconds, Minutes: coverage.UnitMinutes, Hours: coverage.UnitHours, Days: coverage.UnitDays}[spec.Kind.Time.Unit]
		d.Count = spec.Kind.Time.N
	case IndexInt64:
		d.Kind, d.Width = coverage.KindInt64, spec.Kind.Width
	default:
		d.Kind, d.Width = coverage.KindUInt64, spec.Kind.Width
	}
	return d
}

// encodeSegment returns the sidecar bytes and file id of a segment sidecar.
func (c *segmentCoverage) encodeSegment(attempt uuid.UUID) (string, []byte) {
	data := c.encode()
	id, err := coverage.SegmentContentID(coverageSpec(c.spec), data)
	if err != nil {
		panic(fmt.Sprintf("content id of a validated index spec: %v", err)) // unreachable
	}
	return coverage.FileID(id, attempt.String()), data
}

// encodeTable returns the file id and bytes of a table snapshot.
func (c *segmentCoverage) encodeTable(attempt uuid.UUID) (string, []byte) {
	data := c.encode()
	id, err := coverage.TableContentID(coverageSpec(c.spec), data)
	if err != nil {
		panic(fmt.Sprintf("content id of a validated index spec: %v", err)) // unreachable
	}
	return coverage.FileID(id, attempt.String()), data
}

func (c *segmentCoverage) encode() []byte {
	data, err := c.set.Encode()
	if err != nil {
		panic(fmt.Sprintf("encoding a coverage set built in memory failed: %v", err)) // unreachable
	}
	return data
}

func (c *segmentCoverage) overlap(o *segmentCoverage) (uint64, string) {
	ov, err := c.set.Overlap(o.set)
	if err != nil || ov.Count == 0 {
		return 0, ""
	}
	return ov.Count, c.describe(ov.Identity, ov.ID)
}

// extended returns c ∪ o as a new value sharing what o does not touch
// (coverage.Set.Extended): c and o must not change afterwards.
func (c *segmentCoverage) extended(o *segmentCoverage) (*segmentCoverage, error) {
	set, err := c.set.Extended(o.set)
	if err != nil {
		return nil, err
	}
	return &segmentCoverage{spec: c.spec, domain: c.domain, set: set}, nil
}

// coverageCache keeps the decoded table coverage of recent versions, with
// the state it belongs to: appends and coverage queries read the coverage
// of the same few versions again and again, and the coverage of a version
// is the coverage of an older one extended by the sidecars of the segments
// added since. Entries are immutable (see coverage.Set.Extended).
type coverageCache struct {
	mu      sync.Mutex
	entries []cachedCoverage // oldest first
}

type cachedCoverage struct {
	st  *State
	cov *segmentCoverage
}

const coverageCacheSize = 8

func (cc *coverageCache) get(v uint64) *segmentCoverage {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, e := range cc.entries {
		if e.st.Version == v {
			return e.cov
		}
	}
	return nil
}

// below returns the newest entry older than v.
func (cc *coverageCache) below(v uint64) (cachedCoverage, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	var best cachedCoverage
	for _, e := range cc.entries {
		if e.st.Version < v && (best.st == nil || e.st.Version > best.st.Version) {
			best = e
		}
	}
	return best, best.st != nil
}

// put remembers the coverage of st; when full, the oldest version goes.
func (cc *coverageCache) put(st *State, c *segmentCoverage) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for i, e := range cc.entries {
		if e.st.Version == st.Version {
			cc.entries[i] = cachedCoverage{st, c}
			return
		}
	}
	if len(cc.entries) >= coverageCacheSize {
		oldest := 0
		for i, e := range cc.entries {
			if e.st.Version < cc.entries[oldest].st.Version {
				oldest = i
			}
		}
		cc.entries = slices.Delete(cc.entries, oldest, oldest+1)
	}
	cc.entries = append(cc.entries, cachedCoverage{st, c})
}

func (cc *coverageCache) clear() {
	cc.mu.Lock()
	cc.entries = nil
	cc.mu.Unlock()
}

// loadCoverage returns the table coverage of st: the union of its live
// segments' coverage sidecars.
//
// Where a commit points at a full table snapshot (the 0.9.0 package's
// appends and tsflight's before it write one per append), the snapshot is
// that union, as the format defines it: commits that only rewrite segments
// (compaction, the reference's optimize) keep coverage and the pointer. A
// snapshot file that is missing or unreadable is rebuilt from the sidecars
// and the rebuild is logged.
//
// Where it points at the segment-union marker (what tsflight's appends
// write now, see unionCoveragePath), the union is built here: from the
// newest cached older version, extended by the sidecars of the segments
// added since, or from every sidecar when none is cached or the pointer
// was set after the cached one (coverage only grows between two
// versions when no commit in between set the pointer: a rollback does). Any segment
// sidecar that cannot be read is corruption.
func (t *Table) loadCoverage(ctx context.Context, st *State) (*segmentCoverage, error) {
	if c := t.covCache.get(st.Version); c != nil {
		return c, nil
	}
	entity := len(st.Index().EntityColumns) > 0
	switch {
	case st.Coverage != nil && !st.coverageIsUnion():
		c, err := t.readCoverageFile(st, st.Coverage.Path, entity)
		if err == nil {
			t.covCache.put(st, c)
			return c, nil
		}
		if errors.Is(err, ErrStorage) && !storage.IsNotExist(err) {
			return nil, err
		}
		t.opts.logger().Warn("table coverage snapshot unreadable; rebuilding it from segment sidecars", "path", st.Coverage.Path, "version", st.Version, "error", err)
	case st.Coverage == nil && len(st.Segments) > 0:
		t.opts.logger().Warn("table has segments but no coverage snapshot; rebuilding it from segment sidecars", "version", st.Version)
	}
	base, haveBase := t.covCache.below(st.Version)
	if haveBase && base.st.Version < st.CoverageVersion {
		// A commit after base set the coverage pointer: coverage may have
		// shrunk there (a rollback, rollback.go, removes segments and sets
		// the pointer), so base's union is not a subset to extend.
		// Appends and compactions never set it on a table already on the
		// marker, so this costs one full rebuild per pointer change.
		haveBase = false
	}
	added := newSegmentCoverage(st.Index(), entity)
	for i := range st.Segments {
		seg := &st.Segments[i]
		if haveBase {
			if _, old := base.st.byPath[seg.Path]; old {
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if seg.CoveragePath == "" {
			return nil, corruptf("", st.Version, nil, "segment %s has no coverage sidecar to rebuild the table coverage from", seg.Path)
		}
		c, err := t.readCoverageFile(st, seg.CoveragePath, entity)
		if err != nil {
			return nil, err
		}
		if err := added.set.Union(c.set); err != nil {
			return nil, corruptf(seg.CoveragePath, st.Version, err, "segment coverage does not match the table's entity columns")
		}
	}
	added.set.RunOptimize() // ours alone until it is cached
	out := added
	if haveBase {
		var err error
		if out, err = base.cov.extended(added); err != nil {
			return nil, corruptf("", st.Version, err, "segment coverage does not match the table's entity columns")
		}
	}
	t.covCache.put(st, out)
	return out, nil
}

func (t *Table) readCoverageFile(st *State, p string, entity bool) (*segmentCoverage, error) {
	data, err := t.fs.ReadFile(p)
	if err != nil {
		if storage.IsNotExist(err) {
			return nil, corruptf(p, st.Version, err, "coverage file is missing")
		}
		return nil, storageErr("read "+p, err)
	}
	set, err := coverage.Decode(data, entity)
	if err != nil {
		return nil, corruptf(p, st.Version, err, "coverage file cannot be decoded")
	}
	return &segmentCoverage{spec: st.Index(), domain: indexDomain(st.Index()), set: set}, nil
}

func unixUTC(sec int64) time.Time { return time.Unix(sec, 0).UTC() }
