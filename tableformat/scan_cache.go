package tableformat

import (
	"container/list"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The scan cache: decoded columns of segments, kept so that reading a
// table again skips decoding its Parquet (ScanOptions.Cache).
//
// What is cached is what a segment's decoder hands to the row filter: for
// one segment file, one set of row groups read whole, one decode batch
// size and one column, the column's arrays batch by batch, already in
// the canonical type. Projection, the range and entity filters and
// batching run on every read as they do on decoded arrays, so an answer
// served from the cache is the answer the decoder gives, batch for batch.
// Reads that decode only part of a segment (a range that cuts into its
// row groups: the index column locates the span first) neither fill nor
// use the cache.
//
// An entry names the file by the table's creation time, the segment's
// path, and the file's size and modification time as Stat reports them
// before the file is opened. Segment files are never rewritten (their
// names are random), so an entry never goes stale: a segment vacuumed
// away, or the segments of a table dropped and created again under the
// same name (new creation time, new paths), are simply never asked for
// again and age out. A file replaced behind the table's back has another
// size or time and misses.
//
// Memory: the cache allocates the arrays it fills from its own account
// over the allocator it was given, bounded by the cache's size in bytes;
// the least recently used entries are dropped to make room, but never
// entries used since the scan that fills started (see put), and a segment
// whose columns would not fit at all is not cached. Segments being decoded
// into the cache hold at most the bound together too (a fill that would
// go beyond it is abandoned), so the cache never holds more than twice
// its bound. Two scans that decode the same segment at once both fill
// it; the second entry is dropped. Arrays are shared by
// reference count and never changed: dropping an entry only drops the
// cache's reference, so a stream that still sends a batch of it keeps it
// alive. A scan that passes cached arrays on charges their bytes to its
// own allocator while its batch is held, when that allocator is a
// [SharedHolder] (a server's per-stream account), so that stream budgets
// still bound what streams hold. Close drops every entry.

// ScanCache is a bounded cache of decoded segment columns shared by scans
// (ScanOptions.Cache). It is safe for concurrent use.
type ScanCache struct {
	limit int64
	mem   *scanCacheAlloc

	mu     sync.Mutex
	lru    list.List // of *scanCacheEntry, most recently used first
	items  map[scanCacheKey]*list.Element
	bytes  int64
	closed bool
	clock  uint64 // counts uses (gets and puts); entries record their last

	// filling is the bytes segments being decoded into the cache hold
	// together; a fill that would take it over limit is abandoned, so
	// the cache's memory is at most twice its bound (entries plus fills).
	filling atomic.Int64

	hits, misses, evictions, rejected atomic.Int64
}

// ScanCacheStats is what a ScanCache holds and did.
type ScanCacheStats struct {
	// Limit is the bound in bytes.
	Limit int64
	// Bytes is what the entries hold (their arrays' buffers); Entries
	// counts them (one per segment, row-group set and column).
	Bytes, Entries int64
	// Allocated is what the cache's allocator has handed out and not got
	// back: its entries, the arrays of entries dropped that streams still
	// send, and segments being decoded into it.
	Allocated int64
	// Hits and Misses count segment reads that could use the cache: a hit
	// found every column it reads.
	Hits, Misses int64
	// Evictions counts entries dropped to make room; Rejected counts
	// segments not cached because their columns would not fit (in the
	// bound, or beside the other segments being decoded into it).
	Evictions, Rejected int64
}

// NewScanCache returns a cache of at most limit bytes whose arrays come
// from base (nil: the scan pool, as scans without an allocator use).
// limit must be positive.
func NewScanCache(limit int64, base memory.Allocator) *ScanCache {
	if base == nil {
		base = scanPool
	}
	return &ScanCache{limit: limit, mem: &scanCacheAlloc{base: base}, items: map[scanCacheKey]*list.Element{}}
}

// Stats returns the cache's figures now.
func (c *ScanCache) Stats() ScanCacheStats {
	c.mu.Lock()
	bytes, entries := c.bytes, int64(len(c.items))
	c.mu.Unlock()
	return ScanCacheStats{
		Limit: c.limit, Bytes: bytes, Entries: entries, Allocated: c.mem.held.Load(),
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(), Rejected: c.rejected.Load(),
	}
}

// Close drops every entry and makes the cache keep nothing from now on
// (scans still run, decoding). Arrays that streams still hold are freed
// when they release them.
func (c *ScanCache) Close() {
	c.mu.Lock()
	c.closed = true
	var drop []*scanCacheEntry
	for e := c.lru.Front(); e != nil; e = e.Next() {
		drop = append(drop, e.Value.(*scanCacheEntry))
	}
	c.lru.Init()
	clear(c.items)
	c.bytes = 0
	c.mu.Unlock()
	for _, ent := range drop {
		releaseArrays(ent.chunks)
	}
}

// SharedHolder is implemented by an allocator (ScanOptions.Alloc) that
// accounts for memory it did not allocate: a scan that passes on arrays
// shared with the cache charges their bytes with Hold(n) while the batch
// is held and returns them with Hold(-n) when it is released.
type SharedHolder interface {
	Hold(n int64)
}

// scanCacheKey names one cached column of one segment read.
type scanCacheKey struct {
	file   scanCacheFile
	groups string // the row groups read, "0,1,2"
	batch  int64  // the decode batch size
	column string
	typ    string // the canonical type's fingerprint
}

// scanCacheFile names a segment file's content: the table (its creation
// time), the segment path and what Stat said of the file.
type scanCacheFile struct {
	table int64
	path  string
	size  int64
	mtime int64
}

type scanCacheEntry struct {
	key    scanCacheKey
	chunks []arrow.Array
	bytes  int64
	used   uint64 // the clock at its last use
}

// epoch is the clock a scan takes when it starts: its fills never evict
// entries used since (see put).
func (c *ScanCache) epoch() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clock
}

// scanCacheGroups renders a row-group set for a key.
func scanCacheGroups(groups []int) string {
	var b strings.Builder
	for i, g := range groups {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(g))
	}
	return b.String()
}

// get returns the chunks of every key (each array retained for the
// caller), or false when any key is missing. A zero keys[i] (a column the
// segment lacks) is skipped: its chunks are nil.
func (c *ScanCache) get(keys []scanCacheKey) ([][]arrow.Array, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	els := make([]*list.Element, len(keys))
	for i, k := range keys {
		if k == (scanCacheKey{}) {
			continue
		}
		el, ok := c.items[k]
		if !ok {
			c.misses.Add(1)
			return nil, false
		}
		els[i] = el
	}
	out := make([][]arrow.Array, len(keys))
	c.clock++
	for i, el := range els {
		if el == nil {
			continue
		}
		c.lru.MoveToFront(el)
		ent := el.Value.(*scanCacheEntry)
		ent.used = c.clock
		out[i] = slices.Clone(ent.chunks) // the caller consumes its copy
		for _, a := range ent.chunks {
			a.Retain()
		}
	}
	c.hits.Add(1)
	return out, true
}

// put takes over chunks (one reference each for every key; chunks[i] of
// a zero key is nil) as the entries of one segment read that started at
// clock since, all or none. Room is made by dropping the least recently
// used entries, but only entries not used since the scan started: a
// scan's fills never evict what it, or a scan started after it, filled or
// read. A table read whole again and again that does not fit thus keeps
// the part that fit, served from the cache on every read, instead of
// each read evicting what the next needs first. When that is not enough
// room, nothing is put. A key already there (a concurrent read filled it
// first) keeps its entry. It reports whether the entries were put.
func (c *ScanCache) put(keys []scanCacheKey, chunks [][]arrow.Array, since uint64) bool {
	sizes := make([]int64, len(keys))
	c.mu.Lock()
	var total int64
	for i, k := range keys {
		if k == (scanCacheKey{}) {
			continue
		}
		if _, ok := c.items[k]; ok {
			continue
		}
		for _, a := range chunks[i] {
			sizes[i] += arrayBytes(a)
		}
		total += sizes[i]
	}
	var drop []*scanCacheEntry
	ok := !c.closed && total <= c.limit
	if ok {
		// The least recently used come last; those used since the scan
		// started are newer than any that was not.
		need, free := c.bytes+total-c.limit, int64(0)
		for el := c.lru.Back(); el != nil && free < need; el = el.Prev() {
			ent := el.Value.(*scanCacheEntry)
			if ent.used > since {
				break
			}
			free += ent.bytes
		}
		ok = free >= need
		for ok && c.bytes+total > c.limit {
			el := c.lru.Back()
			ent := el.Value.(*scanCacheEntry)
			c.lru.Remove(el)
			delete(c.items, ent.key)
			c.bytes -= ent.bytes
			drop = append(drop, ent)
		}
	}
	var keep [][]arrow.Array
	if ok {
		c.clock++
		for i, k := range keys {
			if k == (scanCacheKey{}) {
				continue
			}
			if el, dup := c.items[k]; dup {
				c.lru.MoveToFront(el)
				keep = append(keep, chunks[i]) // released below
				continue
			}
			c.items[k] = c.lru.PushFront(&scanCacheEntry{key: k, chunks: chunks[i], bytes: sizes[i], used: c.clock})
			c.bytes += sizes[i]
		}
	} else {
		keep = chunks
	}
	c.mu.Unlock()
	c.evictions.Add(int64(len(drop)))
	if !ok {
		c.rejected.Add(1)
	}
	for _, ent := range drop {
		releaseArrays(ent.chunks)
	}
	for _, cs := range keep {
		releaseArrays(cs)
	}
	return ok
}

// roomFor reports whether a fill by a scan started at clock since could
// be put at all: the cache has room, or entries it may evict.
func (c *ScanCache) roomFor(since uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if c.bytes < c.limit {
		return true
	}
	el := c.lru.Back()
	return el != nil && el.Value.(*scanCacheEntry).used <= since
}

func releaseArrays(as []arrow.Array) {
	for _, a := range as {
		a.Release()
	}
}

// arrayBytes sums the lengths of an array's buffers, children included
// (scans expand dictionaries, so there are none to count).
func arrayBytes(a arrow.Array) int64 {
	var n int64
	var walk func(d arrow.ArrayData)
	walk = func(d arrow.ArrayData) {
		for _, b := range d.Buffers() {
			if b != nil {
				n += int64(b.Len())
			}
		}
		for _, c := range d.Children() {
			walk(c)
		}
	}
	walk(a.Data())
	return n
}

// scanCacheFill collects the arrays one segment read decodes into the
// cache, column by column, and puts them once the segment was read
// whole.
type scanCacheFill struct {
	cache  *ScanCache
	since  uint64 // the clock when the scan started
	keys   []scanCacheKey
	chunks [][]arrow.Array
	bytes  int64
	dead   bool // abandoned: too large
}

// newFill starts collecting a segment read by a scan started at clock
// since, or returns nil when the cache could not take it anyway.
func (c *ScanCache) newFill(keys []scanCacheKey, since uint64) *scanCacheFill {
	if !c.roomFor(since) {
		c.rejected.Add(1)
		return nil
	}
	return &scanCacheFill{cache: c, since: since, keys: keys, chunks: make([][]arrow.Array, len(keys))}
}

// add keeps (retains) the arrays of one decoded batch; aligned[i] is
// read column i.
func (f *scanCacheFill) add(aligned []arrow.Array) {
	if f.dead {
		return
	}
	var n int64
	for i, k := range f.keys {
		if k == (scanCacheKey{}) {
			continue
		}
		a := aligned[i]
		a.Retain()
		f.chunks[i] = append(f.chunks[i], a)
		n += arrayBytes(a)
	}
	f.bytes += n
	if all := f.cache.filling.Add(n); f.bytes > f.cache.limit || all > f.cache.limit {
		f.cache.rejected.Add(1)
		f.abandon()
	}
}

// commit puts the segment's entries (all or none).
func (f *scanCacheFill) commit() {
	if f.dead {
		return
	}
	f.dead = true
	f.cache.filling.Add(-f.bytes)
	f.cache.put(f.keys, f.chunks, f.since)
	clear(f.chunks)
}

// abandon releases what the fill holds.
func (f *scanCacheFill) abandon() {
	if !f.dead {
		f.cache.filling.Add(-f.bytes)
	}
	f.dead = true
	for i := range f.chunks {
		releaseArrays(f.chunks[i])
		f.chunks[i] = nil
	}
}

// scanCacheAlloc is the cache's account: it allocates from base and
// counts what it has handed out.
type scanCacheAlloc struct {
	base memory.Allocator
	held atomic.Int64
}

func (a *scanCacheAlloc) Allocate(n int) []byte {
	b := a.base.Allocate(n)
	a.held.Add(int64(len(b)))
	return b
}

func (a *scanCacheAlloc) AllocateUninit(n int) []byte {
	b := AllocateUninit(a.base, n)
	a.held.Add(int64(len(b)))
	return b
}

func (a *scanCacheAlloc) Reallocate(n int, old []byte) []byte {
	was := len(old)
	b := a.base.Reallocate(n, old)
	a.held.Add(int64(len(b) - was))
	return b
}

func (a *scanCacheAlloc) Free(b []byte) {
	a.held.Add(-int64(len(b)))
	a.base.Free(b)
}

// Unwrap returns the allocator the account draws on.
func (a *scanCacheAlloc) Unwrap() memory.Allocator { return a.base }

// sharedBatch is a batch of arrays shared with the cache, passed on by a
// scan whose allocator is a SharedHolder: their bytes are on the holder's
// account until the batch's last reference is released.
type sharedBatch struct {
	arrow.RecordBatch
	refs   atomic.Int64
	bytes  int64
	holder SharedHolder
}

func newSharedBatch(rec arrow.RecordBatch, bytes int64, h SharedHolder) *sharedBatch {
	b := &sharedBatch{RecordBatch: rec, bytes: bytes, holder: h}
	b.refs.Store(1)
	h.Hold(bytes)
	return b
}

func (b *sharedBatch) Retain() { b.refs.Add(1) }

func (b *sharedBatch) Release() {
	if b.refs.Add(-1) == 0 {
		b.RecordBatch.Release()
		b.holder.Hold(-b.bytes)
	}
}
