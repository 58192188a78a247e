// The rollback cases of the bad-input catalogue: each refusal of the
// rollback action, on tables the setups build beside cpu (which stays at
// version 2).

package flightserver

import (
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
)

// rollbackHistory creates table name and appends twice (versions 2 and
// 3), each append a day after the fixture's rows, one hour apart.
func (e *catEnv) rollbackHistory(name string) {
	e.createTSBS(e.ctx, name)
	e.mustPut(e.ctx, pathDesc(name), genRows(t0.AddDate(0, 0, 1), 3, 2), 100, 2)
	e.mustPut(e.ctx, pathDesc(name), genRows(t0.AddDate(0, 0, 1).Add(time.Hour), 3, 2), 100, 3)
}

func rollbackCatalogue() []badCase {
	const cat = "rollback"
	var gone string // the segment the vacuumed case deletes
	return []badCase{
		{name: "rollback to the newest version", category: cat, op: `DoAction rollback {"table":"cpu","version":2}`, code: codes.InvalidArgument,
			frags: []string{"version 2 is the table's newest version", "nothing to roll back"},
			run:   func(e *catEnv) error { return e.act(ActionRollback, `{"table":"cpu","version":2}`) }},
		{name: "rollback to a version that does not exist", category: cat, op: `DoAction rollback {"table":"cpu","version":5}`, code: codes.NotFound,
			frags: []string{"version 5 does not exist", "newest version is 2"},
			run:   func(e *catEnv) error { return e.act(ActionRollback, `{"table":"cpu","version":5}`) }},
		{name: "rollback without a version", category: cat, op: `DoAction rollback {"table":"cpu"}`, code: codes.InvalidArgument,
			frags: []string{"version is required"},
			run:   func(e *catEnv) error { return e.act(ActionRollback, `{"table":"cpu"}`) }},
		{name: "rollback to version 0", category: cat, op: `DoAction rollback {"table":"cpu","version":0}`, code: codes.InvalidArgument,
			frags: []string{"version must be at least 1"},
			run:   func(e *catEnv) error { return e.act(ActionRollback, `{"table":"cpu","version":0}`) }},
		{name: "rollback with the version as a string", category: cat, op: `DoAction rollback {"table":"cpu","version":"1"}`, code: codes.InvalidArgument,
			frags: []string{"rollback", "version"},
			run:   func(e *catEnv) error { return e.act(ActionRollback, `{"table":"cpu","version":"1"}`) }},
		{name: "rollback across added columns", category: cat, op: `DoAction rollback {"table":"grown","version":3}`, code: codes.FailedPrecondition,
			frags: []string{"cannot roll back to version 3: columns were added since (temp)", "cannot remove a column"},
			setup: func(e *catEnv) {
				e.rollbackHistory("grown")
				e.mustAction(e.ctx, ActionAddColumns, map[string]any{"table": "grown", "columns": []any{map[string]any{"name": "temp", "type": "float64", "nullable": true}}})
			},
			run: func(e *catEnv) error { return e.act(ActionRollback, `{"table":"grown","version":3}`) }},
		{name: "rollback to an expired version", category: cat, op: `DoAction rollback {"table":"old","version":2}`, code: codes.NotFound,
			frags: []string{"cannot roll back to version 2", "not kept (table property tsflight.keep-snapshots)"},
			setup: func(e *catEnv) {
				e.rollbackHistory("old")
				e.mustAction(e.ctx, ActionSetProperties, map[string]any{"table": "old", "properties": map[string]string{"tsflight.keep-snapshots": "0s"}})
				time.Sleep(5 * time.Millisecond)
			},
			run: func(e *catEnv) error { return e.act(ActionRollback, `{"table":"old","version":2}`) }},
		{name: "rollback to a version whose segment was deleted", category: cat, op: `DoAction rollback {"table":"vac","version":2}`, code: codes.NotFound,
			frags: []string{"cannot roll back to version 2: its segment data/_managed/append/", "is missing"},
			setup: func(e *catEnv) {
				e.rollbackHistory("vac")
				e.mustAction(e.ctx, ActionCompact, map[string]any{"table": "vac"})
				dry := e.rollbackRun(e.t, map[string]any{"table": "vac", "version": 2, "dry_run": true})
				gone = dry.Added[0]
				if err := os.Remove(filepath.Join(e.root, "vac", filepath.FromSlash(gone))); err != nil {
					e.t.Fatal(err)
				}
			},
			run: func(e *catEnv) error { return e.act(ActionRollback, `{"table":"vac","version":2}`) }},
		{name: "read token rolls back (a dry run too)", category: cat, op: `DoAction rollback {"table":"cpu","version":1,"dry_run":true}, Bearer READER`, code: codes.PermissionDenied,
			frags: []string{"action rollback needs write scope", "token reader has read scope"}, auth: true,
			run: func(e *catEnv) error {
				return e.reader().act(ActionRollback, `{"table":"cpu","version":1,"dry_run":true}`)
			}},
	}
}
