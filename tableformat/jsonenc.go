package tableformat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"
)

// The log is written by serde_json in the reference implementation, and
// tsflight must produce the same bytes for the same values. encoding/json
// differs from serde_json in string escaping (<, >, &, U+2028, U+2029) and
// in how it orders and omits fields, so every log type writes itself with
// the small helpers below, and reads itself with [decodeObject], which keeps
// 64-bit integers exact and rejects duplicate keys as serde does.

// maxJSONDepth is the deepest nesting the reference implementation reads:
// serde_json's recursion limit of 128 refuses a document nested 128 levels
// deep (checked against timeseries-table-format 0.9.0: 127 opens, 128 does
// not).
const maxJSONDepth = 127

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string escaped exactly like serde_json:
// only '"', '\\' and control characters below 0x20 are escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var esc string
		switch {
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '\n':
			esc = `\n`
		case c == '\r':
			esc = `\r`
		case c == '\t':
			esc = `\t`
		case c == '\b':
			esc = `\b`
		case c == '\f':
			esc = `\f`
		case c < 0x20:
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			start = i + 1
			continue
		default:
			continue
		}
		b = append(b, s[start:i]...)
		b = append(b, esc...)
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendKey appends `"name":`, preceded by a comma unless the object is
// still empty (its last byte is '{').
func appendKey(b []byte, name string) []byte {
	if len(b) > 0 && b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = appendString(b, name)
	return append(b, ':')
}

// appendStringMap appends a JSON object with the keys in sorted order, as
// serde writes a BTreeMap.
func appendStringMap(b []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = append(b, '{')
	for _, k := range keys {
		b = appendKey(b, k)
		b = appendString(b, m[k])
	}
	return append(b, '}')
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// jsonDepth returns the deepest nesting of arrays and objects in a valid
// JSON document.
func jsonDepth(data []byte) int {
	depth, max, inString, escaped := 0, 0, false, false
	for _, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > max {
				max = depth
			}
		case '}', ']':
			depth--
		}
	}
	return max
}

// field is one member of a JSON object, in document order.
type field struct {
	key   string
	value json.RawMessage
}

// object is a decoded JSON object that remembers which members were used.
type object struct {
	fields []field
	used   []bool
}

var errNotObject = errors.New("expected a JSON object")

// decodeObject splits a JSON object into its members, rejecting duplicate
// keys (serde's "duplicate field").
func decodeObject(data []byte) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errNotObject
	}
	o := &object{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, ok := tok.(string)
		if !ok {
			return nil, errNotObject
		}
		if seen[key] {
			return nil, fmt.Errorf("duplicate field %q", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("field %q: %w", key, err)
		}
		o.fields = append(o.fields, field{key, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	o.used = make([]bool, len(o.fields))
	return o, nil
}

// get returns the raw value of key, or nil when absent.
func (o *object) get(key string) json.RawMessage {
	for i, f := range o.fields {
		if f.key == key {
			o.used[i] = true
			return f.value
		}
	}
	return nil
}

// need returns the raw value of key, or an error naming it when absent.
func (o *object) need(key string) (json.RawMessage, error) {
	v := o.get(key)
	if v == nil {
		return nil, fmt.Errorf("missing field %q", key)
	}
	return v, nil
}

// unknown returns an error naming the first member no get or need asked
// for, for types the reference decodes with deny_unknown_fields.
func (o *object) unknown() error {
	for i, f := range o.fields {
		if !o.used[i] {
			return fmt.Errorf("unknown field %q", f.key)
		}
	}
	return nil
}

// single returns the only key and value of an externally tagged enum.
func (o *object) single() (string, json.RawMessage, error) {
	if len(o.fields) != 1 {
		return "", nil, fmt.Errorf("expected an object with exactly one key, found %d", len(o.fields))
	}
	o.used[0] = true
	return o.fields[0].key, o.fields[0].value, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func decodeString(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", fmt.Errorf("expected a string, found %s", preview(raw))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	if !utf8.ValidString(s) {
		return "", errors.New("string is not valid UTF-8")
	}
	return s, nil
}

func decodeBool(raw json.RawMessage) (bool, error) {
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("expected a boolean, found %s", preview(raw))
}

// decodeUint parses a JSON integer literal exactly into bits bits.
func decodeUint(raw json.RawMessage, bits int) (uint64, error) {
	s := string(bytes.TrimSpace(raw))
	v, err := strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("expected an unsigned %d-bit integer, found %s", bits, preview(raw))
	}
	return v, nil
}

// decodeInt parses a JSON integer literal exactly into bits bits.
func decodeInt(raw json.RawMessage, bits int) (int64, error) {
	s := string(bytes.TrimSpace(raw))
	v, err := strconv.ParseInt(s, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("expected a signed %d-bit integer, found %s", bits, preview(raw))
	}
	return v, nil
}

func decodeStringMap(raw json.RawMessage) (map[string]string, error) {
	if raw == nil || isNull(raw) {
		return nil, nil
	}
	o, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(o.fields))
	for _, f := range o.fields {
		s, err := decodeString(f.value)
		if err != nil {
			return nil, fmt.Errorf("metadata %q: %w", f.key, err)
		}
		m[f.key] = s
	}
	if len(m) == 0 {
		return nil, nil
	}
	return m, nil
}

func decodeArray(raw json.RawMessage) ([]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, fmt.Errorf("expected an array, found %s", preview(raw))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	return items, nil
}

func decodeStrings(raw json.RawMessage) ([]string, error) {
	items, err := decodeArray(raw)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(items))
	for i, it := range items {
		if out[i], err = decodeString(it); err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
	}
	return out, nil
}

func preview(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 40 {
		return string(raw[:40]) + "…"
	}
	if len(raw) == 0 {
		return "nothing"
	}
	return string(raw)
}

// formatTime writes t in UTC the way chrono serializes a DateTime<Utc>:
// RFC 3339 with a "Z", and a fraction of 3, 6 or 9 digits only when the
// sub-second part is not zero (chrono's SecondsFormat::AutoSi).
func formatTime(t time.Time) string {
	return string(appendTime(nil, t))
}

func appendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year := t.Year()
	if year >= 0 && year <= 9999 {
		b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10))
	} else {
		// chrono writes years outside 0..=9999 with a sign and at least
		// four digits.
		if year < 0 {
			b = append(b, '-')
			year = -year
		} else {
			b = append(b, '+')
		}
		b = append(b, fmt.Sprintf("%04d", year)...)
	}
	b = t.AppendFormat(b, "-01-02T15:04:05")
	ns := t.Nanosecond()
	switch {
	case ns == 0:
	case ns%1_000_000 == 0:
		b = append(b, fmt.Sprintf(".%03d", ns/1_000_000)...)
	case ns%1_000 == 0:
		b = append(b, fmt.Sprintf(".%06d", ns/1_000)...)
	default:
		b = append(b, fmt.Sprintf(".%09d", ns)...)
	}
	return append(b, 'Z')
}

// parseTime reads an RFC 3339 timestamp with any offset, as chrono does.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("expected an RFC 3339 timestamp, found %q", s)
	}
	return t.UTC(), nil
}

func decodeTime(raw json.RawMessage) (time.Time, error) {
	s, err := decodeString(raw)
	if err != nil {
		return time.Time{}, err
	}
	return parseTime(s)
}
