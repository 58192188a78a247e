package flightserver

import (
	"context"
	"encoding/json"
	"time"
	_ "time/tzdata" // validateTimezone: the tz database, whatever the machine has

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// Action names. NB: clients code against these.
const (
	ActionCreateTable   = "create-table"
	ActionDescribeTable = "describe-table"
	ActionCoverage      = "coverage"
	ActionGaps          = "gaps"
	ActionCoverageGrid  = "coverage-grid"
	ActionAddColumns    = "add-columns"
)

var actionTypes = []*flight.ActionType{
	{Type: ActionCreateTable, Description: `Create a table. Body: {"table", "index_column", "index_type": "timestamp"|"int64"|"uint64", "granularity": "10s"|"1m"|"1h"|"1d"|integer, "entity_columns": [...], "timezone"}. Result: {"table", "version"}.`},
	{Type: ActionDescribeTable, Description: `Describe a table. Body: {"table"}. Result: version, protocol_version, reader_features, writer_features, format {protocol, legacy_format (6 for a format-6 table), reader_features, writer_features, needs_upgrade}, schema, index, segments, rows, bytes, created_at, properties.`},
	{Type: ActionCoverage, Description: `Coverage of [start, end). Body: {"table", "start", "end", "entity"?: {column: value}, "version"?}. Result: intervals, identities, expected, covered, ratio.`},
	{Type: ActionGaps, Description: `Missing runs of [start, end). Body: {"table", "start", "end", "entity"?, "limit"?, "min_window"?, "version"?}. Result: gaps [{start, end, intervals}], truncated, longest, last_covered, missing_intervals.`},
	{Type: ActionCoverageGrid, Description: `Coverage heat map, entities down and time across. Body: {"table", "start"?, "end"?, "columns"?: 1-4096 (default 200), "rows"?: 1-4096 (default 200), "version"?}. Result: start, end, intervals, identities, entity_columns, edges, column_intervals, rows [{first, last, identities}], covered [[...]].`},
	{Type: ActionAddColumns, Description: `Add nullable columns. Body: {"table", "columns": [{"name", "type", "nullable": true}]} with Arrow type names (float64, int64, utf8, bool, timestamp[us, UTC], decimal128(10, 2), ...). Result: {"table", "version"}.`},
	{Type: ActionSetProperties, Description: `Set table properties (tsflight.keep-snapshots: how long older versions stay readable, a duration, default 168h). Body: {"table", "properties": {name: value, ...}} (an empty value removes the property). Result: {"table", "version", "properties"}.`},
	{Type: ActionVacuum, Description: `Find (and with "apply": true delete) files no commit references (leftovers of appends that never committed) and files only expired versions hold (segments replaced by compaction, superseded coverage snapshots). Body: {"table", "older_than"?: RFC 3339 or "retention"?: duration (default: 7 days ago; never in the future), "keep_snapshots"?: duration (default: the table's), "apply"?: false}. Result: version, older_than, keep_snapshots, superseded_before, applied, artifacts [{path, size, modified, kind, disposition, reason}], totals.`},
	{Type: ActionCheck, Description: `Check tables for damage: every commit replays, CURRENT is current, live segments are present with the recorded size, rows and footer, coverage sidecars and the table coverage snapshot agree with their data. With "repair": true, republish CURRENT and rebuild the table coverage snapshot when they are wrong (nothing is deleted). Body: {"table"} or {"tables": [...]} or {} for all, "repair"?: false. Result: ok, repair, tables [{table, ok, version, current, segments, rows, findings [{severity, code, path, version, problem, action, repairable, repaired, repair}]}].`},
	{Type: ActionMaintenance, Description: `Background maintenance (compaction of small segments) status, pause and resume. Body: {"table"?, "paused"?: bool} ({} for every table; "paused" pauses or resumes, for the table or all). Result: enabled, paused_all, tables [{table, enabled, paused, pending, small_segments, small_bytes, min_small_segments, running, runs, merged, last_run, last_error}].`},
	{Type: ActionCompact, Description: `Merge small segments into large ones sorted by (UTC day of a timestamp index, entity, index), in one commit that replaces them (rows and coverage unchanged; the replaced files stay on disk). Body: {"table", "dry_run"?: false}. Result: table, starting_version, committed_version, dry_run, no_op, retries, groups [{sources, source_bytes, rows, index_min, index_max, outputs, output_bytes}], dropped_groups, remaining, source_segments, output_segments, rows_read, rows_written, bytes_before, bytes_after.`},
	{Type: ActionRollback, Description: `Give a table back an older version's content in one new commit (history stays: roll back to the version before a rollback to undo it). Refused when the version is expired, a file it needs is gone, columns were added since, or another writer commits meanwhile. Body: {"table", "version", "dry_run"?: false}. Result: table, starting_version, target_version, committed_version, dry_run, no_op, removed, added, rows_before, rows_after, coverage.`},
	upgradeActionType,
	lastActionType,
}

// ListActions describes the actions DoAction accepts.
func (s *Service) ListActions(_ *flight.Empty, stream flight.FlightService_ListActionsServer) error {
	for _, a := range actionTypes {
		if err := stream.Send(a); err != nil {
			return err
		}
	}
	return nil
}

// DoAction runs one action: JSON body in, one result out (JSON, or an
// Arrow IPC stream for the last action).
func (s *Service) DoAction(action *flight.Action, stream flight.FlightService_DoActionServer) error {
	result, err := s.RunAction(stream.Context(), action.GetType(), action.GetBody())
	if err != nil {
		return err
	}
	if b, ok := result.(arrowResult); ok {
		return stream.Send(&flight.Result{Body: b})
	}
	body, err := json.Marshal(result)
	if err != nil {
		return Status(err)
	}
	return stream.Send(&flight.Result{Body: body})
}

// IsAction reports whether name is one of this service's actions.
func IsAction(name string) bool {
	for _, a := range actionTypes {
		if a.Type == name {
			return true
		}
	}
	return false
}

// RunAction runs the named action and returns its JSON-ready result; the
// last action's result is an Arrow IPC stream ([]byte underneath), which
// refuses to be encoded as JSON. It is the edge of every action of
// DoAction: its error is a gRPC status, mapped by Status here.
func (s *Service) RunAction(ctx context.Context, name string, body []byte) (any, error) {
	result, err := s.runAction(ctx, name, body)
	return result, Status(err)
}

// runAction is RunAction with the error as the action returned it.
func (s *Service) runAction(ctx context.Context, name string, body []byte) (any, error) {
	switch name {
	case ActionCreateTable:
		var a TableSpec
		if err := decodeJSON(name, body, &a); err != nil {
			return nil, err
		}
		co, err := a.options()
		if err != nil {
			return nil, err
		}
		tb, err := s.cat.Create(ctx, a.Table, co)
		if err != nil {
			return nil, err
		}
		s.log.Info("table created", "table", a.Table, "by", guard.CallerName(ctx))
		return TableVersion{Table: a.Table, Version: tb.State().Version}, nil
	case ActionDescribeTable:
		var a struct {
			Table string `json:"table"`
		}
		tb, err := s.openRequested(ctx, name, body, &a, &a.Table, nil)
		if err != nil {
			return nil, err
		}
		st := tb.State()
		info, err := describe(a.Table, st)
		if err != nil {
			return nil, err
		}
		mi := s.maintenanceInfo(a.Table, st)
		mi.Table = "" // describe-table names it once
		return describeWithMaintenance{info, mi}, nil
	case ActionCoverage, ActionGaps:
		return s.coverageAction(ctx, name, body)
	case ActionLast:
		return s.last(ctx, body)
	}
	if run, ok := actionMethods[name]; ok {
		return run(s, ctx, body)
	}
	return nil, UnknownAction(name, false)
}

// actionMethods are the actions runAction hands to a method of their own.
var actionMethods = map[string]func(*Service, context.Context, []byte) (any, error){
	ActionCoverageGrid:  (*Service).coverageGrid,
	ActionAddColumns:    (*Service).addColumns,
	ActionSetProperties: (*Service).setProperties,
	ActionVacuum:        (*Service).vacuum,
	ActionCheck:         (*Service).check,
	ActionCompact:       (*Service).compact,
	ActionRollback:      (*Service).rollback,
	ActionMaintenance:   (*Service).maintenanceAction,
	ActionUpgrade:       (*Service).upgrade,
}

// TableSpec is how to create a table: the body of the create-table action
// and the "create" member of a DoPut command.
type TableSpec struct {
	Table         string          `json:"table"`
	IndexColumn   string          `json:"index_column"`
	IndexType     string          `json:"index_type"`
	Granularity   json.RawMessage `json:"granularity"`
	EntityColumns []string        `json:"entity_columns,omitempty"`
	Timezone      *string         `json:"timezone,omitempty"`
}

// validateTimezone accepts IANA time zone names (the tz database is built
// in, so the answer does not depend on the machine). The table format
// stores the zone as metadata only, so tables written elsewhere with any
// string still open; a new table gets a zone that readers can use.
func validateTimezone(tz string) error {
	if tz == "" || tz == "Local" {
		return invalidf("timezone %q is not an IANA time zone name (for example UTC or America/New_York)", tz)
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return invalidf("timezone %q is not an IANA time zone name (for example UTC or America/New_York)", tz)
	}
	return nil
}

func (a *TableSpec) options() (tableformat.CreateOptions, error) {
	if err := ValidateTableName(a.Table); err != nil {
		return tableformat.CreateOptions{}, err
	}
	if a.IndexColumn == "" {
		return tableformat.CreateOptions{}, invalidf("index_column is required")
	}
	typ := tableformat.IndexType(a.IndexType)
	switch typ {
	case tableformat.IndexTimestamp, tableformat.IndexInt64, tableformat.IndexUInt64:
	case "":
		return tableformat.CreateOptions{}, invalidf(`index_type is required: "timestamp", "int64" or "uint64"`)
	default:
		return tableformat.CreateOptions{}, invalidf(`index_type %q is not one of "timestamp", "int64", "uint64"`, a.IndexType)
	}
	kind, err := parseGranularity(a.Granularity, typ)
	if err != nil {
		return tableformat.CreateOptions{}, err
	}
	if a.Timezone != nil && typ != tableformat.IndexTimestamp {
		return tableformat.CreateOptions{}, invalidf("timezone is only allowed for timestamp indexes")
	}
	if a.Timezone != nil {
		if err := validateTimezone(*a.Timezone); err != nil {
			return tableformat.CreateOptions{}, err
		}
	}
	kind.Timezone = a.Timezone
	spec := tableformat.IndexSpec{Column: a.IndexColumn, EntityColumns: a.EntityColumns, Kind: kind}
	if err := spec.Validate(); err != nil {
		return tableformat.CreateOptions{}, err
	}
	return tableformat.CreateOptions{Index: spec}, nil
}

// isNotFound and isAlreadyExists test an error, a status or one with a
// category, by the code Status gives it.
func isNotFound(err error) bool      { return status.Code(Status(err)) == codes.NotFound }
func isAlreadyExists(err error) bool { return status.Code(Status(err)) == codes.AlreadyExists }

// openRequested decodes an action's JSON body into req and opens the table
// it names (*table, a field of req), refreshed to its newest version;
// check, when not nil, vets the request in between.
func (s *Service) openRequested(ctx context.Context, action string, body []byte, req any, table *string, check func() error) (*tableformat.Table, error) {
	if err := decodeJSON(action, body, req); err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(); err != nil {
			return nil, err
		}
	}
	return s.Table(ctx, *table)
}

// tableFailed is the error of an action that ran on the named table and
// failed: tableformat's error with the table's name.
func tableFailed(name string, err error) error {
	return &catalog.TableError{Name: name, Err: err}
}
