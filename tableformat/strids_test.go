package tableformat

import (
	"fmt"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"math/rand/v2"
	"strings"
	"testing"
)

// strIDs agrees with a Go map on strings of every length class (empty,
// 1-3, 4-7, 8-16 and longer bytes), including strings that differ only in
// the middle, which the slot words of a long string do not see, and
// strings that are prefixes of one another.
func TestStrIDsAgreesWithMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []string
	for n := range 41 {
		for range 50 {
			b := make([]byte, n)
			for i := range b {
				b[i] = "ab\x00z"[rng.IntN(4)]
			}
			all = append(all, string(b))
		}
	}
	for i := range 300 {
		all = append(all, fmt.Sprintf("%s%03d%s", strings.Repeat("x", 10), i, strings.Repeat("y", 10)), fmt.Sprintf("host_%d", i))
	}
	tb := newStrIDs()
	want := map[string]int32{}
	for _, s := range all {
		id, ok := tb.find(s)
		if wid, wok := want[s]; ok != wok || (ok && id != wid) {
			t.Fatalf("find(%q) = %d, %v; want %d, %v", s, id, ok, wid, wok)
		}
		if ok {
			continue
		}
		id, ok = tb.add(s)
		if !ok || id != int32(len(want)) {
			t.Fatalf("add(%q) = %d, %v; want %d, true", s, id, ok, len(want))
		}
		want[s] = id
	}
	if tb.Len() != len(want) {
		t.Fatalf("Len %d, want %d", tb.Len(), len(want))
	}
	for s, wid := range want {
		if id, ok := tb.find(s); !ok || id != wid || tb.key(id) != s {
			t.Fatalf("find(%q) = %d, %v after growing; want %d", s, id, ok, wid)
		}
	}
	for _, s := range []string{"never", strings.Repeat("x", 10) + "999" + strings.Repeat("y", 10), "ab\x00"} {
		if _, ok := want[s]; ok {
			continue
		}
		if _, ok := tb.find(s); ok {
			t.Fatalf("find(%q) found a string never added", s)
		}
	}
}

// A probe that runs past maxProbe slots breaks the table: add refuses,
// and what was added before is still found.
func TestStrIDsBreaksOnLongProbe(t *testing.T) {
	defer func(v int) { maxProbe = v }(maxProbe)
	maxProbe = 1
	tb := newStrIDs()
	added := 0
	for i := range 1000 {
		s := fmt.Sprintf("v%d", i)
		if _, ok := tb.add(s); !ok {
			break
		}
		added++
	}
	if !tb.broken || added == 1000 {
		t.Fatalf("with probes of one slot, %d of 1,000 adds succeeded and broken is %v", added, tb.broken)
	}
	if _, ok := tb.add("another"); ok {
		t.Fatal("a broken table accepted a string")
	}
	for i := range added {
		if id, ok := tb.find(fmt.Sprintf("v%d", i)); !ok || id != int32(i) {
			t.Fatalf("v%d: id %d, %v after the table broke", i, id, ok)
		}
	}
}

func BenchmarkStrIDsFind(b *testing.B) {
	var keys []string
	for i := range 400 {
		keys = append(keys, fmt.Sprintf("host_%d", i))
	}
	rows := make([]string, 1<<16)
	for i := range rows {
		rows[i] = keys[(i*7)%len(keys)]
	}
	b.Run("strIDs", func(b *testing.B) {
		tb := newStrIDs()
		for _, k := range keys {
			tb.add(k)
		}
		var sum int32
		for b.Loop() {
			for _, s := range rows {
				id, _ := tb.find(s)
				sum += id
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/lookup")
	})
	b.Run("map", func(b *testing.B) {
		m := map[string]int32{}
		for i, k := range keys {
			m[k] = int32(i)
		}
		var sum int32
		for b.Loop() {
			for _, s := range rows {
				sum += m[s]
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/lookup")
	})
}

// When the front end's table breaks (probes of one slot: most strings
// collide), the column goes the dense way from there and the file is still
// the one the dense path writes.
func TestStringDictBrokenTableSameFile(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	batches := stringShapes(mem, []int{3000, 70000, 20000})
	defer releaseBatches(batches)
	opts := DefaultAppendOptions()
	opts.MaxRowsPerRowGroup = 50000
	dense := writeSegmentBytes(t, batches, false, opts)
	defer func(v int) { maxProbe = v }(maxProbe)
	maxProbe = 1
	fast := writeSegmentBytes(t, batches, true, opts)
	sameSegment(t, dense, fast)
	checkSegmentRoundTrip(t, fast, batches)
}
