package tsbs

import (
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
)

// tagColumns are the string columns after time, in schema order:
// hostname then TSBS's nine host tags.
var tagColumns = []string{"hostname", "region", "datacenter", "rack", "os", "arch", "team",
	"service", "service_version", "service_environment"}

// fieldColumns are the cpu measurement's ten fields, in TSBS order.
var fieldColumns = []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
	"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}

const (
	numTags   = 10 // hostname and the nine tags
	numFields = 10
)

// TagColumns returns the names of the string columns, in schema order:
// hostname and the nine TSBS host tags.
func TagColumns() []string { return append([]string(nil), tagColumns...) }

// FieldColumns returns the names of the ten int64 fields, in schema
// order.
func FieldColumns() []string { return append([]string(nil), fieldColumns...) }

// regions are TSBS's regions with their datacenters (TSBS's host.go).
var regions = []struct {
	name string
	dcs  []string
}{
	{"us-east-1", []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1e"}},
	{"us-west-1", []string{"us-west-1a", "us-west-1b"}},
	{"us-west-2", []string{"us-west-2a", "us-west-2b", "us-west-2c"}},
	{"eu-west-1", []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
	{"eu-central-1", []string{"eu-central-1a", "eu-central-1b"}},
	{"ap-southeast-1", []string{"ap-southeast-1a", "ap-southeast-1b"}},
	{"ap-southeast-2", []string{"ap-southeast-2a", "ap-southeast-2b"}},
	{"ap-northeast-1", []string{"ap-northeast-1a", "ap-northeast-1c"}},
	{"sa-east-1", []string{"sa-east-1a", "sa-east-1b", "sa-east-1c"}},
}

// The value sets of the other tags (TSBS's host.go).
var (
	oses         = []string{"Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"}
	arches       = []string{"x64", "x86"}
	teams        = []string{"SF", "NYC", "LON", "CHI"}
	environments = []string{"production", "staging", "test"}
)

const (
	racks           = 100 // rack is "0" … "99"
	services        = 20  // service is "0" … "19"
	serviceVersions = 2   // service_version is "0" or "1"
)

var schema = func() *arrow.Schema {
	fields := []arrow.Field{{Name: "time", Type: timeType}}
	for _, t := range tagColumns {
		fields = append(fields, arrow.Field{Name: t, Type: arrow.BinaryTypes.String})
	}
	for _, f := range fieldColumns {
		fields = append(fields, arrow.Field{Name: f, Type: arrow.PrimitiveTypes.Int64})
	}
	return arrow.NewSchema(fields, nil)
}()

var timeType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// Schema is the data's schema, every column non-nullable: time
// (timestamp[us, UTC]), hostname and the nine tags (utf8), then the ten
// fields (int64).
func Schema() *arrow.Schema { return schema }

// HostTags returns host's string columns in schema order: its hostname
// host_<host> and its nine tags. They are a pure function of the seed
// and the host; the host must be in [0, Hosts).
func (p Params) HostTags(host int) []string {
	r := newStream(derive(p.Seed, domTags, uint64(host)))
	pick := func(vs []string) string { return vs[r.intN(len(vs))] }
	reg := regions[r.intN(len(regions))]
	return []string{
		"host_" + strconv.Itoa(host),
		reg.name,
		pick(reg.dcs),
		strconv.Itoa(r.intN(racks)),
		pick(oses),
		pick(arches),
		pick(teams),
		strconv.Itoa(r.intN(services)),
		strconv.Itoa(r.intN(serviceVersions)),
		pick(environments),
	}
}
