// The v6 → v7 conversion of one commit file, as the reference's migration
// script defines it (ttf-format.md, "v6 → v7 migration"): in every
// UpdateTableMeta, "format_version": 6 is replaced by "protocol_version": 7
// and two empty feature lists; in every index kind (the table's, and each
// UpdateTableCoverage's) "bucket" and "bucket_width" become
// "index_granularity" and the tag "u_int64" becomes "uint64". Every other
// member keeps its place and its bytes.

package tableformat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// convertCommitV6 returns commit data in the protocol-7 spelling. It
// refuses a commit that is not format 6 where it matters (an
// UpdateTableMeta without "format_version": 6, an index kind that is not
// in the bucket spelling). The result is checked by decoding it: it must
// be the same commit as data, with protocol-7 metadata.
func convertCommitV6(data []byte) ([]byte, error) {
	o, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	out, err := rewriteObject(nil, o, func(key string, raw json.RawMessage, b []byte) ([]byte, bool, error) {
		if key != "actions" {
			return b, false, nil
		}
		items, err := decodeArray(raw)
		if err != nil {
			return nil, false, fmt.Errorf("actions: %w", err)
		}
		b = appendKey(b, "actions")
		b = append(b, '[')
		for i, it := range items {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = convertActionV6(b, it); err != nil {
				return nil, false, fmt.Errorf("action %d: %w", i, err)
			}
		}
		return append(b, ']'), true, nil
	})
	if err != nil {
		return nil, err
	}
	if err := checkConverted(data, out); err != nil {
		return nil, err
	}
	return out, nil
}

// rewriteObject re-emits o member by member; edit may write a member
// itself (returning true) or leave it to be copied as it was.
func rewriteObject(b []byte, o *object, edit func(key string, raw json.RawMessage, b []byte) ([]byte, bool, error)) ([]byte, error) {
	b = append(b, '{')
	for _, f := range o.fields {
		nb, done, err := edit(f.key, f.value, b)
		if err != nil {
			return nil, err
		}
		if done {
			b = nb
			continue
		}
		b = appendKey(b, f.key)
		b = append(b, bytes.TrimSpace(f.value)...)
	}
	return append(b, '}'), nil
}

// convertActionV6 converts one action: UpdateTableMeta and
// UpdateTableCoverage are rewritten; any other action is copied.
func convertActionV6(b []byte, raw json.RawMessage) ([]byte, error) {
	ao, err := decodeObject(raw)
	if err != nil || len(ao.fields) != 1 {
		return append(b, bytes.TrimSpace(raw)...), nil
	}
	name, body := ao.fields[0].key, ao.fields[0].value
	var conv []byte
	switch name {
	case actUpdateTableMeta:
		conv, err = convertMetaV6(body)
	case actUpdateTableCoverage:
		conv, err = convertMemberKind(body, "index_kind")
	default:
		return append(b, bytes.TrimSpace(raw)...), nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	b = append(b, '{')
	b = appendKey(b, name)
	b = append(b, conv...)
	return append(b, '}'), nil
}

// convertMetaV6 converts a TableMeta: format_version (exactly 6) becomes
// the protocol-7 header in its place, and the index kind is renamed.
func convertMetaV6(raw json.RawMessage) ([]byte, error) {
	o, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	if fv := o.get("format_version"); fv == nil || string(bytes.TrimSpace(fv)) != "6" {
		return nil, fmt.Errorf("metadata is not format 6 (format_version %s)", preview(fv))
	}
	return rewriteObject(nil, o, func(key string, raw json.RawMessage, b []byte) ([]byte, bool, error) {
		switch key {
		case "format_version":
			b = appendKey(b, "protocol_version")
			b = fmt.Appendf(b, "%d", ProtocolVersion)
			b = appendKey(b, "required_reader_features")
			b = append(b, "[]"...)
			b = appendKey(b, "required_writer_features")
			return append(b, "[]"...), true, nil
		case "protocol_version", "required_reader_features", "required_writer_features":
			return nil, false, fmt.Errorf("metadata has both format_version and %s", key)
		case "kind":
			ko, err := decodeObject(raw)
			if err != nil {
				return nil, false, fmt.Errorf("kind: %w", err)
			}
			name, body, err := ko.single()
			if err != nil || name != "TimeSeries" {
				return nil, false, fmt.Errorf("kind: not a TimeSeries table")
			}
			spec, err := convertMemberKind(body, "kind")
			if err != nil {
				return nil, false, fmt.Errorf("kind: TimeSeries: %w", err)
			}
			b = appendKey(b, "kind")
			b = append(b, '{')
			b = appendKey(b, "TimeSeries")
			b = append(b, spec...)
			return append(b, '}'), true, nil
		}
		return b, false, nil
	})
}

// convertMemberKind rewrites the index kind held in member key of the
// object raw.
func convertMemberKind(raw json.RawMessage, key string) ([]byte, error) {
	o, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	found := false
	out, err := rewriteObject(nil, o, func(k string, v json.RawMessage, b []byte) ([]byte, bool, error) {
		if k != key {
			return b, false, nil
		}
		found = true
		kind, err := convertIndexKindV6(v)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", key, err)
		}
		b = appendKey(b, key)
		return append(b, kind...), true, nil
	})
	if err == nil && !found {
		err = fmt.Errorf("missing field %q", key)
	}
	return out, err
}

// convertIndexKindV6 renames bucket/bucket_width to index_granularity and
// the tag u_int64 to uint64.
func convertIndexKindV6(raw json.RawMessage) ([]byte, error) {
	o, err := decodeObject(raw)
	if err != nil {
		return nil, err
	}
	if o.get("bucket") == nil && o.get("bucket_width") == nil {
		return nil, fmt.Errorf("index kind is not in the format-6 spelling (no bucket or bucket_width)")
	}
	return rewriteObject(nil, o, func(k string, v json.RawMessage, b []byte) ([]byte, bool, error) {
		switch k {
		case "bucket", "bucket_width":
			b = appendKey(b, "index_granularity")
			return append(b, bytes.TrimSpace(v)...), true, nil
		case "index_granularity":
			return nil, false, fmt.Errorf("index kind has both %s and index_granularity", "bucket")
		case "type":
			if t, err := decodeString(v); err == nil && t == "u_int64" {
				b = appendKey(b, "type")
				return appendString(b, string(IndexUInt64)), true, nil
			}
		}
		return b, false, nil
	})
}

// checkConverted decodes both versions of a commit and requires the same
// commit, the converted one with protocol-7 metadata only.
func checkConverted(old, conv []byte) error {
	a, err := decodeCommit(old)
	if err != nil {
		return fmt.Errorf("the format-6 commit does not decode: %w", err)
	}
	b, err := decodeCommit(conv)
	if err != nil {
		return fmt.Errorf("the converted commit does not decode: %w", err)
	}
	for _, x := range b.Actions {
		switch x := x.(type) {
		case UpdateTableMeta:
			if x.Meta.NeedsUpgrade() {
				return fmt.Errorf("the converted commit still has format-6 metadata")
			}
		case UpdateTableCoverage:
			if x.Legacy {
				return fmt.Errorf("the converted commit still has a format-6 index kind")
			}
		}
	}
	a.stripLegacy()
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("the converted commit decodes to a different commit")
	}
	return nil
}

// stripLegacy clears the format-6 marks of c's actions, leaving the
// protocol-7 commit it stands for.
func (c *Commit) stripLegacy() {
	for i, a := range c.Actions {
		switch x := a.(type) {
		case UpdateTableMeta:
			x.Meta.LegacyFormat = 0
			c.Actions[i] = x
		case UpdateTableCoverage:
			x.Legacy = false
			c.Actions[i] = x
		}
	}
}
