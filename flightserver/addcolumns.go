package flightserver

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat"
)

type addColumnsRequest struct {
	Table   string `json:"table"`
	Columns []struct {
		Name     string `json:"name"`
		Type     string `json:"type"`
		Nullable *bool  `json:"nullable,omitempty"`
	} `json:"columns"`
}

func (s *Service) addColumns(ctx context.Context, body []byte) (any, error) {
	var req addColumnsRequest
	if err := decodeJSON(ActionAddColumns, body, &req); err != nil {
		return nil, err
	}
	if len(req.Columns) == 0 {
		return nil, invalidf("add-columns: columns is empty")
	}
	fields := make([]tableformat.Field, len(req.Columns))
	for i, c := range req.Columns {
		dt, err := ParseArrowType(c.Type)
		if err != nil {
			return nil, invalidf("add-columns: column %q: %v", c.Name, err)
		}
		nullable := c.Nullable == nil || *c.Nullable
		fields[i] = tableformat.Field{Name: c.Name, Type: dt, Nullable: nullable}
	}
	tb, err := s.Table(ctx, req.Table)
	if err != nil {
		return nil, err
	}
	// AddColumns works on the handle's snapshot and fails with a conflict
	// when an append commits first; refresh and try again, as appends do.
	for retry := 0; ; retry++ {
		v, err := tb.AddColumns(ctx, fields)
		if err == nil {
			s.log.Info("columns added", "table", req.Table, "version", v, "columns", len(fields), "by", guard.CallerName(ctx))
			return TableVersion{Table: req.Table, Version: v}, nil
		}
		if !errors.Is(err, tableformat.ErrConflict) || retry >= s.opts.AppendRetries {
			return nil, err
		}
		if _, err := tb.Refresh(ctx); err != nil {
			return nil, err
		}
	}
}

var (
	reTimestamp = regexp.MustCompile(`^timestamp\[(ms|us|ns)(?:,\s*(?:tz=)?([^\]]+))?\]$`)
	reDecimal   = regexp.MustCompile(`^decimal(?:128|256)?\((\d+),\s*(-?\d+)\)$`)
	reFixed     = regexp.MustCompile(`^fixed_size_binary\[(\d+)\]$`)
)

// ParseArrowType reads the Arrow type names clients use for scalar
// columns: bool, int32, int64, uint64, float32, float64, utf8 (or string),
// binary, fixed_size_binary[N], timestamp[ms|us|ns] with an optional
// timezone (timestamp[us, UTC]), decimal128(P, S) / decimal256(P, S).
func ParseArrowType(s string) (tableformat.DataType, error) {
	name := strings.TrimSpace(s)
	switch strings.ToLower(name) {
	case "bool", "boolean":
		return tableformat.DataType{Kind: tableformat.TypeBool}, nil
	case "int32":
		return tableformat.DataType{Kind: tableformat.TypeInt32}, nil
	case "int64":
		return tableformat.DataType{Kind: tableformat.TypeInt64}, nil
	case "uint64":
		return tableformat.DataType{Kind: tableformat.TypeUInt64}, nil
	case "float32", "float":
		return tableformat.DataType{Kind: tableformat.TypeFloat32}, nil
	case "float64", "double":
		return tableformat.DataType{Kind: tableformat.TypeFloat64}, nil
	case "utf8", "string":
		return tableformat.DataType{Kind: tableformat.TypeUtf8}, nil
	case "binary":
		return tableformat.DataType{Kind: tableformat.TypeBinary}, nil
	}
	if m := reTimestamp.FindStringSubmatch(name); m != nil {
		dt := tableformat.DataType{Kind: tableformat.TypeTimestamp, Unit: map[string]tableformat.TimeUnit{"ms": tableformat.Millis, "us": tableformat.Micros, "ns": tableformat.Nanos}[m[1]]}
		if tz := strings.TrimSpace(m[2]); tz != "" {
			dt.Timezone = &tz
		}
		return dt, nil
	}
	if m := reDecimal.FindStringSubmatch(name); m != nil {
		p, err1 := strconv.Atoi(m[1])
		sc, err2 := strconv.Atoi(m[2])
		if err1 != nil || err2 != nil || p < 1 || p > 76 || sc < 0 || sc > p {
			return tableformat.DataType{}, fmt.Errorf("%q: precision must be 1..76 and scale 0..precision", s)
		}
		return tableformat.DataType{Kind: tableformat.TypeDecimal, Precision: uint8(p), Scale: int8(sc)}, nil
	}
	if m := reFixed.FindStringSubmatch(name); m != nil {
		w, err := strconv.Atoi(m[1])
		if err != nil || w < 1 || w > 1<<30 {
			return tableformat.DataType{}, fmt.Errorf("%q: width must be positive", s)
		}
		return tableformat.DataType{Kind: tableformat.TypeFixedBinary, ByteWidth: int32(w)}, nil
	}
	return tableformat.DataType{}, fmt.Errorf("unknown type %q (use bool, int32, int64, uint64, float32, float64, utf8, binary, fixed_size_binary[N], timestamp[ms|us|ns, TZ], decimal128(P, S))", s)
}
