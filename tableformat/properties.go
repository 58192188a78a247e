// Table properties: string settings kept in the log by SetTableProperties
// actions, a tsflight extension the 0.9.0 package skips (see
// docs/format/actions.md#settableproperties).

package tableformat

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Property names. NB: on-disk keys; they must not change.
const (
	// PropertyPrefix starts the names tsflight reserves: a name with it
	// must be one this build knows to be written.
	PropertyPrefix = "tsflight."
	// PropertyKeepSnapshots is how long a version stays readable after
	// the commit that superseded it, as a Go duration ("168h", "30m",
	// "0s"); see [State.KeepSnapshots].
	PropertyKeepSnapshots = PropertyPrefix + "keep-snapshots"
)

// DefaultKeepSnapshots is the keep window of a table without the
// tsflight.keep-snapshots property: 7 days.
const DefaultKeepSnapshots = 7 * 24 * time.Hour

// knownProperties are the tsflight.* names this build knows, each with
// the check of its value.
var knownProperties = map[string]func(string) error{
	PropertyKeepSnapshots: func(v string) error {
		_, err := parseKeepSnapshots(v)
		return err
	},
}

func parseKeepSnapshots(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (for example 168h, 30m or 0s)", v)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", v)
	}
	return d, nil
}

// actSetTableProperties is the action's on-disk tag. NB: must not change.
const actSetTableProperties = "SetTableProperties"

// SetTableProperties changes table properties: each key is set to its
// value, and a key with the empty value is removed; keys not named keep
// theirs. Make one with [NewSetTableProperties] (or use
// [Table.SetProperties]), which applies the rules of a write; the zero
// value changes nothing.
type SetTableProperties struct{ props map[string]string }

// NewSetTableProperties checks changes as a write must (every key valid,
// every tsflight.* key one this build knows, with a valid value or the
// empty value) and returns the action making them. Errors wrap
// ErrInvalidInput and name the key.
func NewSetTableProperties(changes map[string]string) (SetTableProperties, error) {
	if len(changes) == 0 {
		return SetTableProperties{}, invalidf("no table properties to set")
	}
	for _, k := range slices.Sorted(maps.Keys(changes)) {
		if err := checkPropertyWrite(k, changes[k]); err != nil {
			return SetTableProperties{}, err
		}
	}
	return SetTableProperties{props: maps.Clone(changes)}, nil
}

// Properties returns a copy of the changes the action makes.
func (a SetTableProperties) Properties() map[string]string { return maps.Clone(a.props) }

// ActionName is the JSON tag of the action.
func (SetTableProperties) ActionName() string { return actSetTableProperties }

// appendJSON writes {"SetTableProperties":{"properties":{...}}} with the
// keys in byte order, as serde writes a BTreeMap.
func (a SetTableProperties) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, actSetTableProperties)
	b = append(b, '{')
	b = appendKey(b, "properties")
	b = appendStringMap(b, a.props)
	return append(b, '}', '}')
}

// checkPropertyWrite applies the write rules to one change.
func checkPropertyWrite(k, v string) error {
	switch {
	case k == "":
		return invalidf("a table property needs a non-empty name")
	case !utf8.ValidString(k):
		return invalidf("table property name %q is not valid UTF-8", k)
	case !utf8.ValidString(v):
		return invalidf("table property %q: the value is not valid UTF-8", k)
	}
	if !strings.HasPrefix(k, PropertyPrefix) {
		return nil // a user's property: any string
	}
	check, ok := knownProperties[k]
	if !ok {
		return invalidf("table property %q is not one this build of tsflight knows (names starting with %q are reserved; known: %s)",
			k, PropertyPrefix, strings.Join(slices.Sorted(maps.Keys(knownProperties)), ", "))
	}
	if v == "" {
		return nil // removal
	}
	if err := check(v); err != nil {
		return invalidf("table property %s: %v", k, err)
	}
	return nil
}

// decodeSetTableProperties reads the action's payload: an object whose
// "properties" member is an object of strings (other members are ignored,
// for a later extension). A key given twice is an error.
func decodeSetTableProperties(body []byte) (SetTableProperties, error) {
	o, err := decodeObject(body)
	if err != nil {
		return SetTableProperties{}, err
	}
	raw, err := o.need("properties")
	if err != nil {
		return SetTableProperties{}, err
	}
	po, err := decodeObject(raw)
	if err != nil {
		return SetTableProperties{}, fmt.Errorf("properties: %w", err)
	}
	props := make(map[string]string, len(po.fields))
	for _, f := range po.fields {
		v, err := decodeString(f.value)
		if err != nil {
			return SetTableProperties{}, fmt.Errorf("properties: %q: %w", f.key, err)
		}
		props[f.key] = v
	}
	return SetTableProperties{props: props}, nil
}

// applyProperties returns cur with the changes of a made (cur is not
// modified; nil when no property is left). It applies the replay rules:
// names must not be empty and the values of the tsflight.* properties
// this build knows must be valid; other tsflight.* names (from a newer
// tsflight) are kept as they are.
func applyProperties(cur map[string]string, a SetTableProperties) (map[string]string, error) {
	next := maps.Clone(cur)
	for _, k := range slices.Sorted(maps.Keys(a.props)) {
		v := a.props[k]
		if k == "" {
			return nil, fmt.Errorf("a table property has an empty name")
		}
		if v == "" {
			delete(next, k)
			continue
		}
		if check, ok := knownProperties[k]; ok {
			if err := check(v); err != nil {
				return nil, fmt.Errorf("table property %s: %v", k, err)
			}
		}
		if next == nil {
			next = map[string]string{}
		}
		next[k] = v
	}
	if len(next) == 0 {
		return nil, nil
	}
	return next, nil
}

// Property returns the value of table property key.
func (s *State) Property(key string) (string, bool) {
	v, ok := s.Properties[key]
	return v, ok
}

// KeepSnapshots is the table's keep window: a version other than the
// newest stays readable while the commit that superseded it is younger
// than this. It is the tsflight.keep-snapshots property, or
// DefaultKeepSnapshots without it.
func (s *State) KeepSnapshots() time.Duration {
	if v, ok := s.Properties[PropertyKeepSnapshots]; ok {
		if d, err := parseKeepSnapshots(v); err == nil {
			return d
		}
	}
	return DefaultKeepSnapshots
}

// propertiesAction returns the action that recreates s's properties on a
// state without any (ok is false when s has none): code that stores a
// state as a list of actions (checkpoints) adds it so that replaying the
// list gives s.Properties back.
func (s *State) propertiesAction() (Action, bool) {
	if s == nil || len(s.Properties) == 0 {
		return nil, false
	}
	return SetTableProperties{props: maps.Clone(s.Properties)}, true
}

// SetProperties commits one SetTableProperties action on top of version
// expected: each key of props is set to its value, a key with the empty
// value is removed. Names starting with "tsflight." must be ones this
// build knows (today only tsflight.keep-snapshots, a Go duration ≥ 0);
// other names take any string. It returns the new version.
//
// A table without a schema is refused: it adopts one in its first append,
// which both implementations require to be version 2 (0.9.0 refuses to
// adopt a schema later, MissingCanonicalSchema), so set properties after
// the first append or create the table with a schema.
//
// Errors: ErrInvalidInput naming the key (nothing written), ErrConflict
// when the table moved past expected, and those of [Table.Commit].
func (t *Table) SetProperties(ctx context.Context, expected uint64, props map[string]string) (uint64, error) {
	a, err := NewSetTableProperties(props)
	if err != nil {
		return 0, err
	}
	if st := t.State(); st != nil && st.Version == expected && st.Schema() == nil {
		return 0, invalidf("the table has no schema yet: set table properties after its first append (which adopts the schema and must be version 2) or create it with a schema")
	}
	return t.Commit(ctx, expected, []Action{a})
}
