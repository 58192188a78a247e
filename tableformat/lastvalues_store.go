package tableformat

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/tsflight/tsflight/coverage"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// The persisted last-value index: one Parquet file per version in
// _timeseries_log/_last (docs/format/last-values.md). It is a cache of the
// log, like a checkpoint: one that is missing, damaged or stale is
// ignored and the index is rebuilt from the coverage sidecars and the
// segments.

// lastDir is the directory of the persisted last-value indexes.
const lastDir = LogDir + "/_last"

// lastMetaKey is the Parquet key-value metadata key of the index's own
// description.
const lastMetaKey = "tsflight.last_values"

// lastKeep is how many persisted indexes are kept regardless of age, and
// lastGrace how long any other stays (a query planned on it may still be
// about to read it).
const (
	lastKeep  = 3
	lastGrace = 10 * time.Minute
)

var (
	reLastFile = regexp.MustCompile(`^[0-9]{20}\.parquet$`)
	reLastTemp = regexp.MustCompile(`^\.[0-9]{20}\.parquet\.partial-[0-9a-f]{16}$`)
)

// LastValuesPath is the table-relative path of the persisted last-value
// index of version v.
func LastValuesPath(v uint64) string { return fmt.Sprintf("%s/%020d.parquet", lastDir, v) }

// lastMeta is the JSON under lastMetaKey.
type lastMeta struct {
	Format   int      `json:"format"`
	Version  uint64   `json:"version"`
	Origin   string   `json:"origin"` // SHA-256 of commit 1, hex
	Tail     string   `json:"tail"`   // SHA-256 of commit Version, hex
	Entities []string `json:"entity_columns"`
	// Sources run-length encode the segment each row was read from, in
	// row order: [path, rows] pairs.
	Sources [][2]any `json:"sources"`
}

// PersistLastValues makes the last-value index of the handle's current
// state durable, unless it already is, and returns its table-relative path
// and row count. Tables without entity columns have none (ErrInvalidInput);
// a read-only (format 6) table is ErrNeedsUpgrade.
func (t *Table) PersistLastValues(ctx context.Context) (string, uint64, error) {
	return t.LastValuesFile(ctx, t.State())
}

// LastValuesFile returns the table-relative path of a Parquet file holding
// the last-value index of st (the newest row per identity, every column of
// st's schema, sorted by identity) and its row count, writing the file
// when it is not there yet. SQL reads it in place of the segments for the
// newest-row-per-entity shape.
func (t *Table) LastValuesFile(ctx context.Context, st *State) (string, uint64, error) {
	if st == nil {
		return "", 0, invalidf("last: the table has no state")
	}
	if err := st.Meta.CheckWrite(); err != nil {
		return "", 0, err
	}
	if len(st.Index().EntityColumns) == 0 {
		return "", 0, invalidf("last: the table has no entity columns")
	}
	x, err := t.lastIndexAt(ctx, st)
	if err != nil {
		return "", 0, err
	}
	defer x.release()
	p := LastValuesPath(st.Version)
	rows := uint64(0)
	if x.rec != nil {
		rows = uint64(x.rec.NumRows())
	}
	if x.persisted.Load() {
		return p, rows, nil
	}
	if info, err := t.fs.Stat(p); err == nil && info.Size > 0 {
		x.persisted.Store(true)
		return p, rows, nil
	}
	if x.rec == nil {
		return "", 0, invalidf("last: the table has no rows yet")
	}
	data, err := encodeLastIndex(x)
	if err != nil {
		return "", 0, err
	}
	tmp := fmt.Sprintf("%s/.%020d.parquet.partial-%s", lastDir, st.Version, randomHex())
	if _, err := t.log.publishSidecar(lastDir, tmp, p, data); err != nil {
		return "", 0, err
	}
	x.persisted.Store(true)
	t.pruneLastFiles(st.Version)
	return p, rows, nil
}

// encodeLastIndex writes x as a Parquet file with its description in the
// key-value metadata.
func encodeLastIndex(x *lastIndex) ([]byte, error) {
	m := lastMeta{Format: 1, Version: x.version, Origin: hex.EncodeToString(x.origin[:]), Tail: hex.EncodeToString(x.digest[:]), Entities: x.entities}
	for _, s := range x.src {
		if n := len(m.Sources); n > 0 && m.Sources[n-1][0] == s {
			m.Sources[n-1][1] = m.Sources[n-1][1].(int) + 1
			continue
		}
		m.Sources = append(m.Sources, [2]any{s, 1})
	}
	desc, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithStats(true),
		parquet.WithCreatedBy("tsflight"),
	)
	fw, err := pqarrow.NewFileWriter(x.rec.Schema(), &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	if err := fw.Write(x.rec); err != nil {
		fw.Close()
		return nil, err
	}
	if err := fw.AppendKeyValueMetadata(lastMetaKey, string(desc)); err != nil {
		fw.Close()
		return nil, err
	}
	if err := fw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// listLastFiles returns the versions of the persisted indexes, ascending,
// and the temporary files' names.
func (t *Table) listLastFiles() (versions []uint64, temps []string, err error) {
	names, err := t.fs.List(lastDir)
	if storage.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, storageErr("list "+lastDir, err)
	}
	for _, n := range names {
		switch {
		case reLastFile.MatchString(n):
			if v, err := strconv.ParseUint(strings.TrimSuffix(n, ".parquet"), 10, 64); err == nil && v > 0 {
				versions = append(versions, v)
			}
		case reLastTemp.MatchString(n):
			temps = append(temps, n)
		}
	}
	return versions, temps, nil
}

// loadLastIndex returns the newest persisted index at or below st's
// version that is valid for this log, or nil (problems are logged).
func (t *Table) loadLastIndex(ctx context.Context, st *State) *lastIndex {
	versions, _, err := t.listLastFiles()
	if err != nil {
		t.opts.logger().Warn("cannot list the last-value indexes; rebuilding", "error", err)
		return nil
	}
	var cache logDigests
	for i := len(versions) - 1; i >= 0; i-- {
		v := versions[i]
		if v > st.Version || ctx.Err() != nil {
			continue
		}
		x, err := t.readLastIndex(ctx, st, v, &cache)
		if err == nil {
			return x
		}
		t.opts.logger().Warn("ignoring a persisted last-value index", "path", LastValuesPath(v), "error", err)
	}
	return nil
}

// errLastStale marks a persisted index of another log.
var errLastStale = errors.New("stale last-value index")

// readLastIndex reads and checks the persisted index of version v.
func (t *Table) readLastIndex(ctx context.Context, st *State, v uint64, cache *logDigests) (_ *lastIndex, err error) {
	p := LastValuesPath(v)
	f, err := t.fs.Open(p)
	if err != nil {
		return nil, storageErr("open "+p, err)
	}
	defer f.Close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoding %s failed: %v", p, r)
		}
	}()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	desc := pf.MetaData().KeyValueMetadata().FindValue(lastMetaKey)
	if desc == nil {
		return nil, fmt.Errorf("no %s metadata", lastMetaKey)
	}
	var m lastMeta
	dec := json.NewDecoder(strings.NewReader(*desc))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s metadata: %w", lastMetaKey, err)
	}
	if m.Format != 1 {
		return nil, fmt.Errorf("format %d, this build reads 1", m.Format)
	}
	if m.Version != v {
		return nil, fmt.Errorf("the file holds version %d", m.Version)
	}
	x := &lastIndex{version: v, pos: map[string]int{}}
	x.persisted.Store(true)
	if err := decodeDigest(m.Origin, &x.origin); err != nil {
		return nil, err
	}
	if err := decodeDigest(m.Tail, &x.digest); err != nil {
		return nil, err
	}
	if err := t.log.matchesLogAt(v, x.origin, x.digest, cache); err != nil {
		return nil, fmt.Errorf("%w: %v", errLastStale, err)
	}
	ix := st.Index()
	if strings.Join(m.Entities, "\x00") != strings.Join(ix.EntityColumns, "\x00") {
		return nil, fmt.Errorf("entity columns %v, the table's are %v", m.Entities, ix.EntityColumns)
	}
	x.entities = ix.EntityColumns
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 20}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, -1)
	defer tr.Release()
	var parts []arrow.RecordBatch
	for tr.Next() {
		r := tr.RecordBatch()
		r.Retain()
		parts = append(parts, r)
	}
	defer func() {
		for _, r := range parts {
			r.Release()
		}
	}()
	switch len(parts) {
	case 0:
		if x.rec, err = emptyBatch(tbl.Schema(), memory.DefaultAllocator); err != nil {
			return nil, err
		}
	default:
		if x.rec, err = ConcatBatches(parts, memory.DefaultAllocator); err != nil {
			return nil, err
		}
	}
	if err := x.fillRows(ix, m.Sources); err != nil {
		x.release()
		return nil, err
	}
	return x, nil
}

// fillRows derives ids, iv, pos and src of a read index from its rows and
// the sources of its metadata, checking that rows are sorted by identity,
// unique and have an index value.
func (x *lastIndex) fillRows(ix *IndexSpec, sources [][2]any) error {
	n := int(x.rec.NumRows())
	schema := x.rec.Schema()
	for _, s := range sources {
		p, _ := s[0].(string)
		cnt, err := s[1].(json.Number).Int64()
		if err != nil || cnt <= 0 || p == "" || ValidatePath(p) != nil {
			return fmt.Errorf("bad source %v", s)
		}
		for range cnt {
			x.src = append(x.src, p)
		}
	}
	if len(x.src) != n {
		return fmt.Errorf("the sources name %d rows, the file has %d", len(x.src), n)
	}
	fi := schema.FieldIndices(ix.Column)
	if len(fi) != 1 {
		return fmt.Errorf("no index column %q", ix.Column)
	}
	idx := x.rec.Column(fi[0])
	sv, uv := indexInts(idx)
	if sv == nil && uv == nil {
		return fmt.Errorf("index column %q is a %s", ix.Column, idx.DataType())
	}
	cols := make([]arrow.Array, len(ix.EntityColumns))
	for i, name := range ix.EntityColumns {
		fi := schema.FieldIndices(name)
		if len(fi) != 1 {
			return fmt.Errorf("no entity column %q", name)
		}
		cols[i] = x.rec.Column(fi[0])
	}
	d := indexDomain(ix)
	unit := int64(1)
	if ts, ok := idx.DataType().(*arrow.TimestampType); ok {
		unit = map[arrow.TimeUnit]int64{arrow.Second: 1, arrow.Millisecond: 1e3, arrow.Microsecond: 1e6, arrow.Nanosecond: 1e9}[ts.Unit]
	}
	x.ids = make([]coverage.Identity, n)
	x.iv = make([]uint64, n)
	for row := range n {
		id := make(coverage.Identity, len(cols))
		if idx.IsNull(row) || !rowIdentity(cols, row, id) {
			return fmt.Errorf("row %d has a null index or entity value", row)
		}
		if row > 0 && x.ids[row-1].Compare(id) >= 0 {
			return fmt.Errorf("row %d is not after row %d in identity order", row, row-1)
		}
		var iv uint64
		var err error
		switch {
		case ix.Kind.Type == IndexTimestamp:
			iv, err = d.TimestampID(sv[row], unit)
		case uv != nil:
			iv, err = d.UInt64ID(uv[row])
		default:
			iv, err = d.Int64ID(sv[row])
		}
		if err != nil {
			return fmt.Errorf("row %d: %w", row, err)
		}
		x.ids[row], x.iv[row] = id, iv
		x.pos[id.Key()] = row
	}
	return nil
}

func decodeDigest(s string, d *commitDigest) error {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(d) {
		return fmt.Errorf("bad digest %q", s)
	}
	copy(d[:], b)
	return nil
}

// pruneLastFiles runs after index newest is durable: it removes the
// persisted indexes older than the newest lastKeep that are also older
// than lastGrace, those above newest that are stale (a replaced or
// rewound log), and temporary files older than lastGrace. Failures are
// logged.
func (t *Table) pruneLastFiles(newest uint64) {
	versions, temps, err := t.listLastFiles()
	if err != nil {
		t.opts.logger().Warn("cannot list the last-value indexes to prune them", "error", err)
		return
	}
	now := t.opts.now()
	old := func(p string) bool {
		info, err := t.fs.Stat(p)
		return err == nil && now.Sub(info.ModTime) > lastGrace
	}
	var doomed []string
	var below []uint64
	for _, v := range versions {
		if v <= newest {
			below = append(below, v)
		}
	}
	if len(below) > lastKeep {
		for _, v := range below[:len(below)-lastKeep] {
			if p := LastValuesPath(v); old(p) {
				doomed = append(doomed, p)
			}
		}
	}
	for _, n := range temps {
		if p := lastDir + "/" + n; old(p) {
			doomed = append(doomed, p)
		}
	}
	removed := false
	for _, p := range doomed {
		if err := t.fs.Remove(p); err != nil && !storage.IsNotExist(err) {
			t.opts.logger().Warn("cannot remove an old last-value index", "path", p, "error", err)
			continue
		}
		removed = true
	}
	if removed {
		if err := t.fs.SyncDir(lastDir); err != nil {
			t.opts.logger().Warn("cannot sync the last-value index directory after pruning", "error", err)
		}
	}
}

// conformBatch returns rec with schema's fields, in schema's order: its
// columns by name, and nulls for those it lacks (columns added after rec
// was made). A column of another type is an error.
func conformBatch(rec arrow.RecordBatch, schema *arrow.Schema) (arrow.RecordBatch, error) {
	if rec.Schema().Equal(schema) {
		rec.Retain()
		return rec, nil
	}
	n := rec.NumRows()
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for i, f := range schema.Fields() {
		fi := rec.Schema().FieldIndices(f.Name)
		switch {
		case len(fi) == 1 && arrow.TypeEqual(rec.Column(fi[0]).DataType(), f.Type):
			cols[i] = rec.Column(fi[0])
			cols[i].Retain()
		case len(fi) == 0:
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(n))
		default:
			return nil, fmt.Errorf("column %q is %s, the schema says %s", f.Name, rec.Column(fi[0]).DataType(), f.Type)
		}
	}
	return array.NewRecordBatch(schema, cols, n), nil
}
