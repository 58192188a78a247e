package flightserver

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat"
)

// gridRequest is the body of the coverage-grid action. Start and End are
// optional (absent or null: from the table's data); Columns and Rows are
// kept raw so that a bad value is reported as written.
type gridRequest struct {
	Table   string          `json:"table"`
	Start   json.RawMessage `json:"start,omitempty"`
	End     json.RawMessage `json:"end,omitempty"`
	Columns json.RawMessage `json:"columns,omitempty"`
	Rows    json.RawMessage `json:"rows,omitempty"`
	Version *uint64         `json:"version,omitempty"`
}

// present reports whether an optional member was given (not absent, not
// null).
func present(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
}

// gridSize reads the columns or rows member: an integer from 1 to most,
// def when absent.
func gridSize(field string, raw json.RawMessage, def, most int) (int, error) {
	if !present(raw) {
		return def, nil
	}
	text := string(bytes.TrimSpace(raw))
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 1 || n > int64(most) {
		return 0, invalidf("%s: %s: %s must be an integer from 1 to %d", ActionCoverageGrid, field, text, most)
	}
	return int(n), nil
}

// coverageGrid answers the coverage-grid action: the coverage heat map of
// a table, from its coverage bitmaps.
func (s *Service) coverageGrid(ctx context.Context, body []byte) (any, error) {
	var req gridRequest
	if err := decodeJSON(ActionCoverageGrid, body, &req); err != nil {
		return nil, err
	}
	q := tableformat.CoverageGridQuery{}
	var err error
	if q.Columns, err = gridSize("columns", req.Columns, tableformat.DefaultGridColumns, tableformat.MaxGridColumns); err != nil {
		return nil, err
	}
	if q.Rows, err = gridSize("rows", req.Rows, tableformat.DefaultGridRows, tableformat.MaxGridRows); err != nil {
		return nil, err
	}
	tb, st, err := s.resolve(ctx, &ScanRequest{Table: req.Table, Version: req.Version})
	if err != nil {
		return nil, err
	}
	for _, b := range []struct {
		field string
		raw   json.RawMessage
		dst   **tableformat.IndexValue
	}{{"start", req.Start, &q.Start}, {"end", req.End, &q.End}} {
		if !present(b.raw) {
			continue
		}
		v, err := parseIndexValue(b.field, b.raw, st.Index())
		if err != nil {
			return nil, err
		}
		*b.dst = &v
	}
	if q.Start == nil || q.End == nil {
		if _, _, ok := st.IndexBounds(); !ok {
			return nil, reqerr.Errorf(reqerr.ErrFailedPrecondition, "%s: table %q has no data yet (version %d), so there is no range to default to; give start and end", ActionCoverageGrid, req.Table, st.Version)
		}
	}
	g, err := tb.CoverageGrid(ctx, st, q)
	if err != nil {
		return nil, err
	}
	return newGridAnswer(req.Table, st.Version, g), nil
}
