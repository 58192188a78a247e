// The check action: a consistency check of tables (tableformat's Check)
// over DoAction, with the safe repairs when "repair" is true.

package flightserver

import (
	"context"
	"errors"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// ActionCheck names the check action.
const ActionCheck = "check"

type checkRequest struct {
	// Table or Tables name the tables; neither means every table.
	Table  string   `json:"table,omitempty"`
	Tables []string `json:"tables,omitempty"`
	Repair bool     `json:"repair,omitempty"`
}

// decodeCheckRequest decodes a check body. The scope check uses it too, so
// that the two can never disagree on whether a body repairs. An empty body
// is {}.
func decodeCheckRequest(body []byte) (checkRequest, error) {
	var req checkRequest
	if len(body) == 0 {
		return req, nil
	}
	err := decodeJSON(ActionCheck, body, &req)
	return req, err
}

// CheckFinding is one problem of a check answer.
type CheckFinding struct {
	Severity   string `json:"severity"`
	Code       string `json:"code"`
	Path       string `json:"path"`
	Version    uint64 `json:"version,omitempty"`
	Problem    string `json:"problem"`
	Action     string `json:"action"`
	Repairable bool   `json:"repairable"`
	Repaired   bool   `json:"repaired"`
	Repair     string `json:"repair,omitempty"`
}

// CheckTable is the check of one table.
type CheckTable struct {
	Table string `json:"table"`
	// OK: nothing wrong (or, after a repair, everything repaired).
	OK       bool           `json:"ok"`
	Version  uint64         `json:"version"`
	Current  uint64         `json:"current"`
	Segments int            `json:"segments"`
	Rows     uint64         `json:"rows"`
	Findings []CheckFinding `json:"findings"`
}

// CheckResult is the answer of the check action.
type CheckResult struct {
	// OK: every table is OK.
	OK     bool         `json:"ok"`
	Repair bool         `json:"repair"`
	Tables []CheckTable `json:"tables"`
}

// checkNoCommits is the code of a table directory whose log holds nothing.
const checkNoCommits = "no_commits"

func (s *Service) check(ctx context.Context, body []byte) (any, error) {
	req, err := decodeCheckRequest(body)
	if err != nil {
		return nil, err
	}
	if req.Table != "" && len(req.Tables) > 0 {
		return nil, invalidf(`check: give "table" or "tables", not both`)
	}
	names := req.Tables
	if req.Table != "" {
		names = []string{req.Table}
	}
	explicit := len(names) > 0
	if !explicit {
		if names, err = s.cat.Names(); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, n := range names {
		if err := ValidateTableName(n); err != nil {
			return nil, err
		}
		if seen[n] {
			return nil, invalidf("check: table %s is named twice", catalog.QuoteName(n))
		}
		seen[n] = true
		if !s.cat.HoldsLog(n) {
			return nil, catalog.NotFound(n)
		}
	}
	out := CheckResult{OK: true, Repair: req.Repair, Tables: make([]CheckTable, 0, len(names))}
	for _, n := range names {
		// A fresh handle on the directory: the catalog's cached one may
		// not open a damaged table, and must not stand in the way.
		fsys, err := s.cat.TableFS(n)
		if err != nil {
			return nil, err
		}
		rep, err := tableformat.Check(ctx, fsys, tableformat.CheckOptions{Repair: req.Repair, Options: s.cat.Options()})
		var ct CheckTable
		switch {
		case errors.Is(err, tableformat.ErrNotFound):
			ct = CheckTable{Table: n, Findings: []CheckFinding{{Severity: string(tableformat.CheckError), Code: checkNoCommits, Path: tableformat.LogDir,
				Problem: "the table directory has a log directory but no commit and no CURRENT (a create that never finished?)",
				Action:  "remove the directory if the table is not wanted, or restore its log from a backup"}}}
		case err != nil:
			return nil, &catalog.TableError{Name: n, Err: err}
		default:
			ct = checkTable(n, rep)
		}
		out.OK = out.OK && ct.OK
		out.Tables = append(out.Tables, ct)
		repaired := 0
		for _, f := range ct.Findings {
			if f.Repaired {
				repaired++
			}
		}
		if repaired > 0 {
			s.log.Info("check repaired a table", "table", n, "repairs", repaired, "version", ct.Version, "by", guard.CallerName(ctx))
		}
		if !ct.OK {
			s.log.Warn("check found problems", "table", n, "findings", len(ct.Findings)-repaired)
		}
	}
	return out, nil
}

func checkTable(name string, rep *tableformat.CheckReport) CheckTable {
	ct := CheckTable{Table: name, OK: rep.OK(), Version: rep.Version, Current: rep.Current, Segments: rep.Segments, Rows: rep.Rows,
		Findings: make([]CheckFinding, len(rep.Findings))}
	for i, f := range rep.Findings {
		ct.Findings[i] = CheckFinding{Severity: string(f.Severity), Code: f.Code, Path: f.Path, Version: f.Version, Problem: f.Problem,
			Action: f.Action, Repairable: f.Repairable, Repaired: f.Repaired, Repair: f.Repair}
	}
	return ct
}
