package tableformat

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/tsflight/tsflight/tableformat/storage"
)

// This file checks that a segment file is the one its commit recorded:
// the log records each segment's row_count (and usually file_size), so a
// file swapped for another valid Parquet file, truncated or extended is
// caught before any of its rows are served. The checks are cheap: the
// size comes with the open file, the row count from the footer the reader
// parses anyway.

// segmentFix is what an operator should do about a segment file that does
// not match the log.
const segmentFix = "restore the file from a backup of this table or run tsflight check"

// verifySegmentFile opens seg's file in fsys and checks its size (when the
// log records one) and the row count in its Parquet footer against what the
// log records. A mismatch, a missing file or an unreadable footer is a
// *CorruptionError (ErrCorrupt) naming seg.Path, table-relative; a failed
// read is a storage error (ErrStorage).
func verifySegmentFile(fsys storage.FS, seg SegmentMeta) (err error) {
	f, err := fsys.Open(seg.Path)
	if err != nil {
		if storage.IsNotExist(err) {
			return &CorruptionError{Path: seg.Path, Reason: "segment file is missing; " + segmentFix}
		}
		return storageErr("open segment "+seg.Path, err)
	}
	defer f.Close()
	if err := verifySegmentSize(&seg, f.Size()); err != nil {
		return err
	}
	src := &scanFile{r: f}
	defer func() {
		if v := recover(); v != nil {
			err = scanSegmentError(&seg, src, "cannot read the Parquet footer", fmt.Errorf("panic: %v", v))
		}
	}()
	pf, err := file.NewParquetReader(src, file.WithReadProps(parquet.NewReaderProperties(memory.DefaultAllocator)))
	if err != nil {
		return scanSegmentError(&seg, src, "cannot read the Parquet footer", err)
	}
	return verifySegmentFooter(&seg, pf.MetaData())
}

// A scan that already has the file open and its footer parsed calls
// verifySegmentSize (before parsing) and verifySegmentFooter (after), so
// that nothing is read twice.

// verifySegmentSize compares the file's size with the recorded file_size
// (segments written without one are not checked).
func verifySegmentSize(seg *SegmentMeta, size int64) error {
	if seg.FileSize == nil || size == int64(*seg.FileSize) {
		return nil
	}
	return &CorruptionError{Path: seg.Path, Reason: fmt.Sprintf(
		"segment file is %d bytes but the log records file_size %d: the file was replaced, truncated or extended since it was committed; %s",
		size, *seg.FileSize, segmentFix)}
}

// verifySegmentFooter compares the row count in the Parquet footer (and the
// sum of its row groups') with the recorded row_count.
func verifySegmentFooter(seg *SegmentMeta, md *metadata.FileMetaData) error {
	if md == nil {
		return &CorruptionError{Path: seg.Path, Reason: "segment file has no Parquet footer; " + segmentFix}
	}
	rows := md.GetNumRows()
	var groups int64
	for i := 0; i < md.NumRowGroups(); i++ {
		groups += md.RowGroup(i).NumRows()
	}
	if rows != groups {
		return &CorruptionError{Path: seg.Path, Reason: fmt.Sprintf(
			"segment file's Parquet footer says %d rows but its row groups hold %d; %s", rows, groups, segmentFix)}
	}
	if rows < 0 || uint64(rows) != seg.RowCount {
		return &CorruptionError{Path: seg.Path, Reason: fmt.Sprintf(
			"segment file holds %d rows but the log records row_count %d: the file was replaced or damaged since it was committed; %s",
			rows, seg.RowCount, segmentFix)}
	}
	return nil
}
