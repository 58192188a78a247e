package tableformat

import (
	"context"
	"slices"
)

// AddColumns appends nullable top-level columns to the table schema in one
// metadata-only commit, declaring the schema_add_columns reader feature in
// the same commit (seed 000). No data or coverage file is read or
// rewritten; segments written before read null for the new columns.
//
// It works on the handle's current snapshot without refreshing or retrying:
// if the table moved on, it fails with ErrConflict. The request must hold
// at least one field; names are exact (blank, duplicate or existing names
// are refused); every field must be nullable and convert exactly to Arrow
// and back (Int96 and Other cannot). The table must already have a schema.
func (t *Table) AddColumns(ctx context.Context, fields []Field) (uint64, error) {
	st := t.State()
	if err := st.Meta.CheckWrite(); err != nil {
		return 0, err
	}
	if len(fields) == 0 {
		return 0, invalidf("add-columns needs at least one column")
	}
	old := st.Schema()
	if old == nil {
		return 0, invalidf("the table has no schema yet; its first append establishes one, then columns can be added")
	}
	seen := map[string]bool{}
	for i, f := range fields {
		switch {
		case isBlank(f.Name):
			return 0, invalidf("column %d has a blank name", i)
		case seen[f.Name]:
			return 0, invalidf("column %q is listed twice", f.Name)
		case !f.Nullable:
			return 0, invalidf("column %q must be nullable: existing rows have no value for it", f.Name)
		}
		if _, exists := old.Column(f.Name); exists {
			return 0, invalidf("column %q already exists", f.Name)
		}
		seen[f.Name] = true
		if err := f.Type.validate(); err != nil {
			return 0, invalidf("column %q: %v", f.Name, err)
		}
	}
	next := &Schema{Columns: append(slices.Clone(old.Columns), fields...), Metadata: old.Metadata}
	as, err := ArrowSchema(next)
	if err != nil {
		return 0, err
	}
	back, err := LogicalFromArrow(as)
	if err != nil {
		return 0, err
	}
	if !back.Equal(next) {
		return 0, invalidf("the new columns do not round-trip exactly through Arrow")
	}
	m := st.Meta.Clone()
	m.Schema = next
	m.ReaderFeatures = addFeature(m.ReaderFeatures, FeatureSchemaAddColumns)
	if next.HasMetadata() {
		m.ReaderFeatures = addFeature(m.ReaderFeatures, FeatureSchemaMetadata)
		m.WriterFeatures = addFeature(m.WriterFeatures, FeatureSchemaMetadata)
	}
	return t.Commit(ctx, st.Version, []Action{UpdateTableMeta{Meta: *m}})
}
