package tableformat

import (
	"fmt"
	"maps"
	"slices"
)

// State is an immutable snapshot of a table at one version: what replaying
// commits 1..Version produces. Callers must not modify it.
type State struct {
	// Version is the newest commit included.
	Version uint64
	// Meta is the current table metadata.
	Meta *TableMeta
	// Segments are the live segments, in the order they were added.
	Segments []SegmentMeta
	// Coverage points at the newest table coverage snapshot (nil before the
	// first append).
	Coverage *CoveragePointer
	// CoverageVersion is the commit that set Coverage.
	CoverageVersion uint64
	// Properties are the table properties that SetTableProperties actions
	// set (the newest value of each key wins; an empty value removes the
	// key); nil when there are none. See properties.go.
	Properties map[string]string
	// byPath indexes Segments.
	byPath map[string]int
	// digest is the SHA-256 of the raw bytes of commit Version and origin
	// that of commit 1 (the table's identity): a handle checks them against
	// the log before it extends it (logStore.sameLog) and before it commits
	// on top of it, so that a table directory replaced under a live handle
	// is noticed. Zero when unknown.
	digest, origin commitDigest
}

// setDigest records the digest of commit s.Version, which s was just built
// from (s must be owned by the caller).
func (s *State) setDigest(d commitDigest) {
	s.digest = d
	if s.Version == 1 {
		s.origin = d
	}
}

// Index returns the table's index spec.
func (s *State) Index() *IndexSpec { return s.Meta.Index }

// Schema returns the logical schema, or nil if none was adopted yet.
func (s *State) Schema() *Schema { return s.Meta.Schema }

// Segment returns the live segment at path.
func (s *State) Segment(path string) (*SegmentMeta, bool) {
	i, ok := s.byPath[path]
	if !ok {
		return nil, false
	}
	return &s.Segments[i], true
}

// RowCount is the sum of the live segments' row counts.
func (s *State) RowCount() uint64 {
	var n uint64
	for i := range s.Segments {
		n += s.Segments[i].RowCount
	}
	return n
}

// apply replays one commit on top of s (which may be nil for version 0)
// and returns the new state; s is not modified. It enforces the reference's
// replay rules, then validates the result.
func (s *State) apply(c *Commit, path string) (*State, error) {
	return s.applyCommit(c, path, false)
}

// applyOwned is apply for a replay that owns s (made by replayCopy or an
// earlier applyOwned; nobody else holds it): it appends to s's segment
// list and index instead of copying them, so that replaying N commits
// costs O(N), not O(N²) (20,000 one-row appends took 55 s to open). s is
// consumed, even on error.
func (s *State) applyOwned(c *Commit, path string) (*State, error) {
	return s.applyCommit(c, path, true)
}

// replayCopy returns a copy of s that applyOwned may consume. Properties
// stay shared: applyCommit never modifies the map, it replaces it.
func (s *State) replayCopy() *State {
	if s == nil {
		return nil
	}
	c := *s
	c.Segments = slices.Clone(s.Segments)
	c.byPath = maps.Clone(s.byPath)
	return &c
}

func (s *State) applyCommit(c *Commit, path string, owned bool) (*State, error) {
	var next State
	if s != nil {
		next = *s
	}
	if c.Version != next.Version+1 {
		return nil, corruptf(path, c.Version, nil, "commit version %d does not follow %d", c.Version, next.Version)
	}
	if c.BaseVersion != next.Version {
		return nil, corruptf(path, c.Version, nil, "base_version is %d, expected %d", c.BaseVersion, next.Version)
	}
	next.Version = c.Version
	segmentsShared, metaChanged := !owned || next.byPath == nil, false
	ownSegments := func() {
		if segmentsShared {
			next.Segments = slices.Clone(next.Segments)
			next.byPath = make(map[string]int, len(next.Segments)+1)
			for i := range next.Segments {
				next.byPath[next.Segments[i].Path] = i
			}
			segmentsShared = false
		}
	}
	var added []int
	var removed map[int]bool // indices into next.Segments, dropped after the loop
	for i, a := range c.Actions {
		switch a := a.(type) {
		case AddSegment:
			seg := a.Segment
			if err := ValidatePath(seg.Path); err != nil {
				return nil, corruptf(path, c.Version, err, "action %d: AddSegment", i)
			}
			if seg.CoveragePath != "" {
				if err := ValidatePath(seg.CoveragePath); err != nil {
					return nil, corruptf(path, c.Version, err, "action %d: AddSegment coverage_path", i)
				}
			}
			ownSegments()
			if _, dup := next.byPath[seg.Path]; dup {
				return nil, corruptf(path, c.Version, nil, "action %d: segment %q is already live", i, seg.Path)
			}
			next.byPath[seg.Path] = len(next.Segments)
			next.Segments = append(next.Segments, seg)
			added = append(added, len(next.Segments)-1)
		case RemoveSegment:
			if err := ValidatePath(a.Path); err != nil {
				return nil, corruptf(path, c.Version, err, "action %d: RemoveSegment", i)
			}
			if _, live := next.byPath[a.Path]; !live {
				continue // the reference ignores removal of a non-live path
			}
			ownSegments()
			// Marked now, dropped once at the end of the commit: a
			// compaction commit removes thousands of segments, and
			// deleting each from the slice and renumbering the rest
			// cost time quadratic in their number.
			if removed == nil {
				removed = make(map[int]bool)
			}
			removed[next.byPath[a.Path]] = true
			delete(next.byPath, a.Path)
		case UpdateTableMeta:
			m := a.Meta
			if next.Meta != nil {
				if err := checkTransition(next.Meta, &m); err != nil {
					return nil, wrapReplay(path, c.Version, fmt.Sprintf("action %d: UpdateTableMeta", i), err)
				}
			}
			next.Meta = &m
			metaChanged = true
		case UpdateTableCoverage:
			if err := ValidatePath(a.Coverage.Path); err != nil {
				return nil, corruptf(path, c.Version, err, "action %d: UpdateTableCoverage", i)
			}
			if next.Meta != nil && a.Legacy != next.Meta.NeedsUpgrade() {
				return nil, corruptf(path, c.Version, nil, "action %d: UpdateTableCoverage: the index kind is not spelled in the table's format (format %d)", i, legacyOr7(next.Meta))
			}
			p := a.Coverage
			next.Coverage = &p
			next.CoverageVersion = c.Version
		case SetTableProperties:
			// Copied on write, owned or not: states share the map.
			props, err := applyProperties(next.Properties, a)
			if err != nil {
				return nil, corruptf(path, c.Version, nil, "action %d: SetTableProperties: %v", i, err)
			}
			next.Properties = props
		}
	}
	if len(removed) > 0 {
		kept, renumber := next.Segments[:0], make(map[int]int, len(added))
		for i := range next.Segments {
			if removed[i] {
				continue
			}
			renumber[i] = len(kept)
			kept = append(kept, next.Segments[i])
		}
		clear(next.Segments[len(kept):]) // no stale copies past the end
		next.Segments = kept
		clear(next.byPath)
		for i := range next.Segments {
			next.byPath[next.Segments[i].Path] = i
		}
		live := added[:0]
		for _, j := range added {
			if k, ok := renumber[j]; ok {
				live = append(live, k)
			}
		}
		added = live
	}
	if next.byPath == nil {
		next.byPath = map[string]int{}
	}
	// Validate against the metadata in force after all actions, so that a
	// feature declared anywhere in the commit covers its first use.
	check := added
	if metaChanged || s == nil {
		check = nil
		for i := range next.Segments {
			check = append(check, i)
		}
	}
	if err := next.validate(check); err != nil {
		return nil, wrapReplay(path, c.Version, "", err)
	}
	return &next, nil
}

// wrapReplay turns a validation failure into a CorruptionError, keeping
// protocol errors (which have their own category) intact.
func wrapReplay(path string, version uint64, where string, err error) error {
	if pe, ok := err.(*ProtocolError); ok {
		pe.Version = version
		return pe
	}
	if where == "" {
		return corruptf(path, version, nil, "%v", err)
	}
	return corruptf(path, version, nil, "%s: %v", where, err)
}

// validate checks the state-level rules after a commit: metadata present and
// valid, coverage pointer of the table's kind, and each segment listed in
// check consistent with the schema and index.
func (s *State) validate(check []int) error {
	if s.Meta == nil {
		return fmt.Errorf("no table metadata (the first commit must contain UpdateTableMeta)")
	}
	if err := s.Meta.CheckRead(); err != nil {
		return err
	}
	if err := s.Meta.validate(); err != nil {
		return err
	}
	ix := s.Meta.Index
	if s.Coverage != nil && !s.Coverage.IndexKind.Equal(ix.Kind) {
		return fmt.Errorf("coverage pointer index kind does not match the table's index kind")
	}

	if len(s.Segments) > 0 && s.Meta.Schema == nil {
		return fmt.Errorf("the table has segments but no logical schema")
	}
	for _, i := range check {
		if i < 0 {
			continue
		}
		if err := s.validateSegment(&s.Segments[i]); err != nil {
			return fmt.Errorf("segment %q: %w", s.Segments[i].Path, err)
		}
	}
	return nil
}

func (s *State) validateSegment(seg *SegmentMeta) error {
	ix := s.Meta.Index
	if seg.IndexMin.Type != ix.Kind.Type || seg.IndexMax.Type != ix.Kind.Type {
		return fmt.Errorf("index bounds are %s/%s values in a %s table", seg.IndexMin.Type, seg.IndexMax.Type, ix.Kind.Type)
	}
	if seg.IndexMin.Compare(seg.IndexMax) > 0 {
		return fmt.Errorf("index_min %s is after index_max %s", seg.IndexMin, seg.IndexMax)
	}
	switch seg.Layout.Kind {
	case LayoutNotApplicable:
		if len(ix.EntityColumns) > 0 {
			return fmt.Errorf("entity_layout is NotApplicable but the table has entity columns")
		}
	case LayoutMixed:
		if len(ix.EntityColumns) == 0 {
			return fmt.Errorf("entity_layout is Mixed but the table has no entity columns")
		}
	case LayoutSingle:
		if len(seg.Layout.Identity) != len(ix.EntityColumns) {
			return fmt.Errorf("identity has %d components for %d entity columns", len(seg.Layout.Identity), len(ix.EntityColumns))
		}
		for k, name := range ix.EntityColumns {
			col, _ := s.Meta.Schema.Column(name)
			want := map[TypeKind]EntityType{TypeUtf8: EntityUtf8, TypeInt32: EntityInt32, TypeInt64: EntityInt64, TypeUInt64: EntityUInt64}[col.Type.Kind]
			if seg.Layout.Identity[k].Type != want {
				return fmt.Errorf("identity component %q is %s but the column is %s", name, seg.Layout.Identity[k].Type, col.Type.Kind)
			}
		}
	default:
		return fmt.Errorf("unknown entity layout %q", seg.Layout.Kind)
	}
	return nil
}
