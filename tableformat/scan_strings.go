package tableformat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// A direct decoder for the commonest column of a time-series segment: a
// top-level string column (an entity or tag) written with a dictionary.
// Through pqarrow, its rows go page → dictionary indices → an Arrow
// dictionary builder → scanExpandDict; here they go page → indices →
// the Arrow utf8 array, in one pass over each batch. It decodes Parquet
// data pages v1 whose values are RLE_DICTIONARY / PLAIN_DICTIONARY indices
// or, after a writer's dictionary fallback, PLAIN byte arrays, and whose
// definition levels (max 1) are RLE. A column chunk whose page encoding
// statistics promise anything else goes through pqarrow.

// scanDirectStrings lets tests compare the direct decoder with pqarrow's.
var scanDirectStrings = true

// Parquet page types (parquet.thrift PageType).
const (
	pageTypeData       = 0
	pageTypeDictionary = 2
)

// directStringEligible reports whether leaf col of the row groups can be
// decoded by stringColumnReader, from the chunks' page encoding stats.
func directStringEligible(pf *file.Reader, groups []int, col int) bool {
	if !scanDirectStrings {
		return false
	}
	descr := pf.MetaData().Schema.Column(col)
	if descr.MaxRepetitionLevel() != 0 || descr.MaxDefinitionLevel() > 1 {
		return false
	}
	for _, g := range groups {
		cc, err := pf.MetaData().RowGroup(g).ColumnChunk(col)
		if err != nil {
			return false
		}
		stats := cc.EncodingStats()
		if len(stats) == 0 {
			return false // no promise: let pqarrow read it
		}
		for _, s := range stats {
			switch int32(s.PageType) {
			case pageTypeDictionary:
				if s.Encoding != parquet.Encodings.Plain && s.Encoding != parquet.Encodings.PlainDict {
					return false
				}
			case pageTypeData:
				switch s.Encoding {
				case parquet.Encodings.RLEDict, parquet.Encodings.PlainDict, parquet.Encodings.Plain:
				default:
					return false
				}
			default:
				return false // data page v2, index pages
			}
		}
	}
	return true
}

// stringColumnReader reads one string leaf across row groups, n rows at a
// time.
type stringColumnReader struct {
	pf       *file.Reader
	col      int
	groups   []int
	nextRG   int
	optional bool
	mem      memory.Allocator
	typ      arrow.DataType

	// pages reads the current chunk; it releases each page itself when
	// moving to the next one.
	pages file.PageReader

	// dictionary of the current chunk: entry k is padded[starts[k]:][:lens[k]]
	haveDict     bool
	lens, starts []int32
	padded       []byte

	// current data page
	left   int // rows (levels) left in the page
	defs   rleDecoder
	plain  bool // values are PLAIN byte arrays
	values []byte
	ids    rleDecoder

	// the batch being read: validity of its rows, and the values of its
	// present rows as ids into the current dictionary or, once the batch
	// met a PLAIN page or a new column chunk, as explicit slices
	valid    []bool
	idx      []int32
	vals     [][]byte
	usePlain bool
	idBytes  int64 // value bytes of the ids in idx
	// vals[pageVals:] point into the current page, whose memory the page
	// reader may reuse for the next page: they are copied out first.
	pageVals int
}

func newStringColumnReader(pf *file.Reader, col int, groups []int, mem memory.Allocator, typ arrow.DataType) *stringColumnReader {
	return &stringColumnReader{pf: pf, col: col, groups: groups, mem: mem, typ: typ,
		optional: pf.MetaData().Schema.Column(col).MaxDefinitionLevel() == 1}
}

func (r *stringColumnReader) release() {
	if r.pages != nil {
		r.pages.Close()
		r.pages = nil
	}
}

var errStringPage = errors.New("unexpected page")

// nextPage moves to the next data page, reading dictionary pages and
// opening the next row group's chunk on the way.
func (r *stringColumnReader) nextPage() error {
	for {
		if r.pages == nil {
			if r.nextRG >= len(r.groups) {
				return fmt.Errorf("%w: the column has fewer rows than the others", errStringPage)
			}
			pr, err := r.pf.RowGroup(r.groups[r.nextRG]).GetColumnPageReader(r.col)
			if err != nil {
				return err
			}
			r.nextRG++
			r.pages = pr
			// The batch may hold ids into the old dictionary: turn
			// them into values first. Dictionaries are never
			// overwritten (a new chunk gets new memory), so the
			// values stay valid.
			if len(r.idx) > 0 {
				r.toPlain()
			}
			r.lens, r.starts, r.padded, r.haveDict = nil, nil, nil, false
		}
		r.detachPageValues()
		if !r.pages.Next() {
			if err := r.pages.Err(); err != nil {
				return err
			}
			r.pages.Close()
			r.pages = nil
			continue
		}
		pg := r.pages.Page()
		switch p := pg.(type) {
		case *file.DictionaryPage:
			if r.haveDict {
				return fmt.Errorf("%w: a second dictionary page in a column chunk", errStringPage)
			}
			if err := r.loadDictionary(p.Data(), int(p.NumValues())); err != nil {
				return err
			}
			r.haveDict = true
		case *file.DataPageV1:
			if err := r.startDataPage(p); err != nil {
				return err
			}
			if r.left > 0 {
				return nil
			}
		default:
			return fmt.Errorf("%w: %T", errStringPage, pg)
		}
	}
}

// detachPageValues copies the batch's values that point into the current
// page into memory of their own.
func (r *stringColumnReader) detachPageValues() {
	if r.pageVals >= len(r.vals) {
		return
	}
	var n int
	for _, v := range r.vals[r.pageVals:] {
		n += len(v)
	}
	own := make([]byte, 0, n)
	for i, v := range r.vals[r.pageVals:] {
		at := len(own)
		own = append(own, v...)
		r.vals[r.pageVals+i] = own[at:len(own):len(own)]
	}
	r.pageVals = len(r.vals)
}

// loadDictionary decodes a PLAIN dictionary page of n byte arrays.
func (r *stringColumnReader) loadDictionary(data []byte, n int) error {
	r.padded = make([]byte, 0, len(data)+8)
	for k := range n {
		if len(data) < 4 {
			return fmt.Errorf("%w: dictionary page ends inside entry %d", errStringPage, k)
		}
		l := binary.LittleEndian.Uint32(data)
		if uint64(l) > uint64(len(data)-4) {
			return fmt.Errorf("%w: dictionary entry %d of %d bytes overruns the page", errStringPage, k, l)
		}
		r.starts = append(r.starts, int32(len(r.padded)))
		r.lens = append(r.lens, int32(l))
		r.padded = append(r.padded, data[4:4+l]...)
		data = data[4+l:]
	}
	r.padded = append(r.padded, make([]byte, 8)...)
	return nil
}

func (r *stringColumnReader) startDataPage(p *file.DataPageV1) error {
	data := p.Data()
	r.left = int(p.NumValues())
	if r.optional {
		if p.DefinitionLevelEncoding() != parquet.Encodings.RLE || len(data) < 4 {
			return fmt.Errorf("%w: definition levels encoded %s", errStringPage, p.DefinitionLevelEncoding())
		}
		l := binary.LittleEndian.Uint32(data)
		if uint64(l) > uint64(len(data)-4) {
			return fmt.Errorf("%w: definition levels overrun the page", errStringPage)
		}
		r.defs = rleDecoder{data: data[4 : 4+l], width: 1}
		data = data[4+l:]
	}
	switch enc := parquet.Encoding(p.Encoding()); enc {
	case parquet.Encodings.RLEDict, parquet.Encodings.PlainDict:
		if !r.haveDict {
			return fmt.Errorf("%w: dictionary-encoded page before any dictionary", errStringPage)
		}
		if len(data) < 1 || data[0] > 32 {
			return fmt.Errorf("%w: bad index bit width", errStringPage)
		}
		r.plain = false
		r.ids = rleDecoder{data: data[1:], width: uint(data[0])}
	case parquet.Encodings.Plain:
		r.plain = true
		r.values = data
	default:
		return fmt.Errorf("%w: values encoded %s", errStringPage, enc)
	}
	return nil
}

// toPlain switches the batch to explicit values.
func (r *stringColumnReader) toPlain() {
	if r.usePlain {
		return
	}
	for _, k := range r.idx {
		r.vals = append(r.vals, r.padded[r.starts[k]:r.starts[k]+r.lens[k]])
	}
	r.idx = r.idx[:0]
	r.usePlain = true
}

// read decodes the next n rows into an array of r.typ.
func (r *stringColumnReader) read(n int) (arrow.Array, error) {
	r.valid, r.idx, r.vals, r.usePlain, r.pageVals, r.idBytes = r.valid[:0], r.idx[:0], r.vals[:0], false, 0, 0
	nulls := 0
	for got := 0; got < n; {
		if r.left == 0 {
			if err := r.nextPage(); err != nil {
				return nil, err
			}
		}
		m := min(n-got, r.left)
		present := m
		if r.optional {
			start := len(r.valid)
			r.valid = append(r.valid, make([]bool, m)...)
			valid := r.valid[start:]
			present = 0
			for i := range m {
				lv, err := r.defs.next()
				if err != nil {
					return nil, err
				}
				valid[i] = lv == 1
				if lv == 1 {
					present++
				}
			}
			nulls += m - present
		}
		if r.plain {
			r.toPlain()
			for range present {
				if len(r.values) < 4 {
					return nil, fmt.Errorf("%w: plain values end early", errStringPage)
				}
				l := binary.LittleEndian.Uint32(r.values)
				if uint64(l) > uint64(len(r.values)-4) {
					return nil, fmt.Errorf("%w: plain value overruns the page", errStringPage)
				}
				r.vals = append(r.vals, r.values[4:4+l])
				r.values = r.values[4+l:]
			}
		} else {
			before := len(r.idx)
			r.idx = append(r.idx, make([]int32, present)...)
			ids := r.idx[before:]
			if err := r.ids.fill(ids); err != nil {
				return nil, err
			}
			// Check every id against the dictionary and sum the
			// values' lengths on the way.
			lens := r.lens
			ndict := uint32(len(lens))
			for _, k := range ids {
				if uint32(k) >= ndict {
					return nil, fmt.Errorf("%w: dictionary index %d of %d entries", errStringPage, k, ndict)
				}
				r.idBytes += int64(lens[k])
			}
			if r.usePlain {
				for _, k := range ids {
					r.vals = append(r.vals, r.padded[r.starts[k]:r.starts[k]+r.lens[k]])
				}
				r.idx = r.idx[:before]
			}
		}
		r.left -= m
		got += m
	}
	return r.build(n, nulls, r.usePlain)
}

// build makes the array of n rows from r.valid and r.idx (dictionary ids
// of the present rows) or r.vals (their values).
func (r *stringColumnReader) build(n, nulls int, usePlain bool) (arrow.Array, error) {
	total := r.idBytes
	if usePlain {
		total = 0
		for _, v := range r.vals {
			total += int64(len(v))
		}
	}
	if total > scanMaxBinaryBytes {
		return nil, fmt.Errorf("%w: %d bytes of strings in one batch", errStringPage, total)
	}
	offBuf := scanRawBuffer(r.mem, (n+1)*4)
	offs := unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(offBuf.Bytes()))), n+1)
	dataBuf := scanRawBuffer(r.mem, int(total)+8)
	data := dataBuf.Bytes()
	// r.valid is filled only for optional columns, and read only when
	// there are nulls.
	pos, j := int32(0), 0
	switch {
	case usePlain:
		vals := r.vals
		for i := range n {
			offs[i] = pos
			if nulls > 0 && !r.valid[i] {
				continue
			}
			pos += int32(copy(data[pos:], vals[j]))
			j++
		}
	case nulls == 0:
		// The hot loop: every row present, values from the dictionary.
		// Short values are moved as one unaligned 8-byte word without
		// bounds checks, which hold by construction: every id was checked
		// against the dictionary in read, the dictionary copy has 8 bytes
		// of padding, and data has 8 bytes past total (the sum of the
		// rows' lengths), so a word starting at pos <= total fits.
		lens, starts, padded := r.lens, r.starts, r.padded
		src := unsafe.Pointer(unsafe.SliceData(padded))
		dst := unsafe.Pointer(unsafe.SliceData(data))
		for i, k := range r.idx[:n] {
			offs[i] = pos
			l, st := lens[k], starts[k]
			if l <= 8 {
				*(*uint64)(unsafe.Add(dst, pos)) = *(*uint64)(unsafe.Add(src, st))
			} else {
				copy(data[pos:pos+l], padded[st:st+l])
			}
			pos += l
		}
	default:
		lens, starts, padded, idx, valid := r.lens, r.starts, r.padded, r.idx, r.valid
		for i := range n {
			offs[i] = pos
			if !valid[i] {
				continue
			}
			k := idx[j]
			j++
			l, st := lens[k], starts[k]
			if l <= 8 {
				binary.LittleEndian.PutUint64(data[pos:], binary.LittleEndian.Uint64(padded[st:]))
			} else {
				copy(data[pos:pos+l], padded[st:st+l])
			}
			pos += l
		}
	}
	offs[n] = pos
	dataBuf.ResizeNoShrink(int(total))
	valid := func(i int) bool { return r.valid[i] }
	return scanBinaryArray(r.mem, r.typ, n, nulls, valid, offBuf, dataBuf), nil
}

// rleDecoder reads Parquet's RLE / bit-packed hybrid encoding of values of
// width bits (0 to 32).
type rleDecoder struct {
	data  []byte
	width uint
	// current run
	repeat  int    // values left in an RLE run
	value   uint32 // its value
	packed  []byte // bytes of a bit-packed run
	packedN int    // values left in it
	bitPos  uint   // next bit in packed
}

func (d *rleDecoder) nextRun() error {
	h, n := binary.Uvarint(d.data)
	if n <= 0 {
		return fmt.Errorf("%w: bad run header", errStringPage)
	}
	d.data = d.data[n:]
	bw := int((d.width + 7) / 8)
	if h&1 == 0 {
		count := h >> 1
		if count == 0 || count > 1<<31 || len(d.data) < bw {
			return fmt.Errorf("%w: bad RLE run", errStringPage)
		}
		var v uint32
		for i := range bw {
			v |= uint32(d.data[i]) << (8 * i)
		}
		d.data = d.data[bw:]
		d.repeat, d.value = int(count), v
		return nil
	}
	groups := h >> 1
	if groups == 0 || groups > 1<<28 {
		return fmt.Errorf("%w: bad bit-packed run", errStringPage)
	}
	if d.width == 0 {
		d.packed, d.packedN, d.bitPos = nil, int(groups*8), 0
		return nil
	}
	nbytes := groups * uint64(d.width)
	if uint64(len(d.data)) < nbytes {
		// A writer may end the last run early: take the values there.
		nbytes = uint64(len(d.data))
	}
	d.packed, d.data = d.data[:nbytes], d.data[nbytes:]
	d.packedN, d.bitPos = int(nbytes*8/uint64(d.width)), 0
	if d.packedN == 0 {
		return fmt.Errorf("%w: bit-packed run without values", errStringPage)
	}
	return nil
}

// next returns the next value.
func (d *rleDecoder) next() (uint32, error) {
	for d.repeat == 0 && d.packedN == 0 {
		if err := d.nextRun(); err != nil {
			return 0, err
		}
	}
	if d.repeat > 0 {
		d.repeat--
		return d.value, nil
	}
	d.packedN--
	return d.unpack(), nil
}

func (d *rleDecoder) unpack() uint32 {
	if d.width == 0 {
		return 0
	}
	byteAt, shift := d.bitPos/8, d.bitPos%8
	var w uint64
	if int(byteAt)+8 <= len(d.packed) {
		w = binary.LittleEndian.Uint64(d.packed[byteAt:])
	} else {
		for i := 0; int(byteAt)+i < len(d.packed); i++ {
			w |= uint64(d.packed[int(byteAt)+i]) << (8 * i)
		}
	}
	d.bitPos += d.width
	return uint32((w >> shift) & (1<<d.width - 1))
}

// fill decodes len(dst) values.
func (d *rleDecoder) fill(dst []int32) error {
	for i := 0; i < len(dst); {
		for d.repeat == 0 && d.packedN == 0 {
			if err := d.nextRun(); err != nil {
				return err
			}
		}
		if d.repeat > 0 {
			m := min(d.repeat, len(dst)-i)
			v := int32(d.value)
			for j := range m {
				dst[i+j] = v
			}
			d.repeat -= m
			i += m
			continue
		}
		m := min(d.packedN, len(dst)-i)
		// Whole groups of 8 values while 8 bytes can be loaded past the
		// group's start, value by value at the edges.
		w := d.width
		mask := uint64(1)<<w - 1
		for m >= 8 && w > 0 && int(d.bitPos/8)+int(w)+8 <= len(d.packed) {
			out := dst[i : i+8]
			if w <= 16 && d.bitPos%8 == 0 && int(d.bitPos/8)+16 <= len(d.packed) {
				// The group's 8w ≤ 128 bits in two words.
				at := d.bitPos / 8
				lo := binary.LittleEndian.Uint64(d.packed[at:])
				hi := binary.LittleEndian.Uint64(d.packed[at+8:])
				for j := range out {
					bit := uint(j) * w
					var v uint64
					switch {
					case bit+w <= 64:
						v = lo >> bit
					case bit >= 64:
						v = hi >> (bit - 64)
					default:
						v = lo>>bit | hi<<(64-bit)
					}
					out[j] = int32(v & mask)
				}
			} else {
				for j := range out {
					bit := d.bitPos + uint(j)*w
					out[j] = int32((binary.LittleEndian.Uint64(d.packed[bit>>3:]) >> (bit & 7)) & mask)
				}
			}
			d.bitPos += 8 * w
			d.packedN -= 8
			i += 8
			m -= 8
		}
		for j := range m {
			dst[i+j] = int32(d.unpack())
		}
		d.packedN -= m
		i += m
	}
	return nil
}
