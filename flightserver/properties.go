// The set-properties action: table properties (tableformat's
// SetProperties), such as tsflight.keep-snapshots, the keep window of
// older versions.

package flightserver

import (
	"context"
	"errors"
	"maps"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// ActionSetProperties names the set-properties action.
const ActionSetProperties = "set-properties"

type setPropertiesRequest struct {
	Table string `json:"table"`
	// Properties maps each name to its new value; "" (or null) removes
	// the property.
	Properties map[string]string `json:"properties"`
}

// SetPropertiesResult is the answer of set-properties: the version it
// committed and the properties at that version.
type SetPropertiesResult struct {
	Table      string            `json:"table"`
	Version    uint64            `json:"version"`
	Properties map[string]string `json:"properties"`
}

func (s *Service) setProperties(ctx context.Context, body []byte) (any, error) {
	var req setPropertiesRequest
	if err := decodeJSON(ActionSetProperties, body, &req); err != nil {
		return nil, err
	}
	if len(req.Properties) == 0 {
		return nil, invalidf(`set-properties: properties is empty: give {"name": "value", ...} (an empty value removes the property)`)
	}
	// The rules of a write, before the table is looked up.
	if _, err := tableformat.NewSetTableProperties(req.Properties); err != nil {
		return nil, err
	}
	tb, err := s.Table(ctx, req.Table)
	if err != nil {
		return nil, err
	}
	// Committed on the handle's snapshot; an append that commits first is
	// a conflict: refresh and try again, as add-columns does.
	for retry := 0; ; retry++ {
		base := tb.State()
		v, err := tb.SetProperties(ctx, base.Version, req.Properties)
		if err == nil {
			props := maps.Clone(base.Properties)
			if props == nil {
				props = map[string]string{}
			}
			for k, val := range req.Properties {
				if val == "" {
					delete(props, k)
				} else {
					props[k] = val
				}
			}
			s.log.Info("table properties set", "table", req.Table, "version", v, "properties", len(req.Properties), "by", guard.CallerName(ctx))
			return SetPropertiesResult{Table: req.Table, Version: v, Properties: props}, nil
		}
		if !errors.Is(err, tableformat.ErrConflict) || retry >= s.opts.AppendRetries {
			return nil, &catalog.TableError{Name: req.Table, Err: err}
		}
		if _, err := tb.Refresh(ctx); err != nil {
			return nil, &catalog.TableError{Name: req.Table, Err: err}
		}
	}
}
