//go:build duckdb_arrow

package flightsql

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// goValue converts one value of a bound parameter column to what DuckDB
// binds: nil, bool, int64, uint64, float64, string, []byte or time.Time.
func goValue(a arrow.Array, i int) (any, error) {
	if a.IsNull(i) {
		return nil, nil
	}
	switch a := a.(type) {
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Int8:
		return int64(a.Value(i)), nil
	case *array.Int16:
		return int64(a.Value(i)), nil
	case *array.Int32:
		return int64(a.Value(i)), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Uint8:
		return uint64(a.Value(i)), nil
	case *array.Uint16:
		return uint64(a.Value(i)), nil
	case *array.Uint32:
		return uint64(a.Value(i)), nil
	case *array.Uint64:
		return a.Value(i), nil
	case *array.Float32:
		return float64(a.Value(i)), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.String:
		return a.Value(i), nil
	case *array.LargeString:
		return a.Value(i), nil
	case *array.StringView:
		return a.Value(i), nil
	case *array.Binary:
		return append([]byte(nil), a.Value(i)...), nil
	case *array.LargeBinary:
		return append([]byte(nil), a.Value(i)...), nil
	case *array.Date32:
		return a.Value(i).ToTime().UTC(), nil
	case *array.Date64:
		return a.Value(i).ToTime().UTC(), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC(), nil
	case *array.Decimal128:
		dt := a.DataType().(*arrow.Decimal128Type)
		f, err := strconv.ParseFloat(a.Value(i).ToString(dt.Scale), 64)
		if err != nil {
			return nil, err
		}
		return f, nil
	case *array.Dictionary:
		return goValue(a.Dictionary(), a.GetValueIndex(i))
	case *array.DenseUnion:
		return goValue(a.Field(a.ChildID(i)), int(a.ValueOffset(i)))
	}
	return nil, fmt.Errorf("Arrow type %s cannot be bound as a parameter", a.DataType())
}

// wireValue is a parameter value inside a statement ticket: a type tag and
// the value as text, so that the ticket round-trips every value exactly.
type wireValue [2]string

func encodeArgs(args []any) ([]wireValue, error) {
	if len(args) == 0 {
		return nil, nil
	}
	out := make([]wireValue, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case nil:
			out[i] = wireValue{"null", ""}
		case bool:
			out[i] = wireValue{"bool", strconv.FormatBool(v)}
		case int64:
			out[i] = wireValue{"int", strconv.FormatInt(v, 10)}
		case uint64:
			out[i] = wireValue{"uint", strconv.FormatUint(v, 10)}
		case float64:
			out[i] = wireValue{"float", strconv.FormatFloat(v, 'g', -1, 64)}
		case string:
			out[i] = wireValue{"str", v}
		case []byte:
			out[i] = wireValue{"bytes", base64.StdEncoding.EncodeToString(v)}
		case time.Time:
			out[i] = wireValue{"time", v.UTC().Format(time.RFC3339Nano)}
		default:
			return nil, internalf("parameter %d: unexpected Go type %T", i+1, a)
		}
	}
	return out, nil
}

func decodeArgs(ws []wireValue) ([]any, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	out := make([]any, len(ws))
	for i, w := range ws {
		var err error
		switch w[0] {
		case "null":
		case "bool":
			out[i], err = strconv.ParseBool(w[1])
		case "int":
			out[i], err = strconv.ParseInt(w[1], 10, 64)
		case "uint":
			out[i], err = strconv.ParseUint(w[1], 10, 64)
		case "float":
			out[i], err = strconv.ParseFloat(w[1], 64) // "NaN", "+Inf" included
		case "str":
			out[i] = w[1]
		case "bytes":
			out[i], err = base64.StdEncoding.DecodeString(w[1])
		case "time":
			out[i], err = time.Parse(time.RFC3339Nano, w[1])
		default:
			err = fmt.Errorf("unknown type %q", w[0])
		}
		if err != nil {
			return nil, invalidf("the ticket's parameter %d is malformed: %v", i+1, err)
		}
	}
	return out, nil
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
