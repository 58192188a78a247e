package coverage

import (
	"errors"
	"math"
	"testing"
)

func mustDomain(t testing.TB, k Kind, w uint64) Domain {
	t.Helper()
	d, err := NewDomain(k, w)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestNewDomainRejectsBadInput(t *testing.T) {
	if _, err := NewDomain(KindTimestamp, 0); !errors.Is(err, ErrInvalidDomain) {
		t.Errorf("zero width: %v", err)
	}
	if _, err := NewDomain(Kind(9), 1); !errors.Is(err, ErrInvalidDomain) {
		t.Errorf("bad kind: %v", err)
	}
	var zero Domain
	if _, err := zero.Int64ID(1); !errors.Is(err, ErrInvalidDomain) {
		t.Errorf("zero Domain: %v", err)
	}
	if _, err := mustDomain(t, KindInt64, 1).UInt64ID(1); !errors.Is(err, ErrKindMismatch) {
		t.Errorf("kind mismatch: %v", err)
	}
	if _, err := mustDomain(t, KindTimestamp, 1).TimestampID(0, 7); !errors.Is(err, ErrInvalidUnit) {
		t.Errorf("unit 7: %v", err)
	}
}

func TestTimestampIDs(t *testing.T) {
	hour := mustDomain(t, KindTimestamp, 3600)
	// The worked example of the format notes: 2024-06-01T00:00Z at 1h.
	for _, c := range []struct{ raw, unit int64 }{
		{baseS, Seconds}, {baseMS, Milliseconds}, {baseMS * 1000, Microseconds}, {baseMS * 1_000_000, Nanoseconds},
		{baseMS + hourMS - 1, Milliseconds}, {(baseS+3599)*1e9 + 999_999_999, Nanoseconds},
	} {
		id, err := hour.TimestampID(c.raw, c.unit)
		if err != nil || id != 0x8000_0000_0007_4748 {
			t.Errorf("TimestampID(%d, %d) = %#x, %v", c.raw, c.unit, id, err)
		}
	}
	// Around the epoch, Euclidean: -1 ns is in the second before.
	sec := mustDomain(t, KindTimestamp, 1)
	for _, c := range []struct {
		raw, unit int64
		want      uint64
	}{
		{-1, Seconds, signFlip - 1}, {0, Seconds, signFlip}, {1, Seconds, signFlip + 1},
		{-1, Nanoseconds, signFlip - 1}, {-1_000_000_000, Nanoseconds, signFlip - 1},
		{-1_000_000_001, Nanoseconds, signFlip - 2}, {999_999_999, Nanoseconds, signFlip},
		{math.MinInt64, Nanoseconds, signFlip - 9_223_372_037},
		{math.MaxInt64, Nanoseconds, signFlip + 9_223_372_036},
	} {
		if id, err := sec.TimestampID(c.raw, c.unit); err != nil || id != c.want {
			t.Errorf("TimestampID(%d, %d) = %#x, %v; want %#x", c.raw, c.unit, id, err, c.want)
		}
	}
	minute := mustDomain(t, KindTimestamp, 60)
	for s, want := range map[int64]uint64{-61: signFlip - 2, -60: signFlip - 1, -1: signFlip - 1, 0: signFlip, 59: signFlip} {
		if id, _ := minute.TimestampID(s, Seconds); id != want {
			t.Errorf("1m TimestampID(%ds) = %#x, want %#x", s, id, want)
		}
	}
	// The domain is the reference's date-time range.
	for _, c := range []struct {
		raw, unit int64
		ok        bool
	}{
		{MaxEpochSecond, Seconds, true}, {MaxEpochSecond + 1, Seconds, false},
		{MinEpochSecond, Seconds, true}, {MinEpochSecond - 1, Seconds, false},
		{MaxEpochSecond*1000 + 999, Milliseconds, true}, {(MaxEpochSecond + 1) * 1000, Milliseconds, false},
		{math.MaxInt64, Milliseconds, false}, {math.MinInt64, Microseconds, false},
		{math.MaxInt64, Seconds, false}, {math.MinInt64, Seconds, false},
	} {
		_, err := sec.TimestampID(c.raw, c.unit)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrOutOfDomain)) {
			t.Errorf("TimestampID(%d, %d): %v, want ok=%v", c.raw, c.unit, err, c.ok)
		}
	}
	// A width beyond int64 puts every non-negative second in ordinal 0.
	huge := mustDomain(t, KindTimestamp, math.MaxUint64)
	if id, _ := huge.TimestampID(MaxEpochSecond, Seconds); id != signFlip {
		t.Errorf("huge width: %#x", id)
	}
	if id, _ := huge.TimestampID(-1, Seconds); id != signFlip-1 {
		t.Errorf("huge width, negative: %#x", id)
	}
}

func TestIntegerIDs(t *testing.T) {
	for _, w := range []uint64{1, 3, 10, math.MaxInt64, 1 << 63, math.MaxUint64} {
		d := mustDomain(t, KindInt64, w)
		var prev uint64
		for i, v := range []int64{math.MinInt64, math.MinInt64 + 1, -11, -10, -1, 0, 1, 9, 10, math.MaxInt64} {
			id, err := d.Int64ID(v)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && id < prev {
				t.Errorf("width %d: id(%d)=%#x < previous %#x", w, v, id, prev)
			}
			prev = id
		}
	}
	unit := mustDomain(t, KindInt64, 1)
	for v, want := range map[int64]uint64{math.MinInt64: 0, 0: signFlip, math.MaxInt64: math.MaxUint64} {
		if id, _ := unit.Int64ID(v); id != want {
			t.Errorf("Int64ID(%d) = %#x, want %#x", v, id, want)
		}
	}
	ten := mustDomain(t, KindInt64, 10)
	for v, want := range map[int64]uint64{-100: signFlip - 10, -5: signFlip - 1, -10: signFlip - 1, -11: signFlip - 2, 0: signFlip, 15: signFlip + 1} {
		if id, _ := ten.Int64ID(v); id != want {
			t.Errorf("width 10: Int64ID(%d) = %#x, want %#x", v, id, want)
		}
	}
	u := mustDomain(t, KindUInt64, 1)
	for _, v := range []uint64{0, 1 << 63, math.MaxUint64} {
		if id, _ := u.UInt64ID(v); id != v {
			t.Errorf("UInt64ID(%d) = %d", v, id)
		}
	}
	u10 := mustDomain(t, KindUInt64, 10)
	if id, _ := u10.UInt64ID(math.MaxUint64); id != math.MaxUint64/10 {
		t.Errorf("UInt64ID(max)/10 = %d", id)
	}
}

func TestHalfOpenRanges(t *testing.T) {
	ten := mustDomain(t, KindInt64, 10)
	if r, err := ten.Int64Range(0, 20); err != nil || r != (Range{signFlip, signFlip + 1}) {
		t.Errorf("Int64Range(0,20) = %v, %v", r, err)
	}
	if r, err := ten.Int64Range(0, 21); err != nil || r != (Range{signFlip, signFlip + 2}) {
		t.Errorf("Int64Range(0,21) = %v, %v", r, err)
	}
	if r, err := ten.Int64Range(math.MinInt64, math.MaxInt64); err != nil || r.First != signFlip-922_337_203_685_477_581 || r.Last != signFlip+922_337_203_685_477_580 {
		t.Errorf("Int64Range(min,max) = %v, %v", r, err)
	}
	u := mustDomain(t, KindUInt64, 10)
	if r, err := u.UInt64Range(0, 20); err != nil || r != (Range{0, 1}) {
		t.Errorf("UInt64Range(0,20) = %v, %v", r, err)
	}
	if r, err := u.UInt64Range(0, 1); err != nil || r != (Range{0, 0}) {
		t.Errorf("UInt64Range(0,1) = %v, %v", r, err)
	}
	sec := mustDomain(t, KindTimestamp, 1)
	if r, err := sec.TimestampRange(0, 2e9, Nanoseconds); err != nil || r != (Range{signFlip, signFlip + 1}) {
		t.Errorf("TimestampRange(0s,2s) = %v, %v", r, err)
	}
	if r, err := sec.TimestampRange(0, 2e9+1, Nanoseconds); err != nil || r != (Range{signFlip, signFlip + 2}) {
		t.Errorf("TimestampRange(0s,2s+1ns) = %v, %v", r, err)
	}
	if r, err := sec.TimestampRange(0, 2000, Milliseconds); err != nil || r != (Range{signFlip, signFlip + 1}) {
		t.Errorf("TimestampRange(0,2000ms) = %v, %v", r, err)
	}
	for name, err := range map[string]error{
		"int empty":    second(ten.Int64Range(5, 5)),
		"int inverted": second(ten.Int64Range(6, 5)),
		"uint empty":   second(u.UInt64Range(1, 1)),
		"ts inverted":  second(sec.TimestampRange(10, 9, Seconds)),
	} {
		if !errors.Is(err, ErrEmptyRange) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := sec.TimestampRange(0, MaxEpochSecond+1, Seconds); !errors.Is(err, ErrOutOfDomain) {
		t.Errorf("end outside the domain: %v", err)
	}
	if _, err := ten.UInt64Range(0, 1); !errors.Is(err, ErrKindMismatch) {
		t.Errorf("kind mismatch: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestIDBefore(t *testing.T) {
	ten := mustDomain(t, KindInt64, 10)
	if id, err := ten.Int64IDBefore(20); err != nil || id != signFlip+1 {
		t.Errorf("Int64IDBefore(20) = %#x, %v", id, err)
	}
	if _, err := ten.Int64IDBefore(math.MinInt64); !errors.Is(err, ErrEmptyRange) {
		t.Errorf("Int64IDBefore(min): %v", err)
	}
	u := mustDomain(t, KindUInt64, 10)
	if _, err := u.UInt64IDBefore(0); !errors.Is(err, ErrEmptyRange) {
		t.Errorf("UInt64IDBefore(0): %v", err)
	}
	if id, _ := u.UInt64IDBefore(10); id != 0 {
		t.Errorf("UInt64IDBefore(10) = %d", id)
	}
	min := mustDomain(t, KindTimestamp, 60)
	// 00:06:00 exclusive -> interval 5 after the epoch.
	if id, err := min.TimestampIDBefore(360_000, Milliseconds); err != nil || id != signFlip+5 {
		t.Errorf("TimestampIDBefore(6m) = %#x, %v", id, err)
	}
	if _, err := min.TimestampIDBefore(MinEpochSecond, Seconds); !errors.Is(err, ErrEmptyRange) {
		t.Errorf("TimestampIDBefore(domain start): %v", err)
	}
	// The instant before the smallest raw nanosecond value still exists.
	if id, err := min.TimestampIDBefore(math.MinInt64, Nanoseconds); err != nil || id != signFlip-153_722_868 {
		t.Errorf("TimestampIDBefore(min ns) = %#x, %v", id, err)
	}
	if id, err := mustDomain(t, KindTimestamp, 1).TimestampIDBefore(-2_000, Milliseconds); err != nil || id != signFlip-3 {
		t.Errorf("TimestampIDBefore(-2s) = %#x, %v", id, err)
	}
}

func TestReverseMapping(t *testing.T) {
	type sc = SignedInterval
	i1 := mustDomain(t, KindInt64, 1)
	id, _ := i1.Int64ID(50_464)
	if iv, err := i1.SignedInterval(id); err != nil || iv != (sc{50_464, 50_465, false}) {
		t.Errorf("width 1: %+v, %v", iv, err)
	}
	i10 := mustDomain(t, KindInt64, 10)
	id, _ = i10.Int64ID(-11)
	if iv, _ := i10.SignedInterval(id); iv != (sc{-20, -10, false}) {
		t.Errorf("width 10, -11: %+v", iv)
	}
	id, _ = i10.Int64ID(math.MaxInt64)
	if iv, _ := i10.SignedInterval(id); iv != (sc{math.MaxInt64 / 10 * 10, math.MaxInt64, true}) {
		t.Errorf("top interval: %+v", iv)
	}
	id, _ = i10.Int64ID(math.MinInt64)
	if iv, _ := i10.SignedInterval(id); iv.Start != math.MinInt64 || iv.EndInclusive || iv.End != math.MinInt64/10*10 {
		t.Errorf("bottom interval: %+v", iv)
	}
	// An interval whose end is exactly 2^63 is the top one.
	i2 := mustDomain(t, KindInt64, 2)
	id, _ = i2.Int64ID(math.MaxInt64)
	if iv, err := i2.SignedInterval(id); err != nil || iv != (sc{math.MaxInt64 - 1, math.MaxInt64, true}) {
		t.Errorf("width 2 top: %+v, %v", iv, err)
	}
	if _, err := i2.SignedInterval(math.MaxUint64); !errors.Is(err, ErrOutOfDomain) {
		t.Errorf("width 2, id max: %v", err)
	}
	// Ids beyond the domain.
	i3 := mustDomain(t, KindInt64, 3)
	if _, err := i3.SignedInterval(math.MaxUint64); !errors.Is(err, ErrOutOfDomain) {
		t.Errorf("unreachable id: %v", err)
	}
	if _, err := i3.SignedInterval(0); !errors.Is(err, ErrOutOfDomain) {
		t.Errorf("unreachable low id: %v", err)
	}
	u10 := mustDomain(t, KindUInt64, 10)
	if iv, _ := u10.UnsignedInterval(5046); iv != (UnsignedInterval{50460, 50470, false}) {
		t.Errorf("uint 5046: %+v", iv)
	}
	if iv, _ := u10.UnsignedInterval(math.MaxUint64 / 10); iv != (UnsignedInterval{math.MaxUint64 / 10 * 10, math.MaxUint64, true}) {
		t.Errorf("uint top: %+v", iv)
	}
	if _, err := mustDomain(t, KindUInt64, 2).UnsignedInterval(math.MaxUint64); !errors.Is(err, ErrOutOfDomain) {
		t.Errorf("uint unreachable: %v", err)
	}
	hour := mustDomain(t, KindTimestamp, 3600)
	if iv, _ := hour.SignedInterval(signFlip); iv != (sc{0, 3600, false}) {
		t.Errorf("epoch hour: %+v", iv)
	}
	if iv, _ := hour.SignedInterval(signFlip - 1); iv != (sc{-3600, 0, false}) {
		t.Errorf("hour before epoch: %+v", iv)
	}
	days := mustDomain(t, KindTimestamp, uint64(math.MaxUint32)*86400)
	id, _ = days.TimestampID(MaxEpochSecond, Seconds)
	if iv, _ := days.SignedInterval(id); iv.End != MaxEpochSecond || !iv.EndInclusive {
		t.Errorf("timestamp top: %+v", iv)
	}
	id, _ = days.TimestampID(MinEpochSecond, Seconds)
	if iv, _ := days.SignedInterval(id); iv.Start != MinEpochSecond {
		t.Errorf("timestamp bottom: %+v", iv)
	}
	if _, err := hour.SignedInterval(math.MaxUint64); !errors.Is(err, ErrOutOfDomain) {
		t.Errorf("timestamp unreachable: %v", err)
	}
	if _, err := hour.UnsignedInterval(1); !errors.Is(err, ErrKindMismatch) {
		t.Errorf("kind mismatch: %v", err)
	}
	if _, err := u10.SignedInterval(1); !errors.Is(err, ErrKindMismatch) {
		t.Errorf("kind mismatch: %v", err)
	}
}

func TestIndexSpecDomain(t *testing.T) {
	d, err := IndexSpec{Kind: KindTimestamp, Unit: UnitDays, Count: math.MaxUint32}.Domain()
	if err != nil || d.Width() != uint64(math.MaxUint32)*86400 {
		t.Errorf("Days(max) = %v, %v", d.Width(), err)
	}
	if _, err := (IndexSpec{Kind: KindTimestamp, Unit: UnitHours}).Domain(); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("zero count: %v", err)
	}
	if _, err := (IndexSpec{Kind: KindUInt64}).Domain(); !errors.Is(err, ErrInvalidDomain) {
		t.Errorf("zero width: %v", err)
	}
}
