package tableformat

import (
	"strings"
	"testing"
)

// convertCommitV6 refuses what is not a format-6 commit, naming the fault,
// and converts an UpdateTableCoverage with a u_int64 kind.
func TestConvertCommitV6(t *testing.T) {
	commit := func(actions string) []byte {
		return []byte(`{"version":1,"base_version":0,"timestamp":"2026-01-01T00:00:00Z","actions":[` + actions + `]}`)
	}
	for _, c := range []struct{ name, in, msg string }{
		{"protocol-7 metadata", metaJSON(7, "[]", "[]", "", ""), "not format 6"},
		{"format_version 5", strings.Replace(v6Meta, `:6}`, `:5}`, 1), "not format 6"},
		{"both headers", strings.Replace(v6Meta, `"format_version":6`, `"format_version":6,"protocol_version":7`, 1), "both format_version and protocol_version"},
		{"generic kind", strings.Replace(v6Meta, `"kind":{"TimeSeries":{"column":"ts","entity_columns":["host"],"kind":{"type":"timestamp","bucket":{"Hours":1}}}}`, `"kind":"Generic"`, 1), "kind"},
		{"kind not in the bucket spelling", strings.Replace(v6Meta, `"bucket"`, `"index_granularity"`, 1), "not in the format-6 spelling"},
		{"bucket and index_granularity", strings.Replace(v6Meta, `"bucket":{"Hours":1}`, `"bucket":{"Hours":1},"index_granularity":{"Hours":1}`, 1), "both bucket and index_granularity"},
		{"coverage without index_kind", `{"UpdateTableCoverage":{"coverage_path":"_coverage/table/1-a.roar"}}`, `missing field "index_kind"`},
		{"not an object", `[`, "invalid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := convertCommitV6(commit(c.in))
			if err == nil || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("convert: %v, want an error containing %q", err, c.msg)
			}
		})
	}
	in := commit(strings.Replace(strings.Replace(v6Meta, `"type":"timestamp","bucket":{"Hours":1}`, `"type":"u_int64","bucket_width":7`, 1), `"entity_columns":["host"]`, `"entity_columns":[]`, 1) +
		`,{"UpdateTableCoverage":{"index_kind":{"type":"u_int64","bucket_width":7},"coverage_path":"_coverage/table/1-a.roar"}}`)
	got, err := convertCommitV6(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(v6Oracle(in)); string(got) != want {
		t.Fatalf("converted\n%s\nwant\n%s", got, want)
	}
}
