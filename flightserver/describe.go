package flightserver

import (
	"encoding/json"
	"maps"
	"strconv"

	"github.com/tsflight/tsflight/tableformat"
)

// ColumnDescription describes one column in describe-table.
type ColumnDescription struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// IndexDescription describes the index in describe-table. Granularity is
// the time granularity of a timestamp index as a Go duration ("10s"), or
// the bucket width of an integer index as a JSON number.
type IndexDescription struct {
	Column        string          `json:"column"`
	Type          string          `json:"type"`
	Granularity   json.RawMessage `json:"granularity"`
	EntityColumns []string        `json:"entity_columns"`
	Timezone      *string         `json:"timezone"`
}

// FormatDescription is the "format" object of describe-table: the protocol, the
// legacy format a table still has to be upgraded from (absent for protocol
// 7), the required features and whether the table needs upgrading before
// it can be written.
type FormatDescription struct {
	Protocol       uint32   `json:"protocol"`
	LegacyFormat   uint32   `json:"legacy_format,omitempty"`
	ReaderFeatures []string `json:"reader_features"`
	WriterFeatures []string `json:"writer_features"`
	NeedsUpgrade   bool     `json:"needs_upgrade"`
}

// TableDescription is the answer of describe-table (without its
// "maintenance" object), shared by the action and the CLI's describe.
type TableDescription struct {
	Table           string              `json:"table"`
	Version         uint64              `json:"version"`
	ProtocolVersion uint32              `json:"protocol_version"`
	ReaderFeatures  []string            `json:"reader_features"`
	WriterFeatures  []string            `json:"writer_features"`
	Format          FormatDescription   `json:"format"`
	Schema          []ColumnDescription `json:"schema"`
	Index           IndexDescription    `json:"index"`
	Segments        int                 `json:"segments"`
	Rows            uint64              `json:"rows"`
	Bytes           uint64              `json:"bytes"`
	CreatedAt       string              `json:"created_at"`
	// Properties are the table properties ({} when none).
	Properties map[string]string `json:"properties"`
}

func describe(name string, st *tableformat.State) (*TableDescription, error) {
	m := st.Meta
	ix := st.Index()
	info := &TableDescription{
		Table:           name,
		Version:         st.Version,
		ProtocolVersion: m.Protocol,
		ReaderFeatures:  append([]string{}, m.ReaderFeatures...),
		WriterFeatures:  append([]string{}, m.WriterFeatures...),
		Format: FormatDescription{
			Protocol:       m.Protocol,
			LegacyFormat:   m.LegacyFormat,
			ReaderFeatures: append([]string{}, m.ReaderFeatures...),
			WriterFeatures: append([]string{}, m.WriterFeatures...),
			NeedsUpgrade:   m.NeedsUpgrade(),
		},
		Schema: []ColumnDescription{},
		Index: IndexDescription{
			Column:        ix.Column,
			Type:          string(ix.Kind.Type),
			EntityColumns: append([]string{}, ix.EntityColumns...),
			Timezone:      ix.Kind.Timezone,
		},
		Segments:   len(st.Segments),
		Rows:       st.RowCount(),
		CreatedAt:  m.CreatedAt.UTC().Format("2006-01-02T15:04:05.999999999Z07:00"),
		Properties: maps.Clone(st.Properties),
	}
	if info.Properties == nil {
		info.Properties = map[string]string{}
	}
	if ix.Kind.Type == tableformat.IndexTimestamp {
		info.Index.Granularity = json.RawMessage(strconv.Quote(ix.Kind.Time.String()))
	} else {
		info.Index.Granularity = json.RawMessage(strconv.FormatUint(uint64(ix.Kind.Width), 10))
	}
	for _, seg := range st.Segments {
		if seg.FileSize != nil {
			info.Bytes += *seg.FileSize
		}
	}
	if st.Schema() != nil {
		as, err := tableformat.ArrowSchema(st.Schema())
		if err != nil {
			return nil, err
		}
		for _, f := range as.Fields() {
			info.Schema = append(info.Schema, ColumnDescription{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable})
		}
	}
	return info, nil
}
