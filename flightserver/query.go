package flightserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tsflight/tsflight/tableformat"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// ScanRequest is the JSON body of a CMD descriptor (and the content of a
// ticket): which rows of which table to read.
type ScanRequest struct {
	Table string `json:"table"`
	// Start and End bound the index, half-open: RFC 3339 strings for
	// timestamp tables, integers otherwise.
	Start json.RawMessage `json:"start,omitempty"`
	End   json.RawMessage `json:"end,omitempty"`
	// Columns to return, in order (all when empty).
	Columns []string `json:"columns,omitempty"`
	// Entity keeps rows whose entity columns equal these values
	// ({column: value}, any subset of the entity columns): the field the
	// coverage, gaps and last actions take too.
	Entity map[string]json.RawMessage `json:"entity,omitempty"`
	// Entities is the deprecated spelling of Entity, still accepted;
	// normalize moves it to Entity. A request may not give both.
	Entities map[string]json.RawMessage `json:"entities,omitempty"`
	// Version pins the snapshot (the newest when absent).
	Version *uint64 `json:"version,omitempty"`

	// entityField is the spelling the request used, for messages
	// ("entity" unless normalize found "entities").
	entityField string
}

// normalize moves the deprecated "entities" to Entity, refusing a request
// (what: "command", "ticket") that gives both spellings (ErrInvalidInput).
func (r *ScanRequest) normalize(what string) error {
	r.entityField = "entity"
	if r.Entities == nil {
		return nil
	}
	if r.Entity != nil {
		return invalidf(`%s: both "entity" and "entities" are given; send "entity" only ("entities" is its deprecated spelling)`, what)
	}
	r.Entity, r.Entities, r.entityField = r.Entities, nil, "entities"
	return nil
}

// MaxJSONBody bounds a JSON request body (an action body, a command
// descriptor, a ticket): every legitimate one is a few kilobytes.
const MaxJSONBody = 1 << 20

// maxJSONDepth bounds how deep a JSON request nests: tsflight's requests
// nest three levels at most.
const maxJSONDepth = 32

// decodeJSON decodes a JSON object into v, refusing unknown fields,
// duplicate keys, deep nesting, oversized bodies and trailing data with
// ErrInvalidInput errors that name the request (what).
func decodeJSON(what string, data []byte, v any) error {
	if len(data) > MaxJSONBody {
		return invalidf("%s: the JSON body is %d bytes; at most %d are accepted", what, len(data), MaxJSONBody)
	}
	key, dup, deep := duplicateKey(data)
	switch {
	case deep:
		return invalidf("%s: the JSON body nests deeper than %d levels", what, maxJSONDepth)
	case dup:
		return invalidf("%s: the JSON body gives %s more than once", what, catalog.QuoteName(key))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return invalidf("%s: malformed JSON body: %v%s", what, err, spellingHint(err, v))
	}
	if dec.More() {
		return invalidf("%s: unexpected data after the JSON body", what)
	}
	return nil
}

// spellingHint points a request that sent "entities" where only "entity"
// is taken (the actions) to the one spelling.
func spellingHint(err error, v any) string {
	if !strings.Contains(err.Error(), `unknown field "entities"`) {
		return ""
	}
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name == "entity" {
			return ` (the entity filter is spelled "entity")`
		}
	}
	return ""
}

// duplicateKey finds a key given twice in one object of a JSON value,
// comparing keys without case as encoding/json matches them to fields:
// {"apply": true, "APPLY": null} means different things to readers that
// keep the first, the last or one spelling, so it is refused. Malformed
// JSON reports nothing (the decoder says what is wrong).
//
// It also reports a value nested deeper than maxJSONDepth, without reading
// further (a 60 MB ticket of "[[[[…" once cost gigabytes).
func duplicateKey(data []byte) (key string, dup, deep bool) {
	type level struct {
		keys      map[string]bool // nil for an array
		expectKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*level
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false, false
		}
		if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
			if len(stack) >= maxJSONDepth {
				return "", false, true
			}
			l := &level{}
			if d == '{' {
				l.keys, l.expectKey = map[string]bool{}, true
			}
			stack = append(stack, l)
			continue
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
		} else if key, ok := tok.(string); ok && len(stack) > 0 && stack[len(stack)-1].expectKey {
			top := stack[len(stack)-1]
			k := strings.ToLower(key)
			if top.keys[k] {
				return key, true, false
			}
			top.keys[k] = true
			top.expectKey = false
			continue
		}
		// A value ended.
		if len(stack) == 0 {
			return "", false, false
		}
		if top := stack[len(stack)-1]; top.keys != nil {
			top.expectKey = true
		}
	}
}

// parseIndexValue reads one index bound for the table's index type.
func parseIndexValue(field string, raw json.RawMessage, ix *tableformat.IndexSpec) (tableformat.IndexValue, error) {
	raw = bytes.TrimSpace(raw)
	var s string
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return tableformat.IndexValue{}, invalidf("%s: %v", field, err)
		}
	} else {
		s = string(raw)
	}
	switch ix.Kind.Type {
	case tableformat.IndexTimestamp:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return tableformat.IndexValue{}, invalidf("%s: %q is not an RFC 3339 timestamp (for example 2024-06-01T00:00:00Z)", field, s)
		}
		return tableformat.TimeValue(t), nil
	case tableformat.IndexInt64:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return tableformat.IndexValue{}, invalidf("%s: %s is not a 64-bit integer (the index %q is int64)", field, s, ix.Column)
		}
		return tableformat.Int64Value(v), nil
	default:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return tableformat.IndexValue{}, invalidf("%s: %s is not an unsigned 64-bit integer (the index %q is uint64)", field, s, ix.Column)
		}
		return tableformat.Uint64Value(v), nil
	}
}

// parseEntityValue reads the value of entity column col; field names the
// request field ("entities" or "entity") in error messages.
func parseEntityValue(field, col string, raw json.RawMessage, st *tableformat.State) (tableformat.EntityValue, error) {
	ix := st.Index()
	if !slices.Contains(ix.EntityColumns, col) {
		if len(ix.EntityColumns) == 0 {
			return tableformat.EntityValue{}, invalidf("%s: the table has no entity columns (got %q)", field, col)
		}
		return tableformat.EntityValue{}, invalidf("%s: %q is not an entity column (entity columns: %s)", field, col, strings.Join(ix.EntityColumns, ", "))
	}
	if st.Schema() == nil {
		return tableformat.EntityValue{}, invalidf("%s: the table has no data yet", field)
	}
	f, _ := st.Schema().Column(col)
	raw = bytes.TrimSpace(raw)
	var s string
	quoted := len(raw) > 0 && raw[0] == '"'
	if quoted {
		if err := json.Unmarshal(raw, &s); err != nil {
			return tableformat.EntityValue{}, invalidf("%s.%s: %v", field, col, err)
		}
	} else {
		s = string(raw)
	}
	switch f.Type.Kind {
	case tableformat.TypeUtf8:
		if !quoted {
			return tableformat.EntityValue{}, invalidf("%s.%s: expected a string, got %s", field, col, raw)
		}
		return tableformat.EntityValue{Type: tableformat.EntityUtf8, Str: s}, nil
	case tableformat.TypeInt32:
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return tableformat.EntityValue{}, invalidf("%s.%s: %s is not a 32-bit integer", field, col, raw)
		}
		return tableformat.EntityValue{Type: tableformat.EntityInt32, Int: v}, nil
	case tableformat.TypeInt64:
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return tableformat.EntityValue{}, invalidf("%s.%s: %s is not a 64-bit integer", field, col, raw)
		}
		return tableformat.EntityValue{Type: tableformat.EntityInt64, Int: v}, nil
	default:
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return tableformat.EntityValue{}, invalidf("%s.%s: %s is not an unsigned 64-bit integer", field, col, raw)
		}
		return tableformat.EntityValue{Type: tableformat.EntityUInt64, Uint: v}, nil
	}
}

// scanOptions turns a request into scan options for st; its refusals are
// ErrInvalidInput errors naming the field.
func (s *Service) scanOptions(req *ScanRequest, st *tableformat.State) (tableformat.ScanOptions, error) {
	opts := tableformat.ScanOptions{Columns: columnsOf(req), BatchRows: s.opts.BatchRows, Parallelism: s.opts.ScanParallelism, Alloc: s.opts.ScanAlloc, Slots: s.slots}
	ix := st.Index()
	if len(req.Start) > 0 {
		v, err := parseIndexValue("start", req.Start, ix)
		if err != nil {
			return opts, err
		}
		opts.Start = &v
	}
	if len(req.End) > 0 {
		v, err := parseIndexValue("end", req.End, ix)
		if err != nil {
			return opts, err
		}
		opts.End = &v
	}
	if len(req.Entity) > 0 {
		field := req.entityField
		if field == "" {
			field = "entity"
		}
		opts.Entities = map[string]tableformat.EntityValue{}
		for col, raw := range req.Entity {
			v, err := parseEntityValue(field, col, raw, st)
			if err != nil {
				return opts, err
			}
			opts.Entities[col] = v
		}
	}
	return opts, nil
}

// columnsOf returns the requested output columns: nil (every column) when
// the request lists none, so that "columns": [] and an absent field agree.
func columnsOf(req *ScanRequest) []string {
	if len(req.Columns) == 0 {
		return nil
	}
	return req.Columns
}

// identityOf reads a complete identity {column: value} in entity-column
// order.
func identityOf(field string, m map[string]json.RawMessage, st *tableformat.State) (tableformat.Identity, error) {
	ix := st.Index()
	if len(ix.EntityColumns) == 0 {
		return nil, invalidf("%s: the table has no entity columns; leave %s out", field, field)
	}
	for col := range m {
		if !slices.Contains(ix.EntityColumns, col) {
			return nil, invalidf("%s: %q is not an entity column (entity columns: %s)", field, col, strings.Join(ix.EntityColumns, ", "))
		}
	}
	id := make(tableformat.Identity, len(ix.EntityColumns))
	for i, col := range ix.EntityColumns {
		raw, ok := m[col]
		if !ok {
			return nil, invalidf("%s: missing a value for entity column %q (give one for each of %s)", field, col, strings.Join(ix.EntityColumns, ", "))
		}
		v, err := parseEntityValue(field, col, raw, st)
		if err != nil {
			return nil, err
		}
		id[i] = v
	}
	return id, nil
}

// parseGranularity reads "10s", "1m", "1h", "1d" (or any human form the
// reference accepts) for timestamp tables and a positive integer for
// integer tables.
func parseGranularity(raw json.RawMessage, typ tableformat.IndexType) (tableformat.IndexKind, error) {
	k := tableformat.IndexKind{Type: typ}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return k, invalidf("granularity is required")
	}
	var s string
	quoted := raw[0] == '"'
	if quoted {
		if err := json.Unmarshal(raw, &s); err != nil {
			return k, invalidf("granularity: %v", err)
		}
	} else {
		s = string(raw)
	}
	if typ == tableformat.IndexTimestamp {
		if !quoted {
			if n, err := strconv.ParseUint(s, 10, 32); err == nil && n > 0 {
				k.Time = tableformat.TimeGranularity{Unit: tableformat.Seconds, N: uint32(n)}
				return k, nil
			}
		}
		g, err := tableformat.ParseTimeGranularity(s)
		if err != nil {
			// The table package's message names the granularity already.
			return k, invalidf("%s", strings.TrimPrefix(err.Error(), tableformat.ErrInvalidInput.Error()+": "))
		}
		k.Time = g
		return k, nil
	}
	w, err := strconv.ParseUint(s, 10, 64)
	if err != nil || w == 0 {
		return k, invalidf("granularity: %s is not a positive integer (an %s index takes an integer width)", raw, typ)
	}
	k.Width = w
	return k, nil
}
