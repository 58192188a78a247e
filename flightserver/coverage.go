package flightserver

import (
	"context"
	"encoding/json"

	"github.com/tsflight/tsflight/tableformat"
)

// DefaultGapsLimit is the number of gaps the gaps action lists when the
// request gives no limit (or 0); the answer says "truncated": true when
// there were more. MaxGapsLimit is the largest limit a request may ask
// for: each listed gap costs about 75 bytes of JSON and some 400 bytes of
// server memory while the answer is built: a million gaps would be a ~76 MB
// answer, above the server's 64 MiB send limit; 500,000 is ~38 MB.
const (
	DefaultGapsLimit = 10_000
	MaxGapsLimit     = 500_000
)

// coverageRequest is the body of the coverage and gaps actions.
type coverageRequest struct {
	Table     string                     `json:"table"`
	Start     json.RawMessage            `json:"start"`
	End       json.RawMessage            `json:"end"`
	Entity    map[string]json.RawMessage `json:"entity,omitempty"`
	Limit     *int                       `json:"limit,omitempty"`
	MinWindow *uint64                    `json:"min_window,omitempty"`
	Version   *uint64                    `json:"version,omitempty"`
}

// spanJSON is a [start, end) stretch of the index in its own units.
type spanJSON struct {
	Start        any    `json:"start"`
	End          any    `json:"end"`
	EndInclusive bool   `json:"end_inclusive,omitempty"`
	Intervals    uint64 `json:"intervals"`
}

func indexJSON(v tableformat.IndexValue) any {
	switch v.Type {
	case tableformat.IndexTimestamp:
		return v.String()
	case tableformat.IndexInt64:
		return v.Int
	default:
		return v.Uint
	}
}

func spanOf(s tableformat.Span) spanJSON {
	return spanJSON{Start: indexJSON(s.Start), End: indexJSON(s.End), EndInclusive: s.EndInclusive, Intervals: s.Intervals}
}

func (s *Service) coverageAction(ctx context.Context, name string, body []byte) (any, error) {
	var req coverageRequest
	if err := decodeStrict(name, body, &req); err != nil {
		return nil, err
	}
	if len(req.Start) == 0 || len(req.End) == 0 {
		return nil, invalid("%s: start and end are required", name)
	}
	if name == ActionCoverage && (req.Limit != nil || req.MinWindow != nil) {
		return nil, invalid("coverage: limit and min_window belong to the gaps action")
	}
	tb, st, err := s.resolve(ctx, &ScanRequest{Table: req.Table, Version: req.Version})
	if err != nil {
		return nil, err
	}
	q := tableformat.CoverageQuery{}
	if q.Start, err = parseIndexValue("start", req.Start, st.Index()); err != nil {
		return nil, err
	}
	if q.End, err = parseIndexValue("end", req.End, st.Index()); err != nil {
		return nil, err
	}
	if req.Entity != nil {
		if q.Entity, err = identityOf("entity", req.Entity, st); err != nil {
			return nil, err
		}
	}
	out := map[string]any{"table": req.Table, "version": st.Version, "start": indexJSON(q.Start), "end": indexJSON(q.End)}
	if req.Entity != nil {
		out["entity"] = req.Entity
	}
	if name == ActionCoverage {
		rep, err := tb.Coverage(ctx, st, q)
		if err != nil {
			return nil, Status(err)
		}
		out["intervals"], out["identities"], out["expected"], out["covered"], out["ratio"] = rep.Intervals, rep.Identities, rep.Expected, rep.Covered, rep.Ratio
		return out, nil
	}
	q.Limit = DefaultGapsLimit
	if req.Limit != nil {
		switch {
		case *req.Limit < 0:
			return nil, invalid("gaps: limit %d is negative", *req.Limit)
		case *req.Limit > MaxGapsLimit:
			return nil, invalid("gaps: limit %d is above the maximum of %d; page through the range with start and end instead", *req.Limit, MaxGapsLimit)
		case *req.Limit > 0:
			q.Limit = *req.Limit
		}
	}
	if req.MinWindow != nil {
		q.MinWindow = *req.MinWindow
	}
	rep, err := tb.Gaps(ctx, st, q)
	if err != nil {
		return nil, Status(err)
	}
	gaps := make([]spanJSON, len(rep.Gaps))
	for i, g := range rep.Gaps {
		gaps[i] = spanOf(g)
	}
	out["gaps"], out["truncated"], out["missing_intervals"] = gaps, rep.Truncated, rep.MissingIntervals
	out["longest"], out["last_covered"] = nil, nil
	if rep.Longest != nil {
		out["longest"] = spanOf(*rep.Longest)
	}
	if rep.LastCovered != nil {
		out["last_covered"] = spanOf(*rep.LastCovered)
	}
	return out, nil
}
