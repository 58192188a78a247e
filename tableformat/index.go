package tableformat

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// IndexType is the domain of a table's ordered index column.
type IndexType string

// The three index domains. NB: these strings are on disk; they must not
// change.
const (
	IndexTimestamp IndexType = "timestamp"
	IndexInt64     IndexType = "int64"
	IndexUInt64    IndexType = "uint64"
)

// TimeUnitName is the unit of a timestamp granularity.
type TimeUnitName string

// The units of a timestamp granularity, as written on disk.
const (
	Seconds TimeUnitName = "Seconds"
	Minutes TimeUnitName = "Minutes"
	Hours   TimeUnitName = "Hours"
	Days    TimeUnitName = "Days"
)

var unitSeconds = map[TimeUnitName]uint64{Seconds: 1, Minutes: 60, Hours: 3600, Days: 86400}

// TimeGranularity is a timestamp index granularity such as {"Hours":1}.
type TimeGranularity struct {
	Unit TimeUnitName
	N    uint32
}

// Seconds returns the width of one interval in seconds.
func (g TimeGranularity) Seconds() uint64 { return unitSeconds[g.Unit] * uint64(g.N) }

func (g TimeGranularity) String() string {
	return strconv.FormatUint(uint64(g.N), 10) + strings.ToLower(string(g.Unit[:1]))
}

// IndexKind is the index domain and its granularity.
type IndexKind struct {
	Type IndexType
	// Time is the granularity of a timestamp index.
	Time TimeGranularity
	// Width is the granularity of an int64 or uint64 index (> 0).
	Width uint64
	// Timezone is carried for timestamp indexes as metadata only: interval
	// math is UTC epoch-aligned. nil means absent (omitted on disk).
	Timezone *string
}

// Equal reports whether two kinds are identical.
func (k IndexKind) Equal(o IndexKind) bool {
	return k.Type == o.Type && k.Time == o.Time && k.Width == o.Width && equalStringPtr(k.Timezone, o.Timezone)
}

// IntervalWidth returns the width of one interval: seconds for timestamps,
// index units for integers.
func (k IndexKind) IntervalWidth() uint64 {
	if k.Type == IndexTimestamp {
		return k.Time.Seconds()
	}
	return k.Width
}

func (k IndexKind) validate() error {
	switch k.Type {
	case IndexTimestamp:
		if _, ok := unitSeconds[k.Time.Unit]; !ok {
			return fmt.Errorf("unknown granularity unit %q", k.Time.Unit)
		}
		if k.Time.N == 0 {
			return fmt.Errorf("index_granularity must be positive")
		}
		if k.Width != 0 {
			return fmt.Errorf("timestamp index takes a time granularity, not a width")
		}
	case IndexInt64, IndexUInt64:
		if k.Width == 0 {
			return fmt.Errorf("index_granularity must be positive")
		}
		if k.Timezone != nil {
			return fmt.Errorf("%s index cannot have a timezone", k.Type)
		}
	default:
		return fmt.Errorf("unknown index type %q", k.Type)
	}
	return nil
}

// IndexSpec describes a time-series table's ordered index and entity
// (identity) columns.
type IndexSpec struct {
	Column        string
	EntityColumns []string
	Kind          IndexKind
}

// Validate checks the spec's own rules: a non-empty index column, unique
// non-empty entity columns distinct from it, and a valid kind.
func (s *IndexSpec) Validate() error {
	if isBlank(s.Column) {
		return invalidf("index column name is empty")
	}
	seen := map[string]bool{}
	for _, c := range s.EntityColumns {
		if isBlank(c) {
			return invalidf("entity column name is empty")
		}
		if c == s.Column {
			return invalidf("entity column %q is the index column", c)
		}
		if seen[c] {
			return invalidf("entity column %q is listed twice", c)
		}
		seen[c] = true
	}
	if err := s.Kind.validate(); err != nil {
		return invalidf("%v", err)
	}
	return nil
}

// ParseTimeGranularity reads the human syntax of the reference's CLI and
// Python API: digits, optional whitespace, and a case-insensitive unit
// (s, sec, secs, second, seconds; m, min, mins, minute, minutes; h, hr,
// hrs, hour, hours; d, day, days). The count must be 1..4294967295.
func ParseTimeGranularity(s string) (TimeGranularity, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return TimeGranularity{}, invalidf("granularity %q: expected a count followed by a unit such as 10s, 1m, 1h or 1d", s)
	}
	n, err := strconv.ParseUint(t[:i], 10, 64)
	if err != nil || n == 0 || n > math.MaxUint32 {
		return TimeGranularity{}, invalidf("granularity %q: count must be between 1 and %d", s, uint64(math.MaxUint32))
	}
	var unit TimeUnitName
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "s", "sec", "secs", "second", "seconds":
		unit = Seconds
	case "m", "min", "mins", "minute", "minutes":
		unit = Minutes
	case "h", "hr", "hrs", "hour", "hours":
		unit = Hours
	case "d", "day", "days":
		unit = Days
	default:
		return TimeGranularity{}, invalidf("granularity %q: unknown unit %q (use s, m, h or d)", s, strings.TrimSpace(t[i:]))
	}
	return TimeGranularity{Unit: unit, N: uint32(n)}, nil
}

// ---- JSON ----

// MarshalJSON writes the kind internally tagged by "type".
func (k IndexKind) MarshalJSON() ([]byte, error) { return k.appendJSON(nil), nil }

func (k *IndexKind) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, "type")
	b = appendString(b, string(k.Type))
	b = appendKey(b, "index_granularity")
	if k.Type == IndexTimestamp {
		b = append(b, '{')
		b = appendKey(b, string(k.Time.Unit))
		b = strconv.AppendUint(b, uint64(k.Time.N), 10)
		b = append(b, '}')
		if k.Timezone != nil {
			b = appendKey(b, "timezone")
			b = appendString(b, *k.Timezone)
		}
	} else {
		b = strconv.AppendUint(b, k.Width, 10)
	}
	return append(b, '}')
}

// UnmarshalJSON reads an IndexKind strictly (unknown fields are errors, as
// in the reference). Legacy v6 spellings are refused with ErrNeedsUpgrade.
func (k *IndexKind) UnmarshalJSON(data []byte) error {
	_, err := k.decode(data, false)
	return err
}

// decode reads an IndexKind in the protocol-7 spelling or, when
// allowLegacy is set, in the format-6 one ("bucket" for timestamps,
// "bucket_width" for integers, the tag "u_int64"); legacy reports which
// spelling it found. A spelling is all one or all the other.
func (k *IndexKind) decode(data []byte, allowLegacy bool) (legacy bool, err error) {
	*k = IndexKind{}
	o, err := decodeObject(data)
	if err != nil {
		return false, err
	}
	raw, err := o.need("type")
	if err != nil {
		return false, err
	}
	t, err := decodeString(raw)
	if err != nil {
		return false, fmt.Errorf("type: %w", err)
	}
	legacy = o.get("bucket") != nil || o.get("bucket_width") != nil || t == "u_int64"
	if legacy && !allowLegacy {
		return true, fmt.Errorf("%w: index kind uses the legacy format-6 spelling (bucket/bucket_width/u_int64)", ErrNeedsUpgrade)
	}
	return legacy, k.decodeBody(o, t, legacy)
}

// decodeBody is decode after the spelling is known.
func (k *IndexKind) decodeBody(o *object, t string, legacy bool) error {
	granKey := "index_granularity"
	if legacy {
		switch t {
		case "timestamp":
			granKey = "bucket"
		case "int64", "u_int64":
			granKey = "bucket_width"
		default:
			return fmt.Errorf("unknown format-6 index type %q", t)
		}
		if t == "u_int64" {
			t = string(IndexUInt64)
		}
	}
	k.Type = IndexType(t)
	g, err := o.need(granKey)
	if err != nil {
		return err
	}
	switch k.Type {
	case IndexTimestamp:
		go_, err := decodeObject(g)
		if err != nil {
			return fmt.Errorf("%s: %w", granKey, err)
		}
		unit, n, err := go_.single()
		if err != nil {
			return fmt.Errorf("%s: %w", granKey, err)
		}
		if _, ok := unitSeconds[TimeUnitName(unit)]; !ok {
			return fmt.Errorf("%s: unknown unit %q", granKey, unit)
		}
		v, err := decodeUint(n, 32)
		if err != nil {
			return fmt.Errorf("%s: %w", granKey, err)
		}
		k.Time = TimeGranularity{Unit: TimeUnitName(unit), N: uint32(v)}
		if raw := o.get("timezone"); raw != nil && !isNull(raw) {
			tz, err := decodeString(raw)
			if err != nil {
				return fmt.Errorf("timezone: %w", err)
			}
			k.Timezone = &tz
		}
	case IndexInt64, IndexUInt64:
		if k.Width, err = decodeUint(g, 64); err != nil {
			return fmt.Errorf("%s: %w", granKey, err)
		}
	default:
		return fmt.Errorf("unknown index type %q", t)
	}
	if err := o.unknown(); err != nil {
		return err
	}
	return k.validate()
}

// MarshalJSON writes an IndexSpec; entity_columns is always present.
func (s IndexSpec) MarshalJSON() ([]byte, error) { return s.appendJSON(nil), nil }

func (s *IndexSpec) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, "column")
	b = appendString(b, s.Column)
	b = appendKey(b, "entity_columns")
	b = appendStrings(b, s.EntityColumns)
	b = appendKey(b, "kind")
	b = s.Kind.appendJSON(b)
	return append(b, '}')
}

// UnmarshalJSON reads an IndexSpec strictly; entity_columns defaults to
// empty.
func (s *IndexSpec) UnmarshalJSON(data []byte) error {
	return s.decode(data, false)
}

// decode reads an IndexSpec whose kind is in the format-6 spelling when
// legacy is set and in the protocol-7 one otherwise.
func (s *IndexSpec) decode(data []byte, legacy bool) error {
	*s = IndexSpec{}
	o, err := decodeObject(data)
	if err != nil {
		return err
	}
	raw, err := o.need("column")
	if err != nil {
		return err
	}
	if s.Column, err = decodeString(raw); err != nil {
		return fmt.Errorf("column: %w", err)
	}
	s.EntityColumns = []string{}
	if raw := o.get("entity_columns"); raw != nil {
		if s.EntityColumns, err = decodeStrings(raw); err != nil {
			return fmt.Errorf("entity_columns: %w", err)
		}
	}
	if raw, err = o.need("kind"); err != nil {
		return err
	}
	found, err := s.Kind.decode(raw, legacy)
	if err != nil {
		return fmt.Errorf("kind: %w", err)
	}
	if legacy && !found {
		return fmt.Errorf("kind: format-6 metadata with an index kind in the protocol-7 spelling (index_granularity)")
	}
	return o.unknown()
}

var _ json.Marshaler = IndexSpec{}
