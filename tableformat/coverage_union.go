package tableformat

import (
	"bytes"
	"encoding/binary"
	"path"
	"sync/atomic"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// The segment-union marker.
//
// The format keeps a table coverage snapshot beside the sidecars: a file
// holding the union of every live segment's coverage, and a pointer to it
// (UpdateTableCoverage) in the commit that made it. The 0.9.0 package
// writes a new snapshot with every append, so the bytes an append writes
// grow with everything the table ever covered (2,000 appends of 100 rows
// left 23 MB of snapshots, growing with the square of the commit count).
//
// tsflight's appends do not write snapshots. They point the table at one
// fixed file, the marker, whose bytes are deliberately no coverage
// encoding, and the union is computed from the sidecars instead (in
// memory, incrementally: see loadCoverage; checkpoints keep it across
// restarts). The 0.9.0 package, finding a snapshot it cannot decode, does
// what it does for any unreadable snapshot: it rebuilds the union from the
// segment sidecars (its "read-only recovery"), logs that it did, and its
// next append writes a full snapshot again, which tsflight reads as usual.
// Both implementations therefore agree on every table's coverage, and an
// append through either checks overlap against all of it. The marker is
// written once per table and costs an append nothing.
const unionCoveragePath = tableCoverageDir + "/tsflight-segment-union.roar"

// unionCoverageMagic opens the marker. Bytes 8-15 are a little-endian
// uint32 format version (1) and a zero uint32: read as a RoaringTreemap
// (the global encoding), the first 8 bytes are an impossible bitmap count
// and bytes 12-15 no roaring cookie; read as TSTECOV2 (the entity
// encoding), the magic is wrong. Both decoders refuse it.
const unionCoverageMagic = "TSFUNION"

// unionCoverageBytes is the marker's content: the magic, the version, and
// a note for whoever opens the file.
var unionCoverageBytes = func() []byte {
	var b bytes.Buffer
	b.WriteString(unionCoverageMagic)
	_ = binary.Write(&b, binary.LittleEndian, [2]uint32{1, 0})
	b.WriteString("tsflight: this table's coverage is the union of its live segments' coverage sidecars; see docs/format/coverage.md\n")
	return b.Bytes()
}()

// unionPointer is the coverage pointer tsflight's appends commit.
func unionPointer(kind IndexKind) CoveragePointer {
	return CoveragePointer{IndexKind: kind, Path: unionCoveragePath}
}

// coverageIsUnion reports whether the table's coverage pointer is the
// segment-union marker.
func (s *State) coverageIsUnion() bool {
	return s != nil && s.Coverage != nil && s.Coverage.Path == unionCoveragePath
}

// unionMarker makes sure the marker exists, complete, before a commit
// names it: it is created as a temporary file, fsynced and hard-linked to
// its name, so that the name never refers to a partial file (an empty or
// truncated file could decode as an empty coverage in another reader).
type unionMarker struct{ ready atomic.Bool }

func (m *unionMarker) ensure(t *Table) error {
	if m.ready.Load() {
		return nil
	}
	if err := m.check(t); err == nil {
		m.ready.Store(true)
		return nil
	} else if !storage.IsNotExist(err) {
		return err
	}
	if err := t.fs.MkdirAll(tableCoverageDir); err != nil {
		return storageErr("create "+tableCoverageDir, err)
	}
	tmp := path.Join(tableCoverageDir, "tsflight-segment-union-"+randomHex()+".tmp.roar")
	if err := t.log.writeDurable(tmp, unionCoverageBytes); err != nil {
		return err
	}
	defer t.log.removeQuietly(tmp)
	if err := t.fs.Link(tmp, unionCoveragePath); err != nil && !storage.IsExist(err) {
		return storageErr("create "+unionCoveragePath, err)
	}
	if err := t.fs.SyncDir(tableCoverageDir); err != nil {
		return storageErr("sync "+tableCoverageDir, err)
	}
	if err := m.check(t); err != nil {
		return err
	}
	m.ready.Store(true)
	return nil
}

// check reads the marker: nil when it holds the marker's bytes, a
// not-exist error when it is absent, corruption when it holds anything else.
func (m *unionMarker) check(t *Table) error {
	data, err := t.fs.ReadFile(unionCoveragePath)
	if err != nil {
		if storage.IsNotExist(err) {
			return err
		}
		return storageErr("read "+unionCoveragePath, err)
	}
	if !bytes.Equal(data, unionCoverageBytes) {
		return corruptf(unionCoveragePath, 0, nil, "the segment-union marker holds %d bytes that are not the marker's; restore it (tsflight check --repair) before appending", len(data))
	}
	return nil
}
