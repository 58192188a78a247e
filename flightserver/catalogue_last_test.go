package flightserver

// The last-action rows of the bad-input catalogue (see catalogue_test.go):
// each refusal of the last action. Listed after the format-6 section so
// that the numbers before them stay as they were.

import (
	"context"
	"path/filepath"

	"google.golang.org/grpc/codes"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// bareSegment creates table name with one append, then commits, through
// a handle of its own, that append's segment again without its coverage
// sidecar (as a hand-made commit could): the table then has a segment the
// last-value index cannot be built from.
func (e *catEnv) bareSegment(name string) {
	e.t.Helper()
	e.createTSBS(e.ctx, name)
	e.mustPut(e.ctx, pathDesc(name), genRows(t0, 3, 2), 100, 2)
	ctx := context.Background()
	tb, err := tableformat.Open(ctx, storage.Local(filepath.Join(e.root, name)), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	st := tb.State()
	if len(st.Segments) != 1 || st.Segments[0].CoveragePath == "" {
		e.t.Fatalf("table %s: %d segments, want one with a coverage sidecar", name, len(st.Segments))
	}
	seg := st.Segments[0]
	seg.CoveragePath = ""
	if _, err := tb.Commit(ctx, st.Version, []tableformat.Action{tableformat.RemoveSegment{Path: seg.Path}, tableformat.AddSegment{Segment: seg}}); err != nil {
		e.t.Fatal(err)
	}
}

func lastCatalogue() []badCase {
	const cat = "last"
	plain := func(e *catEnv) {
		e.mustAction(e.ctx, ActionCreateTable, map[string]any{"table": "plain", "index_column": "ts", "index_type": "timestamp", "granularity": "10s"})
		e.mustPut(e.ctx, pathDesc("plain"), genRows(t0, 3, 1), 100, 2)
	}
	return []badCase{
		{name: "last of an unknown table", category: cat, op: `DoAction last {"table":"nosuch"}`, code: codes.NotFound, frags: []string{`table "nosuch": not found`},
			run: func(e *catEnv) error { return e.act(ActionLast, `{"table":"nosuch"}`) }},
		{name: "last with a body that is not JSON", category: cat, op: `DoAction last {"table":`, code: codes.InvalidArgument, frags: []string{"last: malformed JSON body"},
			run: func(e *catEnv) error { return e.act(ActionLast, `{"table":`) }},
		{name: "last with an unknown field (entities for entity)", category: cat, op: `DoAction last {"table":"cpu","entities":{…}}`, code: codes.InvalidArgument,
			frags: []string{"last: malformed JSON body", `unknown field "entities"`},
			run:   func(e *catEnv) error { return e.act(ActionLast, `{"table":"cpu","entities":{"hostname":"host_0"}}`) }},
		{name: "last filtered on a column that is not an entity column", category: cat, op: `DoAction last {"table":"cpu","entity":{"usage_user":1}}`, code: codes.InvalidArgument,
			frags: []string{`entity: "usage_user" is not an entity column (entity columns: hostname)`},
			run:   func(e *catEnv) error { return e.act(ActionLast, `{"table":"cpu","entity":{"usage_user":1}}`) }},
		{name: "last filtered on an entity value of the wrong type", category: cat, op: `DoAction last {"table":"cpu","entity":{"hostname":7}}`, code: codes.InvalidArgument,
			frags: []string{"entity.hostname: expected a string, got 7"},
			run:   func(e *catEnv) error { return e.act(ActionLast, `{"table":"cpu","entity":{"hostname":7}}`) }},
		{name: "last of an unknown column", category: cat, op: `DoAction last {"table":"cpu","columns":["nope"]}`, code: codes.InvalidArgument,
			frags: []string{`table "cpu"`, `last: columns: unknown column "nope"`},
			run:   func(e *catEnv) error { return e.act(ActionLast, `{"table":"cpu","columns":["nope"]}`) }},
		{name: "last with a column listed twice", category: cat, op: `DoAction last {"table":"cpu","columns":["ts","ts"]}`, code: codes.InvalidArgument,
			frags: []string{`last: columns: column "ts" is listed twice`},
			run:   func(e *catEnv) error { return e.act(ActionLast, `{"table":"cpu","columns":["ts","ts"]}`) }},
		{name: "last of a table without entity columns", category: cat, op: `DoAction last {"table":"plain"}`, code: codes.InvalidArgument,
			frags: []string{`last: table "plain" has no entity columns`},
			setup: plain,
			run:   func(e *catEnv) error { return e.act(ActionLast, `{"table":"plain"}`) }},
		{name: "last filtered by entity on a table without data", category: cat, op: `DoAction last {"table":"fresh","entity":{"hostname":"host_0"}}`, code: codes.InvalidArgument,
			frags: []string{"entity: the table has no data yet"},
			run:   func(e *catEnv) error { return e.act(ActionLast, `{"table":"fresh","entity":{"hostname":"host_0"}}`) }},
		{name: "last of a table with a segment without a coverage sidecar", category: cat, op: `DoAction last {"table":"bare"}`, code: codes.FailedPrecondition,
			frags: []string{`table "bare"`, "has no coverage sidecar", "compact the table"},
			setup: func(e *catEnv) { e.bareSegment("bare") },
			run:   func(e *catEnv) error { return e.act(ActionLast, `{"table":"bare"}`) }},
	}
}
