package flightserver

// The format-6 rows of the bad-input catalogue (see catalogue_test.go): a
// table written by timeseries-table-format 0.4.0 (testdata/format6) is
// served read-only, so every write on it is FAILED_PRECONDITION naming
// the upgrade, and the upgrade action's own bad requests. Listed after the
// other sections so that their numbers stay as they were.

import (
	"os/exec"
	"path/filepath"

	"google.golang.org/grpc/codes"
)

// format6 copies the format-6 fixture ts_entity into the root as name.
func (e *catEnv) format6(name string) {
	e.t.Helper()
	src := filepath.Join("..", "testdata", "format6", "tables", "ts_entity")
	if out, err := exec.Command("cp", "-a", src, filepath.Join(e.root, name)).CombinedOutput(); err != nil {
		e.t.Fatalf("cp: %v: %s", err, out)
	}
}

func format6Catalogue() []badCase {
	const cat = "format 6 and upgrade"
	legacy := func(e *catEnv) { e.format6("legacy") }
	return []badCase{
		{name: "put into a format-6 table (timeseries-table-format 0.4.0)", category: cat, op: "DoPut PATH [legacy]", code: codes.FailedPrecondition, frags: []string{"format-6", "tsflight upgrade TABLE"},
			setup: legacy,
			run:   func(e *catEnv) error { return e.putTSBS(pathDesc("legacy"), newRows) }},
		{name: "add-columns on a format-6 table", category: cat, op: "DoAction add-columns [legacy]", code: codes.FailedPrecondition, frags: []string{"format-6", "tsflight upgrade TABLE"},
			setup: legacy,
			run: func(e *catEnv) error {
				return e.act(ActionAddColumns, `{"table":"legacy","columns":[{"name":"x","type":"int64"}]}`)
			}},
		{name: "set-properties on a format-6 table", category: cat, op: "DoAction set-properties [legacy]", code: codes.FailedPrecondition, frags: []string{"format-6", "tsflight upgrade TABLE"},
			setup: legacy,
			run: func(e *catEnv) error {
				return e.act(ActionSetProperties, `{"table":"legacy","properties":{"tsflight.keep-snapshots":"1h"}}`)
			}},
		{name: "compact of a format-6 table", category: cat, op: "DoAction compact [legacy]", code: codes.FailedPrecondition, frags: []string{"format-6", "tsflight upgrade TABLE"},
			setup: legacy,
			run:   func(e *catEnv) error { return e.act(ActionCompact, `{"table":"legacy"}`) }},
		{name: "vacuum with apply on a format-6 table", category: cat, op: "DoAction vacuum [legacy]", code: codes.FailedPrecondition, frags: []string{"format-6", "tsflight upgrade TABLE"},
			setup: legacy,
			run:   func(e *catEnv) error { return e.act(ActionVacuum, `{"table":"legacy","apply":true}`) }},
		{name: "upgrade with an unknown field", category: cat, op: "DoAction upgrade [legacy]", code: codes.InvalidArgument, frags: []string{"upgrade", `"dryrun"`},
			setup: legacy,
			run:   func(e *catEnv) error { return e.act(ActionUpgrade, `{"table":"legacy","dryrun":true}`) }},
		{name: "upgrade with a body that is not JSON", category: cat, op: "DoAction upgrade", code: codes.InvalidArgument, frags: []string{"upgrade"},
			run: func(e *catEnv) error { return e.act(ActionUpgrade, `{"table":`) }},
		{name: "upgrade of an unknown table", category: cat, op: "DoAction upgrade", code: codes.NotFound, frags: []string{`"nosuch"`, "not found"},
			run: func(e *catEnv) error { return e.act(ActionUpgrade, `{"table":"nosuch"}`) }},
	}
}
