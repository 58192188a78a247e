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

func (s *Service) coverageAction(ctx context.Context, name string, body []byte) (any, error) {
	var req coverageRequest
	if err := decodeJSON(name, body, &req); err != nil {
		return nil, err
	}
	if len(req.Start) == 0 || len(req.End) == 0 {
		return nil, invalidf("%s: start and end are required", name)
	}
	if name == ActionCoverage && (req.Limit != nil || req.MinWindow != nil) {
		return nil, invalidf("coverage: limit and min_window belong to the gaps action")
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
	if name == ActionCoverage {
		rep, err := tb.Coverage(ctx, st, q)
		if err != nil {
			return nil, err
		}
		a := NewCoverageAnswer(req.Table, st.Version, q, rep)
		a.Entity = req.Entity
		return a, nil
	}
	q.Limit = DefaultGapsLimit
	if req.Limit != nil {
		switch {
		case *req.Limit < 0:
			return nil, invalidf("gaps: limit %d is negative", *req.Limit)
		case *req.Limit > MaxGapsLimit:
			return nil, invalidf("gaps: limit %d is above the maximum of %d; page through the range with start and end instead", *req.Limit, MaxGapsLimit)
		case *req.Limit > 0:
			q.Limit = *req.Limit
		}
	}
	if req.MinWindow != nil {
		q.MinWindow = *req.MinWindow
	}
	rep, err := tb.Gaps(ctx, st, q)
	if err != nil {
		return nil, err
	}
	a := newGapsAnswer(req.Table, st.Version, q, rep)
	a.Entity = req.Entity
	return a, nil
}
