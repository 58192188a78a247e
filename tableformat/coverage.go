package tableformat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

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
		for i, v := range idx.(*array.Timestamp).TimestampValues() {
			if out[i], err = c.domain.TimestampID(int64(v), ir.unitsPerSecond); err != nil {
				return nil, invalidf("index column %q: value %d at row %d of the batch is outside the supported time range", column, int64(v), i)
			}
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
// and returns how many were already present and one example.
func (c *segmentCoverage) add(er entityReader, rec arrow.RecordBatch, ids []uint64) (uint64, string) {
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
		return dups, example
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
		if already, _ := c.set.Add(ident, id); already {
			note(ident, id)
		}
	}
	return dups, example
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
	ids := c.set.Identities()
	if len(ids) == 1 {
		return EntityLayout{Kind: LayoutSingle, Identity: identityFromCoverage(ids[0])}
	}
	return EntityLayout{Kind: LayoutMixed}
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

func (c *segmentCoverage) union(o *segmentCoverage) *segmentCoverage {
	u := &segmentCoverage{spec: c.spec, domain: c.domain, set: c.set.Clone()}
	if err := u.set.Union(o.set); err != nil {
		panic(fmt.Sprintf("union of same-kind coverage sets failed: %v", err)) // unreachable
	}
	return u
}

// coverageCache keeps the decoded table coverage of recent snapshots: the
// append path and coverage queries read the same snapshot again and again.
type coverageCache struct {
	mu      sync.Mutex
	entries map[string]*segmentCoverage
	order   []string
}

const coverageCacheSize = 4

func (cc *coverageCache) get(p string) *segmentCoverage {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.entries[p]
}

func (cc *coverageCache) put(p string, c *segmentCoverage) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.entries == nil {
		cc.entries = map[string]*segmentCoverage{}
	}
	if _, ok := cc.entries[p]; !ok {
		cc.order = append(cc.order, p)
		if len(cc.order) > coverageCacheSize {
			delete(cc.entries, cc.order[0])
			cc.order = cc.order[1:]
		}
	}
	cc.entries[p] = c
}

func (t *Table) rememberCoverage(p string, c *segmentCoverage) { t.covCache.put(p, c) }

// loadCoverage returns the table coverage of st. When the snapshot file is
// missing or unreadable it is rebuilt from the segments' sidecars, and the
// rebuild is logged; the next append writes a fresh snapshot. Any segment
// sidecar that cannot be read is corruption.
func (t *Table) loadCoverage(ctx context.Context, st *State) (*segmentCoverage, error) {
	entity := len(st.Index().EntityColumns) > 0
	if st.Coverage != nil {
		if c := t.covCache.get(st.Coverage.Path); c != nil {
			return c, nil
		}
		c, err := t.readCoverageFile(st, st.Coverage.Path, entity)
		if err == nil {
			t.covCache.put(st.Coverage.Path, c)
			return c, nil
		}
		if errors.Is(err, ErrStorage) && !storage.IsNotExist(err) {
			return nil, err
		}
		t.opts.logger().Warn("table coverage snapshot unreadable; rebuilding it from segment sidecars", "path", st.Coverage.Path, "version", st.Version, "error", err)
	} else if len(st.Segments) > 0 {
		t.opts.logger().Warn("table has segments but no coverage snapshot; rebuilding it from segment sidecars", "version", st.Version)
	}
	out := newSegmentCoverage(st.Index(), entity)
	for i := range st.Segments {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		seg := &st.Segments[i]
		if seg.CoveragePath == "" {
			return nil, corruptf("", st.Version, nil, "segment %s has no coverage sidecar to rebuild the table coverage from", seg.Path)
		}
		c, err := t.readCoverageFile(st, seg.CoveragePath, entity)
		if err != nil {
			return nil, err
		}
		if err := out.set.Union(c.set); err != nil {
			return nil, corruptf(seg.CoveragePath, st.Version, err, "segment coverage does not match the table's entity columns")
		}
	}
	if st.Coverage != nil {
		t.covCache.put(st.Coverage.Path, out)
	}
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
