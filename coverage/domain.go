package coverage

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Kind is the kind of ordered index a Domain maps.
type Kind uint8

// Index kinds. The numeric values are internal to this package.
const (
	KindTimestamp Kind = 1 // UTC timestamps; width in whole seconds
	KindInt64     Kind = 2 // signed 64-bit keys; width in key units
	KindUInt64    Kind = 3 // unsigned 64-bit keys; width in key units
)

// String returns the lower-case name the table format uses for the kind.
func (k Kind) String() string {
	switch k {
	case KindTimestamp:
		return "timestamp"
	case KindInt64:
		return "int64"
	case KindUInt64:
		return "uint64"
	default:
		return fmt.Sprintf("Kind(%d)", uint8(k))
	}
}

// Timestamp resolutions accepted by the timestamp functions, expressed as
// raw units per second (the Arrow time units).
const (
	Seconds      int64 = 1
	Milliseconds int64 = 1_000
	Microseconds int64 = 1_000_000
	Nanoseconds  int64 = 1_000_000_000
)

// The timestamp domain, in whole seconds since the Unix epoch. These are the
// bounds of the reference implementation's UTC date-time type:
// -262143-01-01T00:00:00Z through +262142-12-31T23:59:59.999999999Z.
const (
	MinEpochSecond int64 = -8_334_601_315_200
	MaxEpochSecond int64 = 8_210_266_876_799
)

// signFlip maps signed ordinals onto uint64 while preserving order.
const signFlip uint64 = 1 << 63

// Errors returned by Domain.
var (
	// ErrInvalidDomain reports an unknown kind or a zero width.
	ErrInvalidDomain = errors.New("coverage: invalid index domain")
	// ErrKindMismatch reports a value of another kind than the domain's.
	ErrKindMismatch = errors.New("coverage: value kind does not match the index domain")
	// ErrInvalidUnit reports a timestamp resolution other than s, ms, us or ns.
	ErrInvalidUnit = errors.New("coverage: timestamp unit must be 1, 1e3, 1e6 or 1e9 per second")
	// ErrOutOfDomain reports a value or interval id outside the index domain.
	ErrOutOfDomain = errors.New("coverage: value outside the index domain")
	// ErrEmptyRange reports a half-open range [start, end) with start >= end,
	// an inclusive id range with First > Last, or an exclusive end that has
	// no predecessor in the domain.
	ErrEmptyRange = errors.New("coverage: empty or inverted range")
)

// Domain maps ordered-index values to 64-bit interval ids and back.
//
// Interval ids are opaque outside this package: they are ordered like the
// values they come from, consecutive intervals have consecutive ids, and
// their numeric values are what the sidecar files store.
type Domain struct {
	kind  Kind
	width uint64
}

// NewDomain returns the domain of the given kind and width. The width is in
// seconds for timestamps (granularity count times 1, 60, 3600 or 86400) and
// in key units for the integer kinds; any value from 1 to math.MaxUint64 is
// accepted.
func NewDomain(kind Kind, width uint64) (Domain, error) {
	if kind != KindTimestamp && kind != KindInt64 && kind != KindUInt64 {
		return Domain{}, fmt.Errorf("%w: unknown kind %d", ErrInvalidDomain, uint8(kind))
	}
	if width == 0 {
		return Domain{}, fmt.Errorf("%w: width must be positive", ErrInvalidDomain)
	}
	return Domain{kind: kind, width: width}, nil
}

// Kind returns the domain's index kind.
func (d Domain) Kind() Kind { return d.kind }

// Width returns the interval width (seconds or key units).
func (d Domain) Width() uint64 { return d.width }

func (d Domain) check(kind Kind) error {
	if d.width == 0 {
		return fmt.Errorf("%w: zero Domain value", ErrInvalidDomain)
	}
	if d.kind != kind {
		return fmt.Errorf("%w: domain is %s, value is %s", ErrKindMismatch, d.kind, kind)
	}
	return nil
}

// EpochSecond returns floor(raw / unitsPerSecond), the whole UTC second
// containing a timestamp given in raw units, and checks that it lies in the
// timestamp domain [MinEpochSecond, MaxEpochSecond].
func EpochSecond(raw, unitsPerSecond int64) (int64, error) {
	switch unitsPerSecond {
	case Seconds, Milliseconds, Microseconds, Nanoseconds:
	default:
		return 0, fmt.Errorf("%w: got %d", ErrInvalidUnit, unitsPerSecond)
	}
	sec := floorDiv(raw, unitsPerSecond)
	if sec < MinEpochSecond || sec > MaxEpochSecond {
		return 0, fmt.Errorf("%w: timestamp %d at %d units/s", ErrOutOfDomain, raw, unitsPerSecond)
	}
	return sec, nil
}

// floorDiv is Euclidean division for a positive divisor.
func floorDiv(v, w int64) int64 {
	q := v / w
	if v%w != 0 && v < 0 {
		q--
	}
	return q
}

// signedOrdinal is floor(v / width) for a positive width of up to
// math.MaxUint64.
func signedOrdinal(v int64, width uint64) int64 {
	if width > math.MaxInt64 {
		if v < 0 {
			return -1
		}
		return 0
	}
	return floorDiv(v, int64(width))
}

func signedID(ordinal int64) uint64 { return uint64(ordinal) ^ signFlip }

// timestampSecond checks that d is a timestamp domain and returns the
// epoch second of raw units at unitsPerSecond (EpochSecond).
func (d Domain) timestampSecond(raw, unitsPerSecond int64) (int64, error) {
	if err := d.check(KindTimestamp); err != nil {
		return 0, err
	}
	return EpochSecond(raw, unitsPerSecond)
}

// TimestampID returns the interval id of a timestamp given as raw units since
// the Unix epoch at unitsPerSecond (Seconds, Milliseconds, Microseconds or
// Nanoseconds). The sub-second part is discarded before dividing by the width.
func (d Domain) TimestampID(raw, unitsPerSecond int64) (uint64, error) {
	sec, err := d.timestampSecond(raw, unitsPerSecond)
	if err != nil {
		return 0, err
	}
	return signedID(signedOrdinal(sec, d.width)), nil
}

// Int64ID returns the interval id of a signed key.
func (d Domain) Int64ID(v int64) (uint64, error) {
	if err := d.check(KindInt64); err != nil {
		return 0, err
	}
	return signedID(signedOrdinal(v, d.width)), nil
}

// UInt64ID returns the interval id of an unsigned key.
func (d Domain) UInt64ID(v uint64) (uint64, error) {
	if err := d.check(KindUInt64); err != nil {
		return 0, err
	}
	return v / d.width, nil
}

// TimestampRange returns the ids of the intervals that intersect the
// half-open range [start, end), both in raw units at unitsPerSecond:
// First = id(start), Last = id(end - 1 unit). Both endpoints must lie in the
// timestamp domain.
func (d Domain) TimestampRange(start, end, unitsPerSecond int64) (Range, error) {
	first, err := d.TimestampID(start, unitsPerSecond)
	if err != nil {
		return Range{}, err
	}
	if _, err := EpochSecond(end, unitsPerSecond); err != nil {
		return Range{}, err
	}
	if start >= end {
		return Range{}, fmt.Errorf("%w: [%d, %d)", ErrEmptyRange, start, end)
	}
	last, err := d.TimestampID(end-1, unitsPerSecond)
	if err != nil {
		return Range{}, err
	}
	return Range{First: first, Last: last}, nil
}

// Int64Range returns the ids of the intervals that intersect [start, end).
func (d Domain) Int64Range(start, end int64) (Range, error) { return keyRange(start, end, d.Int64ID) }

// UInt64Range returns the ids of the intervals that intersect [start, end).
func (d Domain) UInt64Range(start, end uint64) (Range, error) {
	return keyRange(start, end, d.UInt64ID)
}

// keyRange returns the ids of the intervals that intersect [start, end)
// of an integer domain whose interval of a key id gives (it fails only
// on a domain of another kind).
func keyRange[K int64 | uint64](start, end K, id func(K) (uint64, error)) (Range, error) {
	first, err := id(start)
	if err != nil {
		return Range{}, err
	}
	if start >= end {
		return Range{}, fmt.Errorf("%w: [%d, %d)", ErrEmptyRange, start, end)
	}
	last, _ := id(end - 1)
	return Range{First: first, Last: last}, nil
}

// TimestampIDBefore returns the id of the interval holding the last instant
// before the exclusive end (end - 1 unit). It is the upper bound used by
// "last window ending before end" queries.
func (d Domain) TimestampIDBefore(end, unitsPerSecond int64) (uint64, error) {
	sec, err := d.timestampSecond(end, unitsPerSecond)
	if err != nil {
		return 0, err
	}
	// The second holding end - 1 unit; computed without forming end - 1,
	// which does not fit in int64 for end = math.MinInt64.
	if end%unitsPerSecond == 0 {
		sec--
	}
	if sec < MinEpochSecond {
		return 0, fmt.Errorf("%w: no timestamp before %d", ErrEmptyRange, end)
	}
	return signedID(signedOrdinal(sec, d.width)), nil
}

// Int64IDBefore returns the id of the interval holding end - 1.
func (d Domain) Int64IDBefore(end int64) (uint64, error) {
	if err := d.check(KindInt64); err != nil {
		return 0, err
	}
	if end == math.MinInt64 {
		return 0, fmt.Errorf("%w: no key before %d", ErrEmptyRange, end)
	}
	return d.Int64ID(end - 1)
}

// UInt64IDBefore returns the id of the interval holding end - 1.
func (d Domain) UInt64IDBefore(end uint64) (uint64, error) {
	if err := d.check(KindUInt64); err != nil {
		return 0, err
	}
	if end == 0 {
		return 0, fmt.Errorf("%w: no key before 0", ErrEmptyRange)
	}
	return d.UInt64ID(end - 1)
}

// SignedInterval is the extent of one interval of a timestamp or int64
// domain: [Start, End) in whole seconds (timestamps) or key units (int64).
//
// Intervals are clipped to the domain. The interval that reaches the top of
// the domain cannot be written half-open, so it is reported with
// EndInclusive set and End equal to the domain's last value: math.MaxInt64
// for int64, and MaxEpochSecond for timestamps, where it stands for the whole
// last second (through 23:59:59.999999999Z of the domain's last day).
type SignedInterval struct {
	Start, End   int64
	EndInclusive bool
}

// UnsignedInterval is the extent [Start, End) of one interval of a uint64
// domain, clipped like SignedInterval: the interval holding math.MaxUint64
// has EndInclusive set and End = math.MaxUint64.
type UnsignedInterval struct {
	Start, End   uint64
	EndInclusive bool
}

// mulSigned returns a*b and -1, 0 or +1 for a product below, inside or above
// the int64 range.
func mulSigned(a int64, b uint64) (int64, int) {
	neg := a < 0
	mag := uint64(a)
	if neg {
		mag = -mag // two's complement magnitude; correct for math.MinInt64 too
	}
	hi, lo := bits.Mul64(mag, b)
	if !neg {
		if hi != 0 || lo > math.MaxInt64 {
			return 0, 1
		}
		return int64(lo), 0
	}
	if hi != 0 || lo > 1<<63 {
		return 0, -1
	}
	return int64(-lo), 0 // -(1<<63) wraps to math.MinInt64, as wanted
}

// SignedInterval returns the clipped extent of interval id in a timestamp
// (seconds) or int64 (key units) domain. Ids whose interval lies entirely
// outside the domain are ErrOutOfDomain.
func (d Domain) SignedInterval(id uint64) (SignedInterval, error) {
	if d.width == 0 {
		return SignedInterval{}, fmt.Errorf("%w: zero Domain value", ErrInvalidDomain)
	}
	var lo, hi int64 // domain [lo, hi] inclusive
	switch d.kind {
	case KindTimestamp:
		lo, hi = MinEpochSecond, MaxEpochSecond
	case KindInt64:
		lo, hi = math.MinInt64, math.MaxInt64
	default:
		return SignedInterval{}, fmt.Errorf("%w: domain is %s, not signed", ErrKindMismatch, d.kind)
	}
	ordinal := int64(id ^ signFlip)

	// start = max(ordinal*width, lo)
	start, sOver := mulSigned(ordinal, d.width)
	switch {
	case sOver > 0:
		return SignedInterval{}, fmt.Errorf("%w: interval id %#x", ErrOutOfDomain, id)
	case sOver < 0 || start < lo:
		start = lo
	}
	if start > hi {
		return SignedInterval{}, fmt.Errorf("%w: interval id %#x", ErrOutOfDomain, id)
	}

	// end = (ordinal+1)*width, clipped to hi+1 (which may not fit in int64).
	var endAbove bool // true end > hi
	var end int64
	if ordinal == math.MaxInt64 {
		endAbove = true // (2^63)*width > any int64
	} else {
		e, eOver := mulSigned(ordinal+1, d.width)
		switch {
		case eOver > 0:
			endAbove = true
		case eOver < 0:
			return SignedInterval{}, fmt.Errorf("%w: interval id %#x", ErrOutOfDomain, id)
		default:
			end = e
			if e > hi {
				endAbove = true
			}
		}
	}
	if endAbove {
		return SignedInterval{Start: start, End: hi, EndInclusive: true}, nil
	}
	if end <= start {
		return SignedInterval{}, fmt.Errorf("%w: interval id %#x", ErrOutOfDomain, id)
	}
	return SignedInterval{Start: start, End: end}, nil
}

// UnsignedInterval returns the clipped extent of interval id in a uint64
// domain. Ids beyond math.MaxUint64 / width are ErrOutOfDomain.
func (d Domain) UnsignedInterval(id uint64) (UnsignedInterval, error) {
	if err := d.check(KindUInt64); err != nil {
		return UnsignedInterval{}, err
	}
	hi, start := bits.Mul64(id, d.width)
	if hi != 0 {
		return UnsignedInterval{}, fmt.Errorf("%w: interval id %d", ErrOutOfDomain, id)
	}
	end, carry := bits.Add64(start, d.width, 0)
	if carry != 0 {
		return UnsignedInterval{Start: start, End: math.MaxUint64, EndInclusive: true}, nil
	}
	return UnsignedInterval{Start: start, End: end}, nil
}
