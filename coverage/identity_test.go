package coverage

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestComponentOrder(t *testing.T) {
	// Sorted as the reference's derived Ord: variant first, then value.
	sorted := []Component{
		Utf8(""), Utf8("A"), Utf8("Z"), Utf8("a"), Utf8("\u00e9"), Utf8("\U0001f600"),
		Int32(math.MinInt32), Int32(-1), Int32(0), Int32(math.MaxInt32),
		Int64(math.MinInt64), Int64(-1), Int64(1), Int64(math.MaxInt64),
		UInt64(0), UInt64(1), UInt64(math.MaxUint64),
	}
	for i := range sorted {
		for j := range sorted {
			got := sorted[i].Compare(sorted[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got != want {
				t.Errorf("%v.Compare(%v) = %d, want %d", sorted[i], sorted[j], got, want)
			}
		}
	}
}

func TestIdentityOrderAndKeys(t *testing.T) {
	ids := []Identity{
		{Utf8("A")},
		{Utf8("A"), Utf8("A")},
		{Utf8("A"), Utf8("Z")},
		{Utf8("B"), Utf8("A")},
		{Int32(1)},
		{Int64(1)},
		{UInt64(1)},
	}
	shuffled := slices.Clone(ids)
	slices.Reverse(shuffled)
	slices.SortFunc(shuffled, Identity.Compare)
	for i := range ids {
		if !ids[i].Equal(shuffled[i]) {
			t.Fatalf("sorted order %v, want %v", shuffled, ids)
		}
	}
	keys := map[string]Identity{}
	more := append(ids, Identity{Utf8("a"), Utf8("b:c")}, Identity{Utf8("a:b"), Utf8("c")},
		Identity{Utf8("ab")}, Identity{Utf8("a"), Utf8("b")}, Identity{Utf8("")}, Identity{Utf8(""), Utf8("")})
	for _, id := range more {
		if prev, dup := keys[id.Key()]; dup {
			t.Errorf("%v and %v share a key", prev, id)
		}
		keys[id.Key()] = id
	}
	// Fields that do not belong to the tag are ignored.
	noisy := Identity{{Tag: TagUtf8, Str: "x", Int: 5, Uint: 9}, {Tag: TagInt64, Int: 3, Str: "junk"}}
	clean := Identity{Utf8("x"), Int64(3)}
	if noisy.Key() != clean.Key() || noisy.Compare(clean) != 0 {
		t.Error("irrelevant component fields change the identity")
	}
	// An out-of-range int32 never aliases a valid one.
	if (Identity{{Tag: TagInt32, Int: 1<<32 + 5}}).Key() == (Identity{Int32(5)}).Key() {
		t.Error("int32 key aliasing")
	}
	if got := (Identity{Utf8("a\"b"), Int32(-7), UInt64(3)}).String(); got != `[utf8:"a\"b", int32:-7, uint64:3]` {
		t.Errorf("String = %s", got)
	}
}

func TestIdentityValidate(t *testing.T) {
	for name, id := range map[string]Identity{
		"empty":       {},
		"bad utf8":    {Utf8("\xff")},
		"int32 range": {{Tag: TagInt32, Int: math.MaxInt32 + 1}},
		"unknown tag": {{Tag: 9}},
		"zero tag":    {{}},
	} {
		if err := id.Validate(); !errors.Is(err, ErrInvalidIdentity) {
			t.Errorf("%s: Validate = %v", name, err)
		}
	}
	if err := (Identity{Utf8("ok"), Int32(math.MinInt32), Int64(0), UInt64(0)}).Validate(); err != nil {
		t.Error(err)
	}
}
