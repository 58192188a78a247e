package flightserver

// The last action: the newest row of every entity of a table, answered
// from the table's last-value index (tableformat.Table.LastValues) as an
// Arrow IPC stream rather than JSON, so that clients read typed columns.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// ActionLast names the action returning the newest row per entity.
const ActionLast = "last"

// lastActionType is the last action's entry in ListActions.
var lastActionType = &flight.ActionType{Type: ActionLast, Description: `Newest row (by index) of every entity, sorted by entity. Body: {"table", "entity"?: {column: value, ...} (some or all entity columns), "columns"?: [...]}. Result: one result whose body is an Arrow IPC stream (schema, one record batch, end of stream), not JSON.`}

// lastRequest is the body of the last action.
type lastRequest struct {
	Table   string                     `json:"table"`
	Entity  map[string]json.RawMessage `json:"entity,omitempty"`
	Columns []string                   `json:"columns,omitempty"`
}

// arrowResult is an action result that DoAction sends as it is (an Arrow
// IPC stream) instead of encoding it as JSON.
type arrowResult []byte

// MarshalJSON refuses: a caller of RunAction that encodes every result as
// JSON gets an error instead of base64 that looks like an answer.
func (arrowResult) MarshalJSON() ([]byte, error) {
	return nil, errors.New("the result is an Arrow IPC stream, not JSON (send it through DoAction)")
}

// last answers the last action: the rows LastValues returns, encoded as
// an Arrow IPC stream.
func (s *Service) last(ctx context.Context, body []byte) (arrowResult, error) {
	var req lastRequest
	if err := decodeJSON(ActionLast, body, &req); err != nil {
		return nil, err
	}
	tb, st, err := s.resolve(ctx, &ScanRequest{Table: req.Table})
	if err != nil {
		return nil, err
	}
	if len(st.Index().EntityColumns) == 0 {
		return nil, invalidf("last: table %s has no entity columns: the newest row is kept per entity (scan the end of the table instead)", catalog.QuoteName(req.Table))
	}
	opts := tableformat.LastOptions{Alloc: s.scanAlloc()}
	if len(req.Columns) > 0 { // "columns": [] means every column, as in a scan
		opts.Columns = req.Columns
	}
	if len(req.Entity) > 0 {
		// Parsed as the coverage and gaps actions parse their entity, but a
		// partial identity is allowed: it keeps every entity that matches.
		opts.Entities = make(map[string]tableformat.EntityValue, len(req.Entity))
		cols := make([]string, 0, len(req.Entity))
		for col := range req.Entity {
			cols = append(cols, col)
		}
		slices.Sort(cols) // the same first error every time
		for _, col := range cols {
			v, err := parseEntityValue("entity", col, req.Entity[col], st)
			if err != nil {
				return nil, err
			}
			opts.Entities[col] = v
		}
	}
	rec, err := tb.LastValues(ctx, st, opts)
	if err != nil {
		return nil, &catalog.TableError{Name: req.Table, Err: err}
	}
	defer rec.Release()
	out, err := ipcStream(rec, s.alloc)
	if err != nil {
		return nil, err
	}
	// gRPC would refuse a larger message with a status of its own, sent
	// before the handler could say what to do about it.
	if limit := s.maxResultSize(); len(out) > limit {
		return nil, reqerr.Errorf(reqerr.ErrResourceExhausted, "last: the answer is %d bytes, more than the server sends in one message (%d, --max-send-msg-size): ask for fewer columns or filter by entity",
			len(out), limit)
	}
	return out, nil
}

// maxResultSize is the most bytes one Arrow action result may hold.
func (s *Service) maxResultSize() int {
	if s.opts.MaxResultSize > 0 {
		return s.opts.MaxResultSize
	}
	return guard.DefaultMaxMsgSize
}

// ipcStream encodes rec as a whole Arrow IPC stream: the schema, rec (even
// without rows) and the end-of-stream marker.
func ipcStream(rec arrow.RecordBatch, mem memory.Allocator) ([]byte, error) {
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(mem))
	err := w.Write(rec)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
