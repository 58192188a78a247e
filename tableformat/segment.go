package tableformat

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// FormatParquet is the only segment file format.
const FormatParquet = "parquet"

// SegmentMeta describes one immutable data file of the table: the payload of
// an AddSegment action. The path is the segment's identity.
type SegmentMeta struct {
	// Path is canonical and relative to the table root.
	Path string
	// Format is always "parquet".
	Format string
	// Layout says whether the segment holds one identity or many.
	Layout EntityLayout
	// IndexMin and IndexMax are the inclusive observed bounds of the index
	// column.
	IndexMin IndexValue
	IndexMax IndexValue
	RowCount uint64
	// FileSize is the size in bytes, when known (omitted on disk if nil).
	FileSize *uint64
	// CoveragePath is the segment's coverage sidecar ("" = absent).
	CoveragePath string
}

// ValidatePath checks that p is a canonical table-relative path: not empty,
// not absolute, '/'-separated, without '.', '..' or empty components,
// backslashes or drive letters.
func ValidatePath(p string) error {
	if p == "" {
		return fmt.Errorf("path is empty")
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("path %q is absolute", p)
	}
	if strings.ContainsRune(p, '\\') {
		return fmt.Errorf("path %q contains a backslash", p)
	}
	if strings.ContainsRune(p, 0) {
		return fmt.Errorf("path %q contains a NUL byte", p)
	}
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "" || c == "." || c == "..":
			return fmt.Errorf("path %q has an empty, '.' or '..' component", p)
		case len(c) >= 2 && c[1] == ':' && (c[0]|0x20 >= 'a' && c[0]|0x20 <= 'z'):
			return fmt.Errorf("path %q has a drive-letter component", p)
		}
	}
	if path.Clean(p) != p {
		return fmt.Errorf("path %q is not in normal form", p)
	}
	return nil
}

// MarshalJSON writes the segment in the reference's field order.
func (s SegmentMeta) MarshalJSON() ([]byte, error) { return s.appendJSON(nil), nil }

func (s *SegmentMeta) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, "path")
	b = appendString(b, s.Path)
	b = appendKey(b, "format")
	b = appendString(b, s.Format)
	b = appendKey(b, "entity_layout")
	b = s.Layout.appendJSON(b)
	b = appendKey(b, "index_min")
	b = s.IndexMin.appendJSON(b)
	b = appendKey(b, "index_max")
	b = s.IndexMax.appendJSON(b)
	b = appendKey(b, "row_count")
	b = strconv.AppendUint(b, s.RowCount, 10)
	if s.FileSize != nil {
		b = appendKey(b, "file_size")
		b = strconv.AppendUint(b, *s.FileSize, 10)
	}
	if s.CoveragePath != "" {
		b = appendKey(b, "coverage_path")
		b = appendString(b, s.CoveragePath)
	}
	return append(b, '}')
}

// UnmarshalJSON reads a SegmentMeta.
func (s *SegmentMeta) UnmarshalJSON(data []byte) error {
	*s = SegmentMeta{}
	o, err := decodeObject(data)
	if err != nil {
		return err
	}
	raw, err := o.need("path")
	if err != nil {
		return err
	}
	if s.Path, err = decodeString(raw); err != nil {
		return fmt.Errorf("path: %w", err)
	}
	if raw, err = o.need("format"); err != nil {
		return err
	}
	if s.Format, err = decodeString(raw); err != nil {
		return fmt.Errorf("format: %w", err)
	}
	if s.Format != FormatParquet {
		return fmt.Errorf("format: unknown segment format %q", s.Format)
	}
	if raw, err = o.need("entity_layout"); err != nil {
		return err
	}
	if err := s.Layout.UnmarshalJSON(raw); err != nil {
		return err
	}
	for _, b := range []struct {
		key string
		dst *IndexValue
	}{{"index_min", &s.IndexMin}, {"index_max", &s.IndexMax}} {
		raw, err := o.need(b.key)
		if err != nil {
			return err
		}
		if err := b.dst.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("%s: %w", b.key, err)
		}
	}
	if raw, err = o.need("row_count"); err != nil {
		return err
	}
	if s.RowCount, err = decodeUint(raw, 64); err != nil {
		return fmt.Errorf("row_count: %w", err)
	}
	if raw := o.get("file_size"); raw != nil && !isNull(raw) {
		v, err := decodeUint(raw, 64)
		if err != nil {
			return fmt.Errorf("file_size: %w", err)
		}
		s.FileSize = &v
	}
	if raw := o.get("coverage_path"); raw != nil && !isNull(raw) {
		if s.CoveragePath, err = decodeString(raw); err != nil {
			return fmt.Errorf("coverage_path: %w", err)
		}
	}
	return nil
}
