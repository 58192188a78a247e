package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/flightserver"
)

// The demo table: TSBS's cpu-only data set (a hostname entity, nine more
// tags, ten int64 usage fields, one row per host every 10 s) for
// demoHosts hosts over one day, appended hour by hour as a collector
// would, with holes a user can find: see demoHoles.
const (
	demoTable = "cpu"
	demoHosts = 200
	demoStep  = 10 * time.Second
	demoSeed  = 20160101
)

// demoStart is the first timestamp of the demo day (TSBS's default start).
var demoStart = time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC)

var demoFields = []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
	"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}

var demoTags = []string{"region", "datacenter", "rack", "os", "arch", "team", "service", "service_version", "service_environment"}

var demoRegions = []string{"us-east-1", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1", "ap-southeast-2", "ap-northeast-1", "sa-east-1"}

// demoHole is a stretch of time some hosts sent nothing.
type demoHole struct {
	what      string
	from, to  time.Duration // offsets into the day, [from, to)
	firstHost int
	hosts     int // how many hosts from firstHost
	everyNth  int // >0: only every n-th sample of the stretch is lost (a flaky agent)
}

// demoHoles are the deliberate gaps of the demo table.
var demoHoles = []demoHole{
	{what: "ingest outage, every host", from: 13 * time.Hour, to: 13*time.Hour + 20*time.Minute, firstHost: 0, hosts: demoHosts},
	{what: "host_7 rebooted", from: 4 * time.Hour, to: 6*time.Hour + 30*time.Minute, firstHost: 7, hosts: 1},
	{what: "host_42 joined late", from: 0, to: 9 * time.Hour, firstHost: 42, hosts: 1},
	{what: "rack switch failure, host_100 … host_109", from: 18 * time.Hour, to: 19 * time.Hour, firstHost: 100, hosts: 10},
	{what: "flaky agent, host_150 (one sample in 3 lost for 10 minutes)", from: 10 * time.Hour, to: 10*time.Hour + 10*time.Minute, firstHost: 150, hosts: 1, everyNth: 3},
	{what: "host_199 decommissioned", from: 20 * time.Hour, to: 24 * time.Hour, firstHost: 199, hosts: 1},
}

// demoMissing reports whether host h sent nothing at offset off (step
// number n of the day).
func demoMissing(h int, off time.Duration, n int) bool {
	for _, g := range demoHoles {
		if h < g.firstHost || h >= g.firstHost+g.hosts || off < g.from || off >= g.to {
			continue
		}
		if g.everyNth == 0 || (n+h)%g.everyNth == 0 {
			return true
		}
	}
	return false
}

func demoSchema() *arrow.Schema {
	fields := []arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "hostname", Type: arrow.BinaryTypes.String},
	}
	for _, t := range demoTags {
		fields = append(fields, arrow.Field{Name: t, Type: arrow.BinaryTypes.String})
	}
	for _, f := range demoFields {
		fields = append(fields, arrow.Field{Name: f, Type: arrow.PrimitiveTypes.Int64})
	}
	return arrow.NewSchema(fields, nil)
}

// demoHostTags are a host's tag values, in demoTags order.
func demoHostTags(h int, rng *rand.Rand) []string {
	region := demoRegions[rng.IntN(len(demoRegions))]
	return []string{
		region,
		region + string(rune('a'+rng.IntN(3))),
		strconv.Itoa(rng.IntN(100)),
		[]string{"Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"}[rng.IntN(3)],
		[]string{"x64", "x86"}[rng.IntN(2)],
		[]string{"SF", "NYC", "LON", "CHI"}[rng.IntN(4)],
		strconv.Itoa(rng.IntN(20)),
		strconv.Itoa(rng.IntN(2)),
		[]string{"production", "staging", "test"}[rng.IntN(3)],
	}
}

// writeDemo creates the demo table under svc's root and appends its day
// of data, one append per hour. It returns the number of rows written.
func writeDemo(ctx context.Context, svc *flightserver.Service) (int64, error) {
	schema := demoSchema()
	spec := &flightserver.TableSpec{IndexColumn: "time", IndexType: "timestamp",
		Granularity: json.RawMessage(`"10s"`), EntityColumns: []string{"hostname"}}
	tb, _, err := svc.OpenOrCreate(ctx, demoTable, spec, schema)
	if err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(demoSeed, 1))
	tags := make([][]string, demoHosts)
	for h := range tags {
		tags[h] = demoHostTags(h, rng)
	}
	// Each field of each host walks between 0 and 100.
	level := make([][]int64, demoHosts)
	for h := range level {
		level[h] = make([]int64, len(demoFields))
		for f := range level[h] {
			level[h][f] = rng.Int64N(101)
		}
	}
	var total int64
	stepsPerHour := int(time.Hour / demoStep)
	for hour := range 24 {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for s := range stepsPerHour {
			n := hour*stepsPerHour + s
			off := time.Duration(n) * demoStep
			ts := arrow.Timestamp(demoStart.Add(off).UnixMicro())
			for h := range demoHosts {
				for f := range demoFields { // the walk goes on while a host is silent
					v := level[h][f] + rng.Int64N(11) - 5
					level[h][f] = min(100, max(0, v))
				}
				if demoMissing(h, off, n) {
					continue
				}
				b.Field(0).(*array.TimestampBuilder).Append(ts)
				b.Field(1).(*array.StringBuilder).Append("host_" + strconv.Itoa(h))
				for i, t := range tags[h] {
					b.Field(2 + i).(*array.StringBuilder).Append(t)
				}
				for f := range demoFields {
					b.Field(2 + len(demoTags) + f).(*array.Int64Builder).Append(level[h][f])
				}
			}
		}
		rec := b.NewRecordBatch()
		b.Release()
		rdr, err := array.NewRecordReader(schema, []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			return total, err
		}
		res, err := svc.Append(ctx, tb, rdr)
		rdr.Release()
		if err != nil {
			return total, fmt.Errorf("demo hour %d: %w", hour, err)
		}
		total += int64(res.Rows)
	}
	return total, nil
}

// connectInfo is what printConnectHelp needs to know of a running server.
type connectInfo struct {
	addr, root string
	demo       bool
	tls        bool // clients must use TLS
	tokens     bool // clients must send a token
}

// printConnectHelp tells a newcomer how to reach the server.
func printConnectHelp(w io.Writer, ci connectInfo) {
	uri, jdbc := "grpc://"+ci.addr, "useEncryption=false"
	if ci.tls {
		uri, jdbc = "grpc+tls://"+ci.addr, "useEncryption=true&tlsRootCerts=ca.pem"
	}
	fmt.Fprintf(w, "\ntsflight is serving the tables under %s at %s\n", ci.root, uri)
	if ci.demo {
		fmt.Fprintf(w, "demo table %q: %d hosts, one row per host every 10 s on %s, with holes (try the gaps command)\n",
			demoTable, demoHosts, demoStart.Format("2006-01-02"))
	}
	if ci.tls || ci.tokens {
		// The snippets assume the CA's certificate in ca.pem and a token in
		// TSFLIGHT_TOKEN; docs/security.md has every client's settings.
		printSecureHelp(w, ci, uri, jdbc)
		return
	}
	fmt.Fprintf(w, `
  CLI      tsflight tables --server %[1]s
           tsflight gaps --start 2016-01-01T00:00:00Z --end 2016-01-02T00:00:00Z cpu
           tsflight coverage --plot coverage.svg cpu
  pyarrow  import pyarrow.flight as fl
           c = fl.connect(%[1]q)
           info = c.get_flight_info(fl.FlightDescriptor.for_path("cpu"))
           print(sum(c.do_get(e.ticket).read_all().num_rows for e in info.endpoints))
`, uri)
	if sqlBuilt {
		fmt.Fprintf(w, `  SQL      tsflight sql "SELECT hostname, round(avg(usage_user), 1) AS avg_user FROM cpu GROUP BY ALL ORDER BY 2 DESC LIMIT 5"
  ADBC     adbc_driver_flightsql.dbapi.connect(%[1]q)
  JDBC     jdbc:arrow-flight-sql://%[2]s?%[3]s
`, uri, ci.addr, jdbc)
	} else {
		fmt.Fprintf(w, "  SQL      off: this binary was built without -tags duckdb_arrow (ADBC and JDBC need it)\n")
	}
	fmt.Fprintln(w)
}

// printSecureHelp is printConnectHelp for a server with TLS or tokens.
func printSecureHelp(w io.Writer, ci connectInfo, uri, jdbc string) {
	var cli, py, adbc, jd []string
	cli = append(cli, "--server "+uri)
	if ci.tls {
		cli = append(cli, "--tls-ca ca.pem")
		py = append(py, `tls_root_certs=open("ca.pem", "rb").read()`)
		adbc = append(adbc, `"adbc.flight.sql.client_option.tls_root_certs": open("ca.pem").read()`)
	}
	if ci.tokens {
		adbc = append(adbc, `"username": "any", "password": token`)
		jd = append(jd, "&token=TOKEN (or user=any&password=TOKEN)")
	}
	fmt.Fprintf(w, "\n  (TLS: the server's CA certificate is in ca.pem; tokens: tsflight token new --scope read --file TOKENS-FILE)\n")
	if ci.tokens {
		fmt.Fprintf(w, "  CLI      TSFLIGHT_TOKEN=TOKEN tsflight tables %s\n", strings.Join(cli, " "))
	} else {
		fmt.Fprintf(w, "  CLI      tsflight tables %s\n", strings.Join(cli, " "))
	}
	fmt.Fprintf(w, "  pyarrow  c = fl.connect(%q%s)\n", uri, prefixed(", ", strings.Join(py, ", ")))
	if ci.tokens {
		fmt.Fprintf(w, "           opts = fl.FlightCallOptions(headers=[c.authenticate_basic_token(\"any\", token)])\n")
	}
	if sqlBuilt {
		fmt.Fprintf(w, "  ADBC     adbc_driver_flightsql.dbapi.connect(%q, db_kwargs={%s})\n", uri, strings.Join(adbc, ", "))
		fmt.Fprintf(w, "  JDBC     jdbc:arrow-flight-sql://%s?%s%s\n", ci.addr, jdbc, strings.Join(jd, ""))
	}
	fmt.Fprintln(w)
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
