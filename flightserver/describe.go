package flightserver

import (
	"maps"

	"github.com/tsflight/tsflight/tableformat"
)

// fieldInfo describes one column in describe-table.
type fieldInfo struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// indexInfo describes the index in describe-table.
type indexInfo struct {
	Column        string   `json:"column"`
	Type          string   `json:"type"`
	Granularity   any      `json:"granularity"`
	EntityColumns []string `json:"entity_columns"`
	Timezone      *string  `json:"timezone"`
}

// formatInfo is the "format" object of describe-table: the protocol, the
// legacy format a table still has to be upgraded from (absent for protocol
// 7), the required features and whether the table needs upgrading before
// it can be written.
type formatInfo struct {
	Protocol       uint32   `json:"protocol"`
	LegacyFormat   uint32   `json:"legacy_format,omitempty"`
	ReaderFeatures []string `json:"reader_features"`
	WriterFeatures []string `json:"writer_features"`
	NeedsUpgrade   bool     `json:"needs_upgrade"`
}

// tableInfo is the result of describe-table.
type tableInfo struct {
	Table           string      `json:"table"`
	Version         uint64      `json:"version"`
	ProtocolVersion uint32      `json:"protocol_version"`
	ReaderFeatures  []string    `json:"reader_features"`
	WriterFeatures  []string    `json:"writer_features"`
	Format          formatInfo  `json:"format"`
	Schema          []fieldInfo `json:"schema"`
	Index           indexInfo   `json:"index"`
	Segments        int         `json:"segments"`
	Rows            uint64      `json:"rows"`
	Bytes           uint64      `json:"bytes"`
	CreatedAt       string      `json:"created_at"`
	// Properties are the table properties ({} when none).
	Properties map[string]string `json:"properties"`
}

func describe(name string, st *tableformat.State) (*tableInfo, error) {
	m := st.Meta
	ix := st.Index()
	info := &tableInfo{
		Table:           name,
		Version:         st.Version,
		ProtocolVersion: m.Protocol,
		ReaderFeatures:  append([]string{}, m.ReaderFeatures...),
		WriterFeatures:  append([]string{}, m.WriterFeatures...),
		Format: formatInfo{
			Protocol:       m.Protocol,
			LegacyFormat:   m.LegacyFormat,
			ReaderFeatures: append([]string{}, m.ReaderFeatures...),
			WriterFeatures: append([]string{}, m.WriterFeatures...),
			NeedsUpgrade:   m.NeedsUpgrade(),
		},
		Schema: []fieldInfo{},
		Index: indexInfo{
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
		info.Index.Granularity = ix.Kind.Time.String()
	} else {
		info.Index.Granularity = ix.Kind.Width
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
			info.Schema = append(info.Schema, fieldInfo{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable})
		}
	}
	return info, nil
}
