package coverage

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/zeebo/blake3"
)

// Unit is the unit of a timestamp index granularity.
type Unit uint8

// Granularity units.
const (
	UnitSeconds Unit = 1
	UnitMinutes Unit = 2
	UnitHours   Unit = 3
	UnitDays    Unit = 4
)

// seconds returns the length of the unit in seconds and its hash letter.
func (u Unit) seconds() (uint64, byte, bool) {
	switch u {
	case UnitSeconds:
		return 1, 'S', true
	case UnitMinutes:
		return 60, 'M', true
	case UnitHours:
		return 3600, 'H', true
	case UnitDays:
		return 86400, 'D', true
	}
	return 0, 0, false
}

// String returns the granularity key the table log uses ("Seconds", ...).
func (u Unit) String() string {
	switch u {
	case UnitSeconds:
		return "Seconds"
	case UnitMinutes:
		return "Minutes"
	case UnitHours:
		return "Hours"
	case UnitDays:
		return "Days"
	}
	return fmt.Sprintf("Unit(%d)", uint8(u))
}

// IndexSpec describes a table's index as far as coverage needs it. It
// mirrors the index spec of the table log without knowing its JSON.
type IndexSpec struct {
	Column        string
	EntityColumns []string
	Kind          Kind

	// Timestamp indexes: granularity Count (1..2^32-1) of Unit, and the
	// optional timezone, which is metadata only (it changes content ids,
	// never interval ids).
	Unit        Unit
	Count       uint32
	Timezone    string
	HasTimezone bool

	// Integer indexes: the interval width, at least 1.
	Width uint64
}

// ErrInvalidSpec reports an IndexSpec that cannot describe a table index.
var ErrInvalidSpec = errors.New("coverage: invalid index spec")

// Domain returns the interval mapping of the index.
func (s IndexSpec) Domain() (Domain, error) {
	switch s.Kind {
	case KindTimestamp:
		secs, _, ok := s.Unit.seconds()
		if !ok || s.Count == 0 {
			return Domain{}, fmt.Errorf("%w: timestamp granularity %d %s", ErrInvalidSpec, s.Count, s.Unit)
		}
		return NewDomain(KindTimestamp, uint64(s.Count)*secs)
	case KindInt64, KindUInt64:
		return NewDomain(s.Kind, s.Width)
	}
	return Domain{}, fmt.Errorf("%w: kind %s", ErrInvalidSpec, s.Kind)
}

// Entity reports whether the index has entity columns, i.e. whether its
// coverage is an entity Set.
func (s IndexSpec) Entity() bool { return len(s.EntityColumns) > 0 }

// SegmentContentID returns the content id of a segment sidecar: "segcov-"
// and 32 hex digits of a BLAKE3 hash of the index spec and the sidecar
// bytes, computed as the reference does for the spec's table type.
func SegmentContentID(spec IndexSpec, data []byte) (string, error) {
	if spec.Entity() {
		return entityContentID(spec, "entity-segcov-v1", "segcov", data)
	}
	return globalContentID(spec, "segcov-v2", "segcov", data)
}

// TableContentID returns the content id of a table snapshot sidecar
// ("tblcov-" and 32 hex digits).
func TableContentID(spec IndexSpec, data []byte) (string, error) {
	if spec.Entity() {
		return entityContentID(spec, "entity-tblcov-v1", "tblcov", data)
	}
	return globalContentID(spec, "tblcov-v2", "tblcov", data)
}

// hashGranularity writes the kind-specific part shared by both schemes, up to (not
// including) the timezone.
func hashGranularity(h *blake3.Hasher, spec IndexSpec) error {
	switch spec.Kind {
	case KindTimestamp:
		_, letter, ok := spec.Unit.seconds()
		if !ok || spec.Count == 0 {
			return fmt.Errorf("%w: timestamp granularity %d %s", ErrInvalidSpec, spec.Count, spec.Unit)
		}
		_, _ = h.Write([]byte{'T', letter})
		_, _ = h.Write(binary.LittleEndian.AppendUint32(nil, spec.Count))
	case KindInt64, KindUInt64:
		if spec.Width == 0 {
			return fmt.Errorf("%w: zero width", ErrInvalidSpec)
		}
		letter := byte('I')
		if spec.Kind == KindUInt64 {
			letter = 'U'
		}
		_, _ = h.Write([]byte{letter})
		_, _ = h.Write(binary.LittleEndian.AppendUint64(nil, spec.Width))
	default:
		return fmt.Errorf("%w: kind %s", ErrInvalidSpec, spec.Kind)
	}
	return nil
}

func finish(h *blake3.Hasher, prefix string) string {
	sum := h.Sum(nil)
	return prefix + "-" + hex.EncodeToString(sum[:16])
}

// globalContentID is the scheme for tables without entity columns: prefix,
// NUL, column, NUL, kind and granularity, [NUL, timezone flag] for
// timestamps, NUL, bytes.
func globalContentID(spec IndexSpec, domain, prefix string, data []byte) (string, error) {
	h := blake3.New()
	_, _ = h.WriteString(domain)
	_, _ = h.Write([]byte{0})
	_, _ = h.WriteString(spec.Column)
	_, _ = h.Write([]byte{0})
	if err := hashGranularity(h, spec); err != nil {
		return "", err
	}
	if spec.Kind == KindTimestamp {
		_, _ = h.Write([]byte{0})
		if spec.HasTimezone {
			_, _ = h.Write([]byte{'S'})
			_, _ = h.WriteString(spec.Timezone)
		} else {
			_, _ = h.Write([]byte{'N'})
		}
	}
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(data)
	return finish(h, prefix), nil
}

// entityContentID is the scheme for tables with entity columns: every
// variable-length string is written as its decimal length, ':' and bytes.
func entityContentID(spec IndexSpec, domain, prefix string, data []byte) (string, error) {
	h := blake3.New()
	lenPrefixed := func(s string) {
		_, _ = h.WriteString(strconv.Itoa(len(s)))
		_, _ = h.Write([]byte{':'})
		_, _ = h.WriteString(s)
	}
	_, _ = h.WriteString(domain)
	_, _ = h.Write([]byte{0, 'C'})
	lenPrefixed(spec.Column)
	_, _ = h.Write([]byte{'E'})
	_, _ = h.WriteString(strconv.Itoa(len(spec.EntityColumns)))
	_, _ = h.Write([]byte{':'})
	for _, c := range spec.EntityColumns {
		lenPrefixed(c)
	}
	_, _ = h.Write([]byte{'K'})
	if err := hashGranularity(h, spec); err != nil {
		return "", err
	}
	if spec.Kind == KindTimestamp {
		if spec.HasTimezone {
			_, _ = h.Write([]byte{'S'})
			lenPrefixed(spec.Timezone)
		} else {
			_, _ = h.Write([]byte{'N'})
		}
	}
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(data)
	return finish(h, prefix), nil
}

// FileID returns the name stem of a sidecar written by one append attempt:
// the content id, '-', and an attempt id (the reference uses a random
// UUIDv4), so concurrent writers never collide.
func FileID(contentID, attemptID string) string { return contentID + "-" + attemptID }

// ErrInvalidID reports a coverage id that ValidateID rejects.
var ErrInvalidID = errors.New("coverage: invalid coverage id")

// ValidateID checks a coverage file id the way the reference does before
// building a key: 1 to 128 characters from [A-Za-z0-9._-], at least one
// letter or digit, no leading '.', and no "..".
func ValidateID(id string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidID, id, why) }
	if id == "" || len(id) > 128 {
		return bad("length must be 1 to 128")
	}
	if id[0] == '.' {
		return bad("leading dot")
	}
	if strings.Contains(id, "..") {
		return bad(`contains ".."`)
	}
	alnum := false
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			alnum = true
		case c == '.', c == '_', c == '-':
		default:
			return bad("characters must be A-Z a-z 0-9 . _ -")
		}
	}
	if !alnum {
		return bad("no letter or digit")
	}
	return nil
}

// SegmentKey returns the table-relative key of a segment sidecar:
// "_coverage/segments/<fileID>.roar".
func SegmentKey(fileID string) (string, error) {
	if err := ValidateID(fileID); err != nil {
		return "", err
	}
	return "_coverage/segments/" + fileID + ".roar", nil
}

// TableKey returns the table-relative key of the table snapshot written by
// commit version: "_coverage/table/<version>-<fileID>.roar".
func TableKey(version uint64, fileID string) (string, error) {
	if err := ValidateID(fileID); err != nil {
		return "", err
	}
	return "_coverage/table/" + strconv.FormatUint(version, 10) + "-" + fileID + ".roar", nil
}
