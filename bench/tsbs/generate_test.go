package tsbs

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func TestValidate(t *testing.T) {
	if err := DefaultParams().Validate(); err != nil {
		t.Fatalf("DefaultParams: %v", err)
	}
	if got, want := DefaultParams().Rows(), int64(34_560_000); got != want {
		t.Errorf("DefaultParams().Rows() = %d, want %d", got, want)
	}
	p := small()
	p.Step, p.BatchRows = 0, 0
	if err := p.Validate(); err != nil {
		t.Fatalf("zero Step and BatchRows should take their defaults: %v", err)
	}
	if p.Steps() != 1080 || p.Hours() != 3 {
		t.Errorf("Steps %d Hours %d, want 1080 3", p.Steps(), p.Hours())
	}
	bad := map[string]func(*Params){
		"no hosts":             func(p *Params) { p.Hosts = 0 },
		"too many hosts":       func(p *Params) { p.Hosts = MaxHosts + 1 },
		"no start":             func(p *Params) { p.Start = time.Time{} },
		"start not µs":         func(p *Params) { p.Start = p.Start.Add(1) },
		"negative step":        func(p *Params) { p.Step = -time.Second },
		"step below 1ms":       func(p *Params) { p.Step = time.Microsecond * 500 },
		"step not µs":          func(p *Params) { p.Step = 1843200 * time.Nanosecond },
		"step not dividing 1h": func(p *Params) { p.Step = 7 * time.Second },
		"zero duration":        func(p *Params) { p.Duration = 0 },
		"ragged duration":      func(p *Params) { p.Duration = time.Hour + time.Second },
		"drop < 0":             func(p *Params) { p.DropFraction = -0.1 },
		"drop > 1":             func(p *Params) { p.DropFraction = 1.1 },
		"drop NaN":             func(p *Params) { p.DropFraction = math.NaN() },
		"late NaN":             func(p *Params) { p.LateFraction = math.NaN() },
		"late > 1":             func(p *Params) { p.LateFraction = 2 },
		"negative batch":       func(p *Params) { p.BatchRows = -1 },
		"huge batch":           func(p *Params) { p.BatchRows = MaxBatchRows + 1 },
	}
	for name, mod := range bad {
		p := small()
		mod(&p)
		if p.Validate() == nil {
			t.Errorf("%s: Validate accepted %+v", name, p)
		}
		if p.Deliveries() != nil || p.Rows() != 0 || p.Queries("cpu") != nil {
			t.Errorf("%s: Deliveries, Rows or Queries answered for invalid params", name)
		}
		if err := p.Batches(memory.DefaultAllocator, Delivery{Hosts: []HostRange{{0, 1}}}, nil); err == nil {
			t.Errorf("%s: Batches accepted invalid params", name)
		}
	}
}

func TestBatchesRejectsImpossibleDeliveries(t *testing.T) {
	p := small()
	mem := newMem(t)
	ok := Delivery{Hour: 1, FirstStep: 360, EndStep: 720, Hosts: []HostRange{{0, 7}}}
	bad := map[string]func(*Delivery){
		"hour out of range":    func(d *Delivery) { d.Hour = 3 },
		"steps beyond hour":    func(d *Delivery) { d.EndStep = 721 },
		"steps before hour":    func(d *Delivery) { d.FirstStep = 359 },
		"steps reversed":       func(d *Delivery) { d.FirstStep, d.EndStep = 400, 380 },
		"host beyond":          func(d *Delivery) { d.Hosts = []HostRange{{0, 8}} },
		"hosts overlapping":    func(d *Delivery) { d.Hosts = []HostRange{{0, 3}, {2, 5}} },
		"hosts descending":     func(d *Delivery) { d.Hosts = []HostRange{{4, 5}, {0, 3}} },
		"empty range":          func(d *Delivery) { d.Hosts = []HostRange{{2, 2}} },
		"negative range start": func(d *Delivery) { d.Hosts = []HostRange{{-1, 2}} },
	}
	for name, mod := range bad {
		d := ok
		mod(&d)
		if err := p.Batches(mem, d, func(arrow.RecordBatch) error { return nil }); err == nil {
			t.Errorf("%s: Batches accepted %+v", name, d)
		}
	}
	if err := p.Batches(nil, ok, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Error("Batches accepted a nil allocator")
	}
	stop := errors.New("stop")
	calls := 0
	err := p.Batches(mem, ok, func(arrow.RecordBatch) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("fn's error: got %v after %d calls, want stop after 1", err, calls)
	}
}

func TestSchema(t *testing.T) {
	s := Schema()
	if s.NumFields() != 21 {
		t.Fatalf("%d columns, want 21", s.NumFields())
	}
	want := append(append([]string{"time"}, TagColumns()...), FieldColumns()...)
	for i, f := range s.Fields() {
		if f.Name != want[i] {
			t.Errorf("column %d is %s, want %s", i, f.Name, want[i])
		}
		if f.Nullable {
			t.Errorf("column %s is nullable", f.Name)
		}
		var typ arrow.DataType
		switch {
		case i == 0:
			typ = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
		case i <= numTags:
			typ = arrow.BinaryTypes.String
		default:
			typ = arrow.PrimitiveTypes.Int64
		}
		if !arrow.TypeEqual(f.Type, typ) {
			t.Errorf("column %s is %s, want %s", f.Name, f.Type, typ)
		}
	}
}

func TestDeterministic(t *testing.T) {
	mem := newMem(t)
	p := small()
	p.DropFraction, p.LateFraction = 0.05, 0.5
	a, b := ipcBytes(t, mem, p), ipcBytes(t, mem, p)
	if !bytes.Equal(a, b) {
		t.Fatal("the same params gave different batches")
	}
	// Consumed in another order: the last delivery first.
	ds := p.Deliveries()
	last := ds[len(ds)-1]
	first := rowsOf(t, collectAndRelease(t, mem, p, last))
	allRows(t, mem, p)
	again := rowsOf(t, collectAndRelease(t, mem, p, last))
	if !slices.Equal(first, again) {
		t.Error("a delivery differs depending on what was generated before it")
	}
	q := p
	q.Seed++
	if bytes.Equal(a, ipcBytes(t, mem, q)) {
		t.Error("a different seed gave the same batches")
	}
	if slices.Equal(p.HostTags(0), q.HostTags(0)) && slices.Equal(p.HostTags(1), q.HostTags(1)) && slices.Equal(p.HostTags(2), q.HostTags(2)) {
		t.Error("a different seed gave the same tags")
	}
}

// collectAndRelease returns d's batches, which are released when the
// test ends (their rows can be read until then).
func collectAndRelease(t testing.TB, mem memory.Allocator, p Params, d Delivery) []arrow.RecordBatch {
	recs := collect(t, mem, p, d)
	t.Cleanup(func() { releaseAll(recs) })
	return recs
}

// TestValuesMatchReference checks every value against refValue, which
// computes it from the definition with no state, and the tags and
// timestamps against HostTags and StepTime.
func TestValuesMatchReference(t *testing.T) {
	mem := newMem(t)
	minutely := small()
	minutely.DropFraction, minutely.LateFraction = 0.1, 0.67
	minutely.Step = time.Minute // several hours, cheaply
	minutely.Duration = 5*time.Hour + 30*time.Minute
	tsbs := small()
	tsbs.Hosts, tsbs.Duration, tsbs.LateFraction = 3, 2*time.Hour, 0.5
	for _, p := range []Params{minutely, tsbs} {
		rows := allRows(t, mem, p)
		if int64(len(rows)) != p.Rows() || len(rows) == 0 {
			t.Fatalf("%d rows, want %d", len(rows), p.Rows())
		}
		for _, r := range rows {
			k := keyOf(t, p, r)
			if got, want := time.UnixMicro(r.ts).UTC(), p.StepTime(k.step); !got.Equal(want) {
				t.Fatalf("%v: time %v, want %v", k, got, want)
			}
			if !slices.Equal(r.tags[:], p.HostTags(k.host)) {
				t.Fatalf("%v: tags %v, want %v", k, r.tags, p.HostTags(k.host))
			}
			for f, v := range r.fields {
				if want := refValue(p, k.host, f, k.step); v != want {
					t.Fatalf("step %v: %v: %s = %d, want %d", p.Step, k, fieldColumns[f], v, want)
				}
			}
		}
	}
}

// TestGauss checks the walks' step distribution: mean 0, standard
// deviation 1.0, bounded, symmetric.
func TestGauss(t *testing.T) {
	r := newStream(1)
	const n = 1 << 20
	var sum, sq float64
	lo, hi := int64(0), int64(0)
	for range n {
		g := gauss(r.next())
		sum += float64(g)
		sq += float64(g) * float64(g)
		lo, hi = min(lo, g), max(hi, g)
	}
	mean, sd := sum/n/one, math.Sqrt(sq/n-(sum/n)*(sum/n))/one
	if math.Abs(mean) > 0.005 || math.Abs(sd-1) > 0.01 {
		t.Errorf("mean %.4f sd %.4f, want 0 and 1", mean, sd)
	}
	if float64(lo)/one < -3.47 || float64(hi)/one > 3.47 || float64(lo)/one > -3 || float64(hi)/one < 3 {
		t.Errorf("range [%.3f, %.3f], want about ±3.46", float64(lo)/one, float64(hi)/one)
	}
	if g := gauss(0); g != -ihMean {
		t.Errorf("gauss(0) = %d", g)
	}
}

// TestPartsEqualWhole checks that an hour generated alone, or in pieces,
// or under params that only differ in span, drops of other rows and
// lateness, equals the same hour within the whole.
func TestPartsEqualWhole(t *testing.T) {
	mem := newMem(t)
	p := small()
	p.DropFraction = 0.1
	whole := map[key]row{}
	for _, r := range allRows(t, mem, p) {
		whole[keyOf(t, p, r)] = r
	}
	check := func(what string, q Params, d Delivery) {
		t.Helper()
		n := 0
		for _, r := range rowsOf(t, collectAndRelease(t, mem, q, d)) {
			k := keyOf(t, q, r)
			if w, ok := whole[k]; !ok || w != r {
				t.Fatalf("%s: row %v differs from the whole's (%v)", what, k, ok)
			}
			n++
		}
		want := 0
		for h := range p.Hosts {
			for s := d.FirstStep; s < d.EndStep; s++ {
				if d.HasHost(h) && !p.Missing(h, s) {
					want++
				}
			}
		}
		if n != want {
			t.Fatalf("%s: %d rows, want %d", what, n, want)
		}
	}
	hour2 := Delivery{Hour: 2, FirstStep: 720, EndStep: 1080, Hosts: []HostRange{{0, 7}}}
	check("hour 2 alone", p, hour2)
	longer := p
	longer.Duration, longer.LateFraction, longer.BatchRows = 10*time.Hour, 0.5, 333
	check("hour 2 of a longer data set", longer, hour2)
	for _, steps := range [][2]int{{720, 721}, {721, 900}, {900, 1080}} {
		for _, hosts := range [][]HostRange{{{0, 1}}, {{1, 4}, {6, 7}}, {{4, 6}}} {
			d := Delivery{Hour: 2, FirstStep: steps[0], EndStep: steps[1], Hosts: hosts}
			check("piece of hour 2", p, d)
		}
	}
	// An hour that ends the data early: the rows it has are the same.
	shorter := p
	shorter.Duration = 2*time.Hour + 10*time.Minute
	check("partial last hour", shorter, Delivery{Hour: 2, FirstStep: 720, EndStep: 780, Hosts: []HostRange{{0, 7}}})
}

func TestValueRanges(t *testing.T) {
	mem := newMem(t)
	p := small()
	p.Hosts = 40
	rows := allRows(t, mem, p)
	dcs := map[string]string{}
	for _, r := range regions {
		for _, dc := range r.dcs {
			dcs[dc] = r.name
		}
	}
	in := func(v string, set []string) bool { return slices.Contains(set, v) }
	numIn := func(v string, n int) bool {
		i, err := strconv.Atoi(v)
		return err == nil && i >= 0 && i < n && strconv.Itoa(i) == v
	}
	series := map[[2]int][]int64{} // (host, field) → values by step
	seen := make([]map[string]bool, numTags)
	for c := range seen {
		seen[c] = map[string]bool{}
	}
	for _, r := range rows {
		k := keyOf(t, p, r)
		tg := r.tags
		if tg[0] != "host_"+strconv.Itoa(k.host) || dcs[tg[2]] != tg[1] || !numIn(tg[3], 100) || !in(tg[4], oses) ||
			!in(tg[5], arches) || !in(tg[6], teams) || !numIn(tg[7], 20) || !numIn(tg[8], 2) || !in(tg[9], environments) {
			t.Fatalf("host %d: tags %v outside TSBS's value sets", k.host, tg)
		}
		for c, v := range tg {
			seen[c][v] = true
		}
		for f, v := range r.fields {
			if v < 0 || v > 100 {
				t.Fatalf("%v: %s = %d, outside [0, 100]", k, fieldColumns[f], v)
			}
			series[[2]int{k.host, f}] = append(series[[2]int{k.host, f}], v)
		}
	}
	// 40 hosts draw more than one value of each tag.
	for c, vs := range seen {
		if len(vs) < 2 {
			t.Errorf("tag %s takes one value only: %v", tagColumns[c], vs)
		}
	}
	// The walks move by N(0, 1) steps with no jump at hour boundaries,
	// and wander.
	var sumAbs, n float64
	for hf, vs := range series {
		if len(vs) != p.Steps() {
			t.Fatalf("%v: %d values, want %d", hf, len(vs), p.Steps())
		}
		for i := 1; i < len(vs); i++ {
			d := vs[i] - vs[i-1]
			if d < -5 || d > 5 {
				t.Fatalf("host %d %s jumps by %d at step %d", hf[0], fieldColumns[hf[1]], d, i)
			}
			sumAbs += math.Abs(float64(d))
			n++
		}
		if slices.Min(vs) == slices.Max(vs) && vs[0] != 0 && vs[0] != 100 {
			t.Errorf("host %d %s never moves", hf[0], fieldColumns[hf[1]])
		}
	}
	// E|Δ| of a rounded N(0, 1) walk is about 0.8.
	if m := sumAbs / n; m < 0.5 || m > 1.1 {
		t.Errorf("mean |step| %.3f, want about 0.8", m)
	}
}

func TestBatchSizes(t *testing.T) {
	mem := newMem(t)
	p := small()
	p.DropFraction, p.LateFraction = 0.2, 0.34
	for _, d := range p.Deliveries() {
		recs := collectAndRelease(t, mem, p, d)
		for i, r := range recs {
			if n := int(r.NumRows()); n > p.BatchRows || (i < len(recs)-1 && n != p.BatchRows) || n == 0 {
				t.Errorf("%s: batch %d of %d has %d rows (BatchRows %d)", d.Name(), i, len(recs), n, p.BatchRows)
			}
		}
		// time-major, hosts ascending within a step
		rows := rowsOf(t, recs)
		for i := 1; i < len(rows); i++ {
			a, b := keyOf(t, p, rows[i-1]), keyOf(t, p, rows[i])
			if b.step < a.step || (b.step == a.step && b.host <= a.host) {
				t.Fatalf("%s: row %v after %v", d.Name(), b, a)
			}
		}
	}
}

func TestDrops(t *testing.T) {
	mem := newMem(t)
	p := small()
	p.Hosts, p.DropFraction = 50, 0.1
	rows := allRows(t, mem, p)
	got := map[key]bool{}
	for _, r := range rows {
		got[keyOf(t, p, r)] = true
	}
	total := p.Hosts * p.Steps()
	dropped := 0
	for h := range p.Hosts {
		for s := range p.Steps() {
			m := p.Missing(h, s)
			if m == got[key{h, s}] {
				t.Fatalf("host %d step %d: Missing %v but in the data %v", h, s, m, got[key{h, s}])
			}
			if m {
				dropped++
			}
		}
	}
	// Binomial(54,000, 0.1): σ ≈ 70; allow 5σ.
	if want := float64(total) * p.DropFraction; math.Abs(float64(dropped)-want) > 5*math.Sqrt(want*(1-p.DropFraction)) {
		t.Errorf("%d of %d rows dropped, want about %.0f", dropped, total, want)
	}
	if p.Rows() != int64(len(rows)) || len(rows) != total-dropped {
		t.Errorf("Rows() %d, generated %d, expected %d", p.Rows(), len(rows), total-dropped)
	}
	for _, k := range []key{{-1, 0}, {p.Hosts, 0}, {0, -1}, {0, p.Steps()}} {
		if !p.Missing(k.host, k.step) {
			t.Errorf("Missing(%d, %d) is false outside the data", k.host, k.step)
		}
	}
	none, all := p, p
	none.DropFraction, all.DropFraction = 0, 1
	if none.Missing(3, 5) || none.Rows() != int64(total) {
		t.Error("DropFraction 0 drops rows")
	}
	if !all.Missing(3, 5) || all.Rows() != 0 || len(allRows(t, mem, all)) != 0 {
		t.Error("DropFraction 1 keeps rows")
	}
}

func TestLateDeliveries(t *testing.T) {
	mem := newMem(t)
	for _, tc := range []struct {
		hosts int
		hours int
		late  float64
	}{{7, 10, 0.5}, {7, 10, 0}, {7, 10, 1}, {1, 4, 1}, {2, 3, 0.34}, {30, 24, 0.25}} {
		p := small()
		p.Hosts, p.Duration, p.LateFraction, p.DropFraction = tc.hosts, time.Duration(tc.hours)*time.Hour, tc.late, 0.02
		p.Step = time.Minute
		ds := p.Deliveries()
		name := func(d Delivery) string { return d.Name() + " of " + strconv.Itoa(tc.hosts) + " hosts" }
		nLate := 0
		onTimeSeq := map[int]int{}
		for i, d := range ds {
			if d.Seq != i {
				t.Fatalf("%s: Seq %d at %d", name(d), d.Seq, i)
			}
			if i > 0 && FileName(ds[i-1], len(ds)) >= FileName(d, len(ds)) {
				t.Errorf("file names %s, %s do not sort in delivery order", FileName(ds[i-1], len(ds)), FileName(d, len(ds)))
			}
			if !d.Start.Equal(p.StepTime(d.FirstStep)) || !d.End.Equal(p.StepTime(d.EndStep)) || d.NumHosts() == 0 {
				t.Errorf("%s: inconsistent %+v", name(d), d)
			}
			if d.Late {
				nLate++
				last := d.Hour == p.Hours()-1
				if (last && d.After != d.Hour) || (!last && (d.After <= d.Hour || d.After > d.Hour+3 || d.After >= p.Hours())) {
					t.Errorf("%s: delivered after hour %d", name(d), d.After)
				}
				if d.NumHosts() > (p.Hosts+1)/2 || len(d.Hosts) != 1 {
					t.Errorf("%s: late part of %d hosts %v", name(d), d.NumHosts(), d.Hosts)
				}
				// With one host, a late part is all its hour: no on-time delivery.
				for _, h := range []int{d.Hour, d.After} {
					if s, ok := onTimeSeq[h]; (p.Hosts > 1 && !ok) || (ok && s > d.Seq) {
						t.Errorf("%s: before hour %d's on-time delivery", name(d), h)
					}
				}
			} else {
				onTimeSeq[d.Hour] = d.Seq
				if d.After != d.Hour {
					t.Errorf("%s: on time but After %d", name(d), d.After)
				}
			}
		}
		if want := int(math.Round(tc.late * float64(tc.hours))); nLate != want {
			t.Errorf("%d hosts × %d h, late %v: %d late parts, want %d", tc.hosts, tc.hours, tc.late, nLate, want)
		}
		// Every row that is not Missing arrives exactly once.
		count := map[key]int{}
		rows := allRows(t, mem, p)
		for _, r := range rows {
			count[keyOf(t, p, r)]++
		}
		for h := range p.Hosts {
			for s := range p.Steps() {
				want := 1
				if p.Missing(h, s) {
					want = 0
				}
				if count[key{h, s}] != want {
					t.Fatalf("%d hosts, late %v: host %d step %d arrives %d times, want %d", tc.hosts, tc.late, h, s, count[key{h, s}], want)
				}
			}
		}
		if p.Rows() != int64(len(rows)) {
			t.Errorf("Rows() %d, generated %d", p.Rows(), len(rows))
		}
	}
}

func TestParamsJSON(t *testing.T) {
	p := small()
	p.Start = time.Date(2020, 2, 3, 4, 5, 6, 789000, time.FixedZone("x", 3600))
	p.DropFraction, p.LateFraction, p.Seed = 0.125, 0.5, math.MaxUint64
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q Params
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	want := p.withDefaults()
	if !q.Start.Equal(want.Start) || q.Start.Location() != time.UTC {
		t.Errorf("start %v, want %v in UTC", q.Start, want.Start)
	}
	q.Start = want.Start
	if q != want {
		t.Errorf("round trip %+v, want %+v", q, want)
	}
	if err := json.Unmarshal([]byte(`{"start":"2020-01-01T00:00:00Z","start_us":1}`), &q); err == nil {
		t.Error("disagreeing start and start_us accepted")
	}
}

// BenchmarkGenerate generates one hour of 4,000 hosts (TSBS's scale
// 4,000: 1.44 M rows) and reports rows/s.
func BenchmarkGenerate(b *testing.B) {
	p := DefaultParams()
	p.Duration = time.Hour
	d := p.Deliveries()[0]
	mem := memory.NewGoAllocator()
	rows := int64(0)
	b.ResetTimer()
	for b.Loop() {
		err := p.Batches(mem, d, func(rec arrow.RecordBatch) error { rows += rec.NumRows(); return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkGenerateDrops is BenchmarkGenerate with 1% of rows dropped.
func BenchmarkGenerateDrops(b *testing.B) {
	p := DefaultParams()
	p.Duration, p.DropFraction = time.Hour, 0.01
	d := p.Deliveries()[0]
	mem := memory.NewGoAllocator()
	rows := int64(0)
	for b.Loop() {
		err := p.Batches(mem, d, func(rec arrow.RecordBatch) error { rows += rec.NumRows(); return nil })
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}
