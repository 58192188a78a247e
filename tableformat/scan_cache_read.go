package tableformat

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// How a segment read uses the scan cache (scan_cache.go): the keys of its
// columns, and serving a segment from cached arrays.

// cacheKeys returns the scan cache's keys of the read columns of one
// segment read whole (zero for a column the segment lacks), or nil when
// the segment has none of them.
func (r *scanRun) cacheKeys(file scanCacheFile, groups []int, batch int64, cols []scanSegmentColumn) []scanCacheKey {
	keys := make([]scanCacheKey, len(cols))
	gs := scanCacheGroups(groups)
	found := false
	for i, c := range cols {
		if c.field < 0 {
			continue
		}
		col := r.plan.read[i]
		keys[i] = scanCacheKey{file: file, groups: gs, batch: batch, column: col.name, typ: col.field.Type.Fingerprint()}
		found = true
	}
	if !found {
		return nil
	}
	return keys
}

// replaySegment serves a segment read whole from the scan cache: chunks[i]
// are read column i's arrays (retained for this scan; nil for a column
// the segment lacks, whose nulls are made here), batch by batch as the
// decoder made them.
func (r *scanRun) replaySegment(chunks [][]arrow.Array, keys []scanCacheKey, acc *scanCoalescer, slot *decodeSlot) error {
	p := r.plan
	emit := func(rec arrow.RecordBatch) error { return r.emit(rec, slot) }
	defer func() {
		for _, c := range chunks {
			for _, a := range c {
				if a != nil {
					a.Release()
				}
			}
		}
	}()
	batches := -1
	for i, c := range chunks {
		if keys[i] == (scanCacheKey{}) {
			continue
		}
		if batches >= 0 && len(c) != batches {
			return fmt.Errorf("tableformat: scan cache entries of one segment disagree: %d and %d batches", batches, len(c))
		}
		batches = len(c)
	}
	aligned := make([]arrow.Array, len(p.read))
	outCols := make([]arrow.Array, len(p.outRead))
	release := func() {
		for i, a := range aligned {
			if a != nil {
				a.Release()
				aligned[i] = nil
			}
		}
	}
	defer release()
	var sel scanSelection
	for k := 0; k < batches; k++ {
		if err := r.pace(slot); err != nil {
			return err
		}
		if err := r.ctx.Err(); err != nil {
			return err
		}
		n := -1
		for i := range p.read {
			if keys[i] == (scanCacheKey{}) {
				continue
			}
			a := chunks[i][k]
			chunks[i][k] = nil
			aligned[i] = a
			if n >= 0 && a.Len() != n {
				return fmt.Errorf("tableformat: scan cache entries of one segment disagree: batch %d has %d and %d rows", k, n, a.Len())
			}
			n = a.Len()
		}
		for i := range p.read {
			if aligned[i] == nil {
				aligned[i] = array.MakeArrayOfNull(p.alloc, p.read[i].field.Type, n)
			}
		}
		r.stats.rowsCached.Add(int64(n))
		if n > 0 {
			if err := r.serveBatch(aligned, n, keys, acc, &sel, outCols, emit); err != nil {
				return err
			}
		}
		release()
	}
	return nil
}
