package tableformat

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Action is one entry of a commit's "actions" array: [AddSegment],
// [RemoveSegment], [UpdateTableMeta] or [UpdateTableCoverage], and
// tsflight's [SetTableProperties], which the 0.9.0 package skips. On disk
// each is an externally tagged object with exactly one key, the action's
// name.
type Action interface {
	// ActionName is the JSON tag of the action.
	ActionName() string
	appendJSON(b []byte) []byte
}

// AddSegment adds a live segment.
type AddSegment struct{ Segment SegmentMeta }

// RemoveSegment removes a live segment by path (a no-op if it is not live).
type RemoveSegment struct{ Path string }

// UpdateTableMeta replaces the table metadata as a whole.
type UpdateTableMeta struct{ Meta TableMeta }

// UpdateTableCoverage points at the table coverage snapshot of this
// version.
type UpdateTableCoverage struct {
	Coverage CoveragePointer
	// Legacy is set when the action was read from a format-6 commit (its
	// index kind in the bucket spelling). It is never written: writers
	// always spell protocol 7.
	Legacy bool
}

// CoveragePointer names a table coverage snapshot and the index kind it
// was computed for.
type CoveragePointer struct {
	IndexKind IndexKind
	Path      string
}

// The action names. NB: on-disk tags; must not change.
const (
	actAddSegment          = "AddSegment"
	actRemoveSegment       = "RemoveSegment"
	actUpdateTableMeta     = "UpdateTableMeta"
	actUpdateTableCoverage = "UpdateTableCoverage"
)

func (AddSegment) ActionName() string          { return actAddSegment }
func (RemoveSegment) ActionName() string       { return actRemoveSegment }
func (UpdateTableMeta) ActionName() string     { return actUpdateTableMeta }
func (UpdateTableCoverage) ActionName() string { return actUpdateTableCoverage }

func (a AddSegment) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, actAddSegment)
	b = a.Segment.appendJSON(b)
	return append(b, '}')
}

func (a RemoveSegment) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, actRemoveSegment)
	b = append(b, '{')
	b = appendKey(b, "path")
	b = appendString(b, a.Path)
	return append(b, '}', '}')
}

func (a UpdateTableMeta) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, actUpdateTableMeta)
	b = a.Meta.appendJSON(b)
	return append(b, '}')
}

func (a UpdateTableCoverage) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, actUpdateTableCoverage)
	b = append(b, '{')
	b = appendKey(b, "index_kind")
	b = a.Coverage.IndexKind.appendJSON(b)
	b = appendKey(b, "coverage_path")
	b = appendString(b, a.Coverage.Path)
	return append(b, '}', '}')
}

// Commit is one commit file.
type Commit struct {
	Version     uint64
	BaseVersion uint64
	Timestamp   time.Time
	Actions     []Action
	// Skipped lists the names of unknown actions the loader ignored.
	Skipped []string
}

// MarshalJSON writes the commit exactly as the reference does: compact,
// in field order, no trailing newline.
func (c *Commit) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 512)
	b = append(b, '{')
	b = appendKey(b, "version")
	b = strconv.AppendUint(b, c.Version, 10)
	b = appendKey(b, "base_version")
	b = strconv.AppendUint(b, c.BaseVersion, 10)
	b = appendKey(b, "timestamp")
	b = append(b, '"')
	b = appendTime(b, c.Timestamp)
	b = append(b, '"')
	b = appendKey(b, "actions")
	b = append(b, '[')
	for i, a := range c.Actions {
		if i > 0 {
			b = append(b, ',')
		}
		b = a.appendJSON(b)
	}
	b = append(b, ']', '}')
	if d := jsonDepth(b); d > maxJSONDepth {
		return nil, invalidf("commit JSON nests %d levels deep; readers accept at most %d", d, maxJSONDepth)
	}
	return b, nil
}

// knownActions are the action names protocol 7 defines.
var knownActions = []string{actAddSegment, actRemoveSegment, actUpdateTableMeta, actUpdateTableCoverage}

// decodeCommit reads a commit file the way seed 000 requires: the raw JSON
// is inspected for UpdateTableMeta actions first, and their protocol version
// and reader features are checked before any other action is decoded; then
// unknown action names are skipped and the known actions decoded strictly.
//
// A *ProtocolError or an error wrapping ErrNeedsUpgrade is returned as is;
// any other error means the file is malformed.
func decodeCommit(data []byte) (*Commit, error) {
	if d := jsonDepth(data); d > maxJSONDepth {
		return nil, fmt.Errorf("commit JSON nests %d levels deep (limit %d)", d, maxJSONDepth)
	}
	o, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	rawActions, err := o.need("actions")
	if err != nil {
		return nil, err
	}
	items, err := decodeArray(rawActions)
	if err != nil {
		return nil, fmt.Errorf("actions: %w", err)
	}
	// Pass 1: compatibility headers, before anything that depends on them.
	metas := make(map[int]*TableMeta)
	for i, it := range items {
		ao, err := decodeObject(it)
		if err != nil || len(ao.fields) != 1 || ao.fields[0].key != actUpdateTableMeta {
			continue
		}
		m := new(TableMeta)
		if err := m.UnmarshalJSON(ao.fields[0].value); err != nil {
			var pe *ProtocolError
			if errors.As(err, &pe) || errors.Is(err, ErrNeedsUpgrade) {
				return nil, err
			}
			return nil, fmt.Errorf("action %d (%s): %w", i, actUpdateTableMeta, err)
		}
		if err := m.CheckRead(); err != nil {
			return nil, err
		}
		metas[i] = m
	}
	c := &Commit{}
	raw, err := o.need("version")
	if err != nil {
		return nil, err
	}
	if c.Version, err = decodeUint(raw, 64); err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	if raw, err = o.need("base_version"); err != nil {
		return nil, err
	}
	if c.BaseVersion, err = decodeUint(raw, 64); err != nil {
		return nil, fmt.Errorf("base_version: %w", err)
	}
	if raw, err = o.need("timestamp"); err != nil {
		return nil, err
	}
	if c.Timestamp, err = decodeTime(raw); err != nil {
		return nil, fmt.Errorf("timestamp: %w", err)
	}
	// Pass 2: typed decoding; unknown action names are skipped.
	for i, it := range items {
		if name, err := decodeString(it); err == nil {
			if slices.Contains(knownActions, name) || name == actSetTableProperties {
				return nil, fmt.Errorf("action %d: %s has no payload", i, name)
			}
			c.Skipped = append(c.Skipped, name)
			continue
		}
		ao, err := decodeObject(it)
		if err != nil {
			return nil, fmt.Errorf("action %d: %w", i, err)
		}
		name, body, err := ao.single()
		if err != nil {
			return nil, fmt.Errorf("action %d: %w", i, err)
		}
		var a Action
		switch name {
		case actUpdateTableMeta:
			a = UpdateTableMeta{Meta: *metas[i]}
		case actAddSegment:
			var s SegmentMeta
			if err := s.UnmarshalJSON(body); err != nil {
				return nil, fmt.Errorf("action %d (%s): %w", i, name, err)
			}
			a = AddSegment{Segment: s}
		case actRemoveSegment:
			ro, err := decodeObject(body)
			if err != nil {
				return nil, fmt.Errorf("action %d (%s): %w", i, name, err)
			}
			p, err := ro.need("path")
			if err != nil {
				return nil, fmt.Errorf("action %d (%s): %w", i, name, err)
			}
			var r RemoveSegment
			if r.Path, err = decodeString(p); err != nil {
				return nil, fmt.Errorf("action %d (%s): path: %w", i, name, err)
			}
			a = r
		case actUpdateTableCoverage:
			co, err := decodeObject(body)
			if err != nil {
				return nil, fmt.Errorf("action %d (%s): %w", i, name, err)
			}
			var u UpdateTableCoverage
			kraw, err := co.need("index_kind")
			if err != nil {
				return nil, fmt.Errorf("action %d (%s): %w", i, name, err)
			}
			if u.Legacy, err = u.Coverage.IndexKind.decode(kraw, true); err != nil {
				return nil, fmt.Errorf("action %d (%s): index_kind: %w", i, name, err)
			}
			praw, err := co.need("coverage_path")
			if err != nil {
				return nil, fmt.Errorf("action %d (%s): %w", i, name, err)
			}
			if u.Coverage.Path, err = decodeString(praw); err != nil {
				return nil, fmt.Errorf("action %d (%s): coverage_path: %w", i, name, err)
			}
			a = u
		case actSetTableProperties:
			// tsflight's extension (properties.go); 0.9.0 skips it.
			p, err := decodeSetTableProperties(body)
			if err != nil {
				return nil, fmt.Errorf("action %d (%s): %w", i, name, err)
			}
			a = p
		default:
			c.Skipped = append(c.Skipped, name)
			continue
		}
		c.Actions = append(c.Actions, a)
	}
	return c, nil
}
