package tsbs

import (
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// queryShapes are the SQL texts of flightsql's tsbsQueries with the
// table as %T, a host list as %H and an RFC 3339 literal as %L.
var queryShapes = map[string]string{
	"single-groupby-1-1-1":  "SELECT date_trunc('minute', time) AS minute, max(usage_user) AS max_usage_user FROM %T WHERE hostname IN (%H) AND time >= %L AND time < %L GROUP BY minute ORDER BY minute",
	"single-groupby-5-8-1":  "SELECT date_trunc('minute', time) AS minute, max(usage_user) AS max_usage_user, max(usage_system) AS max_usage_system, max(usage_idle) AS max_usage_idle, max(usage_nice) AS max_usage_nice, max(usage_iowait) AS max_usage_iowait FROM %T WHERE hostname IN (%H) AND time >= %L AND time < %L GROUP BY minute ORDER BY minute",
	"cpu-max-all-8":         "SELECT date_trunc('hour', time) AS hour, max(usage_user) AS max_usage_user, max(usage_system) AS max_usage_system, max(usage_idle) AS max_usage_idle, max(usage_nice) AS max_usage_nice, max(usage_iowait) AS max_usage_iowait, max(usage_irq) AS max_usage_irq, max(usage_softirq) AS max_usage_softirq, max(usage_steal) AS max_usage_steal, max(usage_guest) AS max_usage_guest, max(usage_guest_nice) AS max_usage_guest_nice FROM %T WHERE hostname IN (%H) AND time >= %L AND time < %L GROUP BY hour ORDER BY hour",
	"double-groupby-1":      "SELECT date_trunc('hour', time) AS hour, hostname, avg(usage_user) AS mean_usage_user FROM %T WHERE time >= %L AND time < %L GROUP BY hour, hostname ORDER BY hour, hostname",
	"high-cpu-1":            "SELECT * FROM %T WHERE usage_user > 90.0 AND time >= %L AND time < %L AND hostname IN (%H)",
	"lastpoint":             "SELECT DISTINCT ON (hostname) * FROM %T ORDER BY hostname, time DESC",
	"groupby-orderby-limit": "SELECT date_trunc('minute', time) AS minute, max(usage_user) AS max_usage_user FROM %T WHERE time < %L GROUP BY minute ORDER BY minute DESC LIMIT 5",
}

// queryWindows are each query's window length and host count.
var queryWindows = map[string]struct {
	d     time.Duration
	hosts int
}{
	"single-groupby-1-1-1":  {time.Hour, 1},
	"single-groupby-5-8-1":  {time.Hour, 8},
	"cpu-max-all-8":         {8 * time.Hour, 8},
	"double-groupby-1":      {12 * time.Hour, 0},
	"high-cpu-1":            {12 * time.Hour, 1},
	"lastpoint":             {0, 0},
	"groupby-orderby-limit": {time.Hour, 0}, // only its end is drawn
}

var (
	hostListRE = regexp.MustCompile(`^'host_\d+'(, 'host_\d+')*$`)
	literalRE  = regexp.MustCompile(`^'(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z)'$`)
)

// parseQuery matches sql against its shape and returns its table, hosts
// and time literals.
func parseQuery(t *testing.T, q Query) (table string, hosts []int, times []time.Time) {
	t.Helper()
	shape, ok := queryShapes[q.Name]
	if !ok {
		t.Fatalf("unknown query %q", q.Name)
	}
	// Turn the shape into a regexp capturing the placeholders.
	var re strings.Builder
	re.WriteString("^")
	var kinds []string
	for rest := shape; rest != ""; {
		i := strings.Index(rest, "%")
		if i < 0 {
			re.WriteString(regexp.QuoteMeta(rest))
			break
		}
		re.WriteString(regexp.QuoteMeta(rest[:i]))
		kinds = append(kinds, rest[i:i+2])
		switch rest[i : i+2] {
		case "%T":
			re.WriteString(`(\w+)`)
		case "%H":
			re.WriteString(`([^)]*)`)
		case "%L":
			re.WriteString(`('[^']*')`)
		}
		rest = rest[i+2:]
	}
	re.WriteString("$")
	m := regexp.MustCompile(re.String()).FindStringSubmatch(q.SQL)
	if m == nil {
		t.Fatalf("%s: %s\ndoes not have the shape\n%s", q.Name, q.SQL, shape)
	}
	for i, k := range kinds {
		v := m[1+i]
		switch k {
		case "%T":
			table = v
		case "%H":
			if !hostListRE.MatchString(v) {
				t.Fatalf("%s: host list %q", q.Name, v)
			}
			for _, h := range strings.Split(v, ", ") {
				n, _ := strconv.Atoi(strings.Trim(h, "'host_"))
				hosts = append(hosts, n)
			}
		case "%L":
			lm := literalRE.FindStringSubmatch(v)
			if lm == nil {
				t.Fatalf("%s: literal %s is not RFC 3339 in UTC", q.Name, v)
			}
			ts, err := time.Parse(time.RFC3339Nano, lm[1])
			if err != nil {
				t.Fatal(err)
			}
			times = append(times, ts)
		}
	}
	return table, hosts, times
}

func TestQueries(t *testing.T) {
	for _, p := range []Params{
		DefaultParams(),
		{Hosts: 5, Start: TSBSStart, Duration: 3 * time.Hour, Seed: 7},                                // shorter than the 8 and 12 h windows, fewer hosts than 8
		{Hosts: 50, Start: TSBSStart, Duration: 30 * time.Minute, Seed: 8},                            // shorter than an hour
		{Hosts: 50, Start: TSBSStart.Add(1500 * time.Millisecond), Duration: 48 * time.Hour, Seed: 9}, // a start off the second
	} {
		insts := p.QueryInstances("cpu_table", 20)
		if !reflect.DeepEqual(insts, p.QueryInstances("cpu_table", 20)) {
			t.Fatal("QueryInstances is not deterministic")
		}
		if !reflect.DeepEqual(insts[0], p.Queries("cpu_table")) {
			t.Error("Queries is not instance 0 of QueryInstances")
		}
		distinct := map[string]map[string]bool{}
		for _, qs := range insts {
			var names []string
			for _, q := range qs {
				names = append(names, q.Name)
				table, hosts, times := parseQuery(t, q)
				if table != "cpu_table" {
					t.Errorf("%s: table %q", q.Name, table)
				}
				w := queryWindows[q.Name]
				if len(hosts) != min(w.hosts, p.Hosts) {
					t.Errorf("%s: %d hosts, want %d", q.Name, len(hosts), min(w.hosts, p.Hosts))
				}
				if len(slices.Compact(slices.Sorted(slices.Values(hosts)))) != len(hosts) {
					t.Errorf("%s: hosts %v repeat", q.Name, hosts)
				}
				for _, h := range hosts {
					if h < 0 || h >= p.Hosts {
						t.Errorf("%s: host_%d does not exist", q.Name, h)
					}
				}
				for _, ts := range times {
					if ts.Before(p.Start) || ts.After(p.End()) {
						t.Errorf("%s: %v outside the data [%v, %v]", q.Name, ts, p.Start, p.End())
					}
					if ts.Sub(p.Start)%time.Second != 0 {
						t.Errorf("%s: %v is not a whole second after the start", q.Name, ts)
					}
				}
				if len(times) == 2 {
					want := min(w.d, p.Duration)
					if got := times[1].Sub(times[0]); got != want {
						t.Errorf("%s: window %v, want %v", q.Name, got, want)
					}
				}
				if q.Name == "groupby-orderby-limit" && times[0].Before(p.Start.Add(min(w.d, p.Duration))) {
					t.Errorf("%s: end %v before start + window", q.Name, times[0])
				}
				if distinct[q.Name] == nil {
					distinct[q.Name] = map[string]bool{}
				}
				distinct[q.Name][q.SQL] = true
			}
			if !slices.Equal(names, QueryNames()) {
				t.Errorf("queries %v, want %v", names, QueryNames())
			}
		}
		// 20 instances vary wherever there is something to draw.
		for name, sqls := range distinct {
			w := queryWindows[name]
			// (all hosts, when fewer than asked for, come in a random order)
			varies := (w.d != 0 && w.d < p.Duration) || (w.hosts > 0 && p.Hosts > 1)
			if varies && len(sqls) < 2 {
				t.Errorf("%d hosts over %v: %s is the same in 20 instances", p.Hosts, p.Duration, name)
			}
			if !varies && len(sqls) != 1 {
				t.Errorf("%d hosts over %v: %s varies with nothing to draw", p.Hosts, p.Duration, name)
			}
		}
		q := p
		q.Seed++
		if reflect.DeepEqual(q.Queries("cpu_table"), p.Queries("cpu_table")) {
			t.Error("a different seed gave the same queries")
		}
	}
	if DefaultParams().QueryInstances("cpu", 0) != nil {
		t.Error("QueryInstances(0) is not nil")
	}
}

// TestQueriesIgnoreDeliveryParams: the queries depend on the data's
// span, hosts and seed, not on how it is delivered.
func TestQueriesIgnoreDeliveryParams(t *testing.T) {
	p := DefaultParams()
	q := p
	q.DropFraction, q.LateFraction, q.BatchRows = 0.3, 0.5, 100
	if !reflect.DeepEqual(p.Queries("cpu"), q.Queries("cpu")) {
		t.Error("drops, lateness or batch size changed the queries")
	}
}
