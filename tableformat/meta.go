package tableformat

import (
	"fmt"
	"slices"
	"time"
)

// ProtocolVersion is the only table protocol this package reads and writes.
// NB: on-disk value; bump only when an older client could no longer find or
// parse the compatibility header (seed 000), never for a feature.
const ProtocolVersion = 7

// Feature names this build knows.
const (
	// FeatureSchemaAddColumns (reader): nullable top-level columns were
	// added after the schema was established; older segments read null
	// for them.
	FeatureSchemaAddColumns = "schema_add_columns"
	// FeatureSchemaMetadata (reader and writer): the schema or a field
	// carries string annotations. timeseries-table-format 0.9.0 declares
	// it whenever an appended Arrow schema has metadata (pandas metadata,
	// for example), so tsflight supports it to open such tables.
	FeatureSchemaMetadata = "schema_metadata"
)

var (
	supportedReaderFeatures = []string{FeatureSchemaAddColumns, FeatureSchemaMetadata}
	supportedWriterFeatures = []string{FeatureSchemaMetadata}
)

// SupportedReaderFeatures returns the reader features this build supports.
func SupportedReaderFeatures() []string { return slices.Clone(supportedReaderFeatures) }

// SupportedWriterFeatures returns the writer features this build supports.
func SupportedWriterFeatures() []string { return slices.Clone(supportedWriterFeatures) }

// TableMeta is the table's metadata. Every UpdateTableMeta action carries a
// complete replacement of it.
type TableMeta struct {
	// Index is the time-series index spec. nil means the reserved
	// "Generic" kind, which no reader accepts.
	Index *IndexSpec
	// Schema is nil until the first append adopts one (or the table was
	// created with one).
	Schema    *Schema
	CreatedAt time.Time
	// Protocol is the protocol version (7).
	Protocol uint32
	// ReaderFeatures and WriterFeatures are sorted, unique, and never nil
	// on disk.
	ReaderFeatures []string
	WriterFeatures []string
	// LegacyFormat is 6 for metadata read from a format-6 table
	// (timeseries-table-format 0.5 and older: "format_version": 6 and the
	// bucket spellings of the index kind) and 0 for protocol-7 metadata.
	// Such metadata is held as its protocol-7 equivalent (Protocol 7, no
	// features), which is what upgrading writes; the table is read-only
	// until then (CheckWrite refuses it).
	LegacyFormat uint32
}

// LegacyFormatVersion is the only legacy format this package reads.
const LegacyFormatVersion = 6

// NeedsUpgrade reports whether the metadata came from a legacy (format-6)
// table that must be upgraded before it can be written.
func (m *TableMeta) NeedsUpgrade() bool { return m.LegacyFormat != 0 }

// upgradeHint is what every refused write on a format-6 table says.
const upgradeHint = "this is a format-6 table (timeseries-table-format 0.5 or older), read-only until it is upgraded: run `tsflight upgrade TABLE` (or the Flight action \"upgrade\")"

// Clone returns a deep-enough copy for building a replacement: slices and
// the spec are copied, the schema is shared (schemas are never mutated in
// place).
func (m *TableMeta) Clone() *TableMeta {
	c := *m
	if m.Index != nil {
		ix := *m.Index
		ix.EntityColumns = slices.Clone(m.Index.EntityColumns)
		c.Index = &ix
	}
	c.ReaderFeatures = slices.Clone(m.ReaderFeatures)
	c.WriterFeatures = slices.Clone(m.WriterFeatures)
	return &c
}

// HasReaderFeature reports whether name is a required reader feature.
func (m *TableMeta) HasReaderFeature(name string) bool {
	return slices.Contains(m.ReaderFeatures, name)
}

// validFeatureName reports whether s matches [a-z][a-z0-9_]*.
func validFeatureName(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validateFeatureList checks names, order and uniqueness.
func validateFeatureList(which string, list []string) error {
	for i, f := range list {
		if !validFeatureName(f) {
			return fmt.Errorf("%s feature %q does not match [a-z][a-z0-9_]*", which, f)
		}
		if i > 0 {
			switch {
			case list[i-1] == f:
				return fmt.Errorf("%s feature %q is listed twice", which, f)
			case list[i-1] > f:
				return fmt.Errorf("%s features are not sorted (%q before %q)", which, list[i-1], f)
			}
		}
	}
	return nil
}

func unsupported(required, supported []string) []string {
	var out []string
	for _, f := range required {
		if !slices.Contains(supported, f) {
			out = append(out, f)
		}
	}
	return out
}

// CheckRead is the reader compatibility check of seed 000: protocol 7 and
// every required reader feature supported.
func (m *TableMeta) CheckRead() error {
	if m.Protocol != ProtocolVersion {
		return &ProtocolError{Reason: fmt.Sprintf("protocol version %d (this build reads and writes only %d)", m.Protocol, ProtocolVersion)}
	}
	if u := unsupported(m.ReaderFeatures, supportedReaderFeatures); len(u) > 0 {
		return &ProtocolError{Reason: "the table requires reader features this build does not support", Features: u}
	}
	return nil
}

// CheckWrite is the writer check: the reader check plus every required
// writer feature supported. Every mutation runs it before it reads its
// input or creates any file.
func (m *TableMeta) CheckWrite() error {
	if m.NeedsUpgrade() {
		return fmt.Errorf("%w: %s", ErrNeedsUpgrade, upgradeHint)
	}
	if err := m.CheckRead(); err != nil {
		return err
	}
	if u := unsupported(m.WriterFeatures, supportedWriterFeatures); len(u) > 0 {
		return &ProtocolError{Reason: "the table requires writer features this build does not support", Features: u}
	}
	return nil
}

// validate checks a metadata value on its own: kind, spec, feature lists,
// schema, schema against index, and declared annotations.
func (m *TableMeta) validate() error {
	if m.Index == nil {
		return fmt.Errorf("table kind is Generic; only TimeSeries tables are supported")
	}
	if err := m.Index.Validate(); err != nil {
		return err
	}
	if err := validateFeatureList("reader", m.ReaderFeatures); err != nil {
		return err
	}
	if err := validateFeatureList("writer", m.WriterFeatures); err != nil {
		return err
	}
	if m.Schema == nil {
		return nil
	}
	if err := m.Schema.validate(); err != nil {
		return err
	}
	if err := checkSchemaMatchesIndex(m.Schema, m.Index); err != nil {
		return err
	}
	if m.Schema.HasMetadata() && !(slices.Contains(m.ReaderFeatures, FeatureSchemaMetadata) && slices.Contains(m.WriterFeatures, FeatureSchemaMetadata)) {
		return fmt.Errorf("schema carries annotations but %q is not declared as both a reader and a writer feature", FeatureSchemaMetadata)
	}
	return nil
}

// checkSchemaMatchesIndex: the index column exists with the type of its
// domain, and each entity column exists as Utf8, Int32, Int64 or UInt64.
func checkSchemaMatchesIndex(s *Schema, ix *IndexSpec) error {
	col, ok := s.Column(ix.Column)
	if !ok {
		return fmt.Errorf("index column %q is not in the schema", ix.Column)
	}
	want := map[IndexType]TypeKind{IndexTimestamp: TypeTimestamp, IndexInt64: TypeInt64, IndexUInt64: TypeUInt64}[ix.Kind.Type]
	if col.Type.Kind != want {
		return fmt.Errorf("index column %q has type %s; a %s index needs %s", ix.Column, col.Type.Kind, ix.Kind.Type, want)
	}
	for _, name := range ix.EntityColumns {
		c, ok := s.Column(name)
		if !ok {
			return fmt.Errorf("entity column %q is not in the schema", name)
		}
		switch c.Type.Kind {
		case TypeUtf8, TypeInt32, TypeInt64, TypeUInt64:
		default:
			return fmt.Errorf("entity column %q has type %s; entity columns must be Utf8, Int32, Int64 or UInt64", name, c.Type.Kind)
		}
	}
	return nil
}

// checkTransition validates replacing prev by next: the protocol never
// goes down, no feature is removed, the index spec never changes, a schema
// is never removed, and a changed schema is the old one plus nullable
// top-level columns with schema_add_columns declared.
func checkTransition(prev, next *TableMeta) error {
	if prev.LegacyFormat != next.LegacyFormat {
		return &ProtocolError{corrupt: true, Reason: fmt.Sprintf("the log mixes format-6 and protocol-7 metadata (format %d, then %d)", legacyOr7(prev), legacyOr7(next))}
	}
	if next.Protocol < prev.Protocol {
		return &ProtocolError{corrupt: true, Reason: fmt.Sprintf("protocol version decreased from %d to %d", prev.Protocol, next.Protocol)}
	}
	if gone := unsupported(prev.ReaderFeatures, next.ReaderFeatures); len(gone) > 0 {
		return &ProtocolError{corrupt: true, Reason: "reader features were removed", Features: gone}
	}
	if gone := unsupported(prev.WriterFeatures, next.WriterFeatures); len(gone) > 0 {
		return &ProtocolError{corrupt: true, Reason: "writer features were removed", Features: gone}
	}
	if prev.Index != nil && next.Index != nil && !prev.Index.equal(next.Index) {
		return fmt.Errorf("the index spec changed")
	}
	switch {
	case prev.Schema == nil:
		return nil
	case next.Schema == nil:
		return fmt.Errorf("the logical schema was removed")
	case prev.Schema.Equal(next.Schema):
		return nil
	}
	p, n := prev.Schema, next.Schema
	if len(n.Columns) <= len(p.Columns) || !slices.EqualFunc(p.Columns, n.Columns[:len(p.Columns)], Field.Equal) {
		return fmt.Errorf("the logical schema changed in a way other than adding columns at the end")
	}
	if len(p.Metadata) > 0 || len(n.Metadata) > 0 {
		if !p.Equal(&Schema{Columns: p.Columns, Metadata: n.Metadata}) {
			return fmt.Errorf("the schema annotations changed")
		}
	}
	for _, f := range n.Columns[len(p.Columns):] {
		if !f.Nullable {
			return fmt.Errorf("added column %q is not nullable", f.Name)
		}
	}
	if !slices.Contains(next.ReaderFeatures, FeatureSchemaAddColumns) {
		return fmt.Errorf("columns were added without declaring reader feature %q", FeatureSchemaAddColumns)
	}
	return nil
}

// legacyOr7 names the format of m for messages.
func legacyOr7(m *TableMeta) uint32 {
	if m.LegacyFormat != 0 {
		return m.LegacyFormat
	}
	return m.Protocol
}

func (s *IndexSpec) equal(o *IndexSpec) bool {
	return s.Column == o.Column && slices.Equal(s.EntityColumns, o.EntityColumns) && s.Kind.Equal(o.Kind)
}

// ---- JSON ----

// MarshalJSON writes the metadata in the reference's field order.
func (m TableMeta) MarshalJSON() ([]byte, error) { return m.appendJSON(nil), nil }

func (m *TableMeta) appendJSON(b []byte) []byte {
	b = append(b, '{')
	b = appendKey(b, "kind")
	if m.Index == nil {
		b = appendString(b, "Generic")
	} else {
		b = append(b, '{')
		b = appendKey(b, "TimeSeries")
		b = m.Index.appendJSON(b)
		b = append(b, '}')
	}
	b = appendKey(b, "logical_schema")
	if m.Schema == nil {
		b = append(b, "null"...)
	} else {
		b = m.Schema.appendJSON(b)
	}
	b = appendKey(b, "created_at")
	b = append(b, '"')
	b = appendTime(b, m.CreatedAt)
	b = append(b, '"')
	b = appendKey(b, "protocol_version")
	b = fmt.Appendf(b, "%d", m.Protocol)
	b = appendKey(b, "required_reader_features")
	b = appendStrings(b, nonNil(m.ReaderFeatures))
	b = appendKey(b, "required_writer_features")
	b = appendStrings(b, nonNil(m.WriterFeatures))
	return append(b, '}')
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// UnmarshalJSON reads protocol-7 metadata, or format-6 metadata (the
// field "format_version": 6 instead of the three protocol fields, and the
// index kind in the bucket spelling), which it holds as its protocol-7
// equivalent with LegacyFormat 6. Unknown extra keys are ignored. The
// protocol version is checked before anything else is decoded.
func (m *TableMeta) UnmarshalJSON(data []byte) error {
	*m = TableMeta{}
	o, err := decodeObject(data)
	if err != nil {
		return err
	}
	legacy := false
	if raw := o.get("format_version"); raw != nil {
		if err := m.decodeLegacyHeader(o, raw); err != nil {
			return err
		}
		legacy = true
	} else if err := m.decodeHeader(o); err != nil {
		return err
	}
	if err := m.decodePayload(o, legacy); err != nil {
		return err
	}
	return nil
}

// decodeLegacyHeader reads the header of format-6 metadata: format_version
// must be exactly 6 and none of the protocol-7 fields may be present.
func (m *TableMeta) decodeLegacyHeader(o *object, raw []byte) error {
	fv, err := decodeUint(raw, 32)
	if err != nil {
		return fmt.Errorf("format_version: %w", err)
	}
	if fv != LegacyFormatVersion {
		return &ProtocolError{Reason: fmt.Sprintf("legacy format_version %d (this build reads format %d and protocol %d)", fv, LegacyFormatVersion, ProtocolVersion)}
	}
	for _, k := range []string{"protocol_version", "required_reader_features", "required_writer_features"} {
		if o.get(k) != nil {
			return &ProtocolError{corrupt: true, Reason: fmt.Sprintf("metadata has both the legacy field \"format_version\" and %q", k)}
		}
	}
	m.Protocol = ProtocolVersion
	m.ReaderFeatures = []string{}
	m.WriterFeatures = []string{}
	m.LegacyFormat = LegacyFormatVersion
	return nil
}

// decodeHeader reads the protocol-7 compatibility header and refuses
// unsupported reader features before the payload is interpreted.
func (m *TableMeta) decodeHeader(o *object) error {
	raw, err := o.need("protocol_version")
	if err != nil {
		return err
	}
	pv, err := decodeUint(raw, 32)
	if err != nil {
		return fmt.Errorf("protocol_version: %w", err)
	}
	m.Protocol = uint32(pv)
	if m.Protocol != ProtocolVersion {
		return &ProtocolError{Reason: fmt.Sprintf("protocol version %d (this build reads and writes only %d)", m.Protocol, ProtocolVersion)}
	}
	for _, fl := range []struct {
		key string
		dst *[]string
	}{{"required_reader_features", &m.ReaderFeatures}, {"required_writer_features", &m.WriterFeatures}} {
		raw, err := o.need(fl.key)
		if err != nil {
			return err
		}
		if isNull(raw) {
			return fmt.Errorf("%s must be a list, found null", fl.key)
		}
		if *fl.dst, err = decodeStrings(raw); err != nil {
			return fmt.Errorf("%s: %w", fl.key, err)
		}
	}
	if err := validateFeatureList("reader", m.ReaderFeatures); err != nil {
		return &ProtocolError{corrupt: true, Reason: err.Error()}
	}
	if err := validateFeatureList("writer", m.WriterFeatures); err != nil {
		return &ProtocolError{corrupt: true, Reason: err.Error()}
	}
	// Refuse unsupported reader features before the payload that may
	// depend on them (even the schema) is interpreted.
	if u := unsupported(m.ReaderFeatures, supportedReaderFeatures); len(u) > 0 {
		return &ProtocolError{Reason: "the table requires reader features this build does not support", Features: u}
	}
	return nil
}

// decodePayload reads kind, logical_schema and created_at; legacy selects
// the format-6 spelling of the index kind.
func (m *TableMeta) decodePayload(o *object, legacy bool) error {
	var raw []byte
	var err error
	if raw, err = o.need("kind"); err != nil {
		return err
	}
	if s, err := decodeString(raw); err == nil {
		if s != "Generic" {
			return fmt.Errorf("kind: unknown table kind %q", s)
		}
	} else {
		ko, err := decodeObject(raw)
		if err != nil {
			return fmt.Errorf("kind: %w", err)
		}
		name, body, err := ko.single()
		if err != nil {
			return fmt.Errorf("kind: %w", err)
		}
		if name != "TimeSeries" {
			return fmt.Errorf("kind: unknown table kind %q", name)
		}
		m.Index = new(IndexSpec)
		if err := m.Index.decode(body, legacy); err != nil {
			return fmt.Errorf("kind: TimeSeries: %w", err)
		}
	}
	if raw, err = o.need("logical_schema"); err != nil {
		return err
	}
	if !isNull(raw) {
		m.Schema = new(Schema)
		if err := m.Schema.UnmarshalJSON(raw); err != nil {
			return err
		}
	}
	if raw, err = o.need("created_at"); err != nil {
		return err
	}
	if m.CreatedAt, err = decodeTime(raw); err != nil {
		return fmt.Errorf("created_at: %w", err)
	}
	return nil
}
