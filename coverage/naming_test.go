package coverage

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateID(t *testing.T) {
	for _, id := range []string{"abc", "A_B-1.2", strings.Repeat("a", 128), "a.b", "-x", "x-", "_1"} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", strings.Repeat("x", 129), "a/b", `a\b`, "a..b", "..", "../etc", ".hidden",
		"space id", "id*", "id@", "id$", "id:", "---", "._", "caf\u00e9", "a\x00"} {
		if err := ValidateID(id); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalidID", id, err)
		}
	}
}

func TestKeys(t *testing.T) {
	if k, err := SegmentKey("seg-001"); err != nil || k != "_coverage/segments/seg-001.roar" {
		t.Errorf("SegmentKey = %q, %v", k, err)
	}
	if k, err := TableKey(42, "snap-001"); err != nil || k != "_coverage/table/42-snap-001.roar" {
		t.Errorf("TableKey = %q, %v", k, err)
	}
	if _, err := SegmentKey("bad/id"); !errors.Is(err, ErrInvalidID) {
		t.Errorf("SegmentKey(bad/id) = %v", err)
	}
	if _, err := TableKey(1, ".."); !errors.Is(err, ErrInvalidID) {
		t.Errorf("TableKey(..) = %v", err)
	}
	if got := FileID("segcov-0123", "u-1"); got != "segcov-0123-u-1" {
		t.Errorf("FileID = %q", got)
	}
}

// The ts_entity reference table's first segment sidecar: its bytes are the
// NVDA hexdump (TestNVDAHexdump) and the package named it
// segcov-825f3db8f3643beb82f97843d45f62c7-<uuid>.
func TestContentIDOfReferenceSidecar(t *testing.T) {
	d, _ := NewDomain(KindTimestamp, 3600)
	s := NewEntity()
	first, _ := d.TimestampID(baseMS, Milliseconds)
	if err := s.AddRange(Identity{Utf8("NVDA")}, Range{First: first, Last: first + 239}); err != nil {
		t.Fatal(err)
	}
	data := mustEncode(t, s)
	spec := IndexSpec{Column: "ts", EntityColumns: []string{"symbol"}, Kind: KindTimestamp,
		Unit: UnitHours, Count: 1, Timezone: "America/New_York", HasTimezone: true}
	if id, err := SegmentContentID(spec, data); err != nil || id != "segcov-825f3db8f3643beb82f97843d45f62c7" {
		t.Errorf("SegmentContentID = %s, %v", id, err)
	}
	if id, err := TableContentID(spec, data); err != nil || id != "tblcov-775b8e090f6780e75a56ef7f2800883b" {
		t.Errorf("TableContentID = %s, %v", id, err)
	}
}

func TestContentIDDependsOnEverything(t *testing.T) {
	base := IndexSpec{Column: "ts", Kind: KindTimestamp, Unit: UnitSeconds, Count: 5}
	ent := IndexSpec{Column: "ts", EntityColumns: []string{"symbol", "venue"}, Kind: KindTimestamp, Unit: UnitMinutes, Count: 1}
	variants := []IndexSpec{
		base,
		{Column: "ts", Kind: KindTimestamp, Unit: UnitHours, Count: 5},
		{Column: "ts", Kind: KindTimestamp, Unit: UnitSeconds, Count: 6},
		{Column: "event_time", Kind: KindTimestamp, Unit: UnitSeconds, Count: 5},
		{Column: "ts", Kind: KindTimestamp, Unit: UnitSeconds, Count: 5, HasTimezone: true},
		{Column: "ts", Kind: KindTimestamp, Unit: UnitSeconds, Count: 5, HasTimezone: true, Timezone: "UTC"},
		{Column: "ts", Kind: KindUInt64, Width: 5},
		{Column: "ts", Kind: KindInt64, Width: 5},
		{Column: "ts", Kind: KindUInt64, Width: 6},
		ent,
		{Column: "ts", EntityColumns: []string{"device", "venue"}, Kind: KindTimestamp, Unit: UnitMinutes, Count: 1},
		{Column: "ts", EntityColumns: []string{"venue", "symbol"}, Kind: KindTimestamp, Unit: UnitMinutes, Count: 1},
		{Column: "ts", EntityColumns: []string{"symbolvenue"}, Kind: KindTimestamp, Unit: UnitMinutes, Count: 1},
	}
	seen := map[string]int{}
	for i, v := range variants {
		for _, f := range []func(IndexSpec, []byte) (string, error){SegmentContentID, TableContentID} {
			id, err := f(v, []byte("bytes"))
			if err != nil {
				t.Fatal(err)
			}
			if err := ValidateID(FileID(id, "0f0e0d0c-0b0a-4908-8706-050403020100")); err != nil {
				t.Error(err)
			}
			if len(id) != len("segcov-")+32 {
				t.Errorf("id %q has the wrong length", id)
			}
			if j, dup := seen[id]; dup {
				t.Errorf("variants %d and %d share content id %s", j, i, id)
			}
			seen[id] = i
		}
	}
	a, _ := SegmentContentID(base, []byte("bytes"))
	b, _ := SegmentContentID(base, []byte("other"))
	c, _ := SegmentContentID(base, []byte("bytes"))
	if a == b || a != c || !strings.HasPrefix(a, "segcov-") {
		t.Errorf("content ids %s %s %s", a, b, c)
	}
	if _, err := SegmentContentID(IndexSpec{Kind: KindTimestamp, Unit: UnitHours}, nil); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("invalid spec: %v", err)
	}
}
