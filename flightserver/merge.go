package flightserver

import (
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/tsflight/tsflight/tableformat"
)

// A scan hands DoGet batches of up to 16K rows; Flight clients get batches
// of 64K to 128K rows. Copying the short batches into one (array.Concatenate)
// cost a seventh of a streaming server's CPU and a batch of memory per
// stream. Instead, the zero-copy writer sends several batches as one IPC
// record batch message: in the message body a column's buffer is just bytes
// in a row, so the values of consecutive batches, laid end to end, are the
// values of the merged column. Only what cannot be laid end to end is
// rebuilt: string offsets (rebased, 4 bytes per row) and bitmaps (validity,
// booleans), which are bit-packed.

// mergeable reports whether batches of this schema can be merged that way:
// every column is fixed-width, boolean, utf8 or binary (nested and
// dictionary columns are concatenated the usual way).
func mergeable(s *arrow.Schema) bool {
	for _, f := range s.Fields() {
		switch f.Type.ID() {
		case arrow.BOOL, arrow.STRING, arrow.BINARY, arrow.NULL:
			continue
		}
		if _, ok := f.Type.(arrow.FixedWidthDataType); !ok {
			return false
		}
		switch f.Type.ID() {
		case arrow.DICTIONARY, arrow.EXTENSION, arrow.RUN_END_ENCODED:
			return false
		}
		if f.Type.(arrow.FixedWidthDataType).BitWidth()%8 != 0 {
			return false
		}
	}
	return true
}

// maxGroupStringBytes bounds the string bytes of one column in a group:
// merged or concatenated, a column's offsets are int32. A group over it
// is sent batch by batch instead (only with strings of gigabytes).
var maxGroupStringBytes int64 = math.MaxInt32

// fitsOneBatch reports whether every string or binary column of group
// holds at most maxGroupStringBytes bytes in all.
func fitsOneBatch(group []arrow.RecordBatch) bool {
	for c, f := range group[0].Schema().Fields() {
		if f.Type.ID() != arrow.STRING && f.Type.ID() != arrow.BINARY {
			continue
		}
		var total int64
		for _, b := range group {
			var offs []int32
			switch v := b.Column(c).(type) {
			case *array.String:
				offs = v.ValueOffsets()
			case *array.Binary:
				offs = v.ValueOffsets()
			}
			if len(offs) > 0 {
				total += int64(offs[len(offs)-1] - offs[0])
			}
		}
		if total > maxGroupStringBytes {
			return false
		}
	}
	return true
}

// mergedMessage is the IPC encoding of batches as one record batch: the
// flatbuffer Message and the body as a list of byte slices, most of them
// pointing into the batches' buffers (which must stay alive until the
// message is sent).
type mergedMessage struct {
	header  []byte
	body    [][]byte
	size    int
	owned   int         // bytes of the body made here (bitmaps, offsets)
	buffers []ipcBuffer // where each Arrow buffer lies in the body
	pooled  [][]byte    // offsets taken from the scan pool (free returns them)
}

// free returns the message's pooled buffers; call it once nothing reads
// the body any more. A message never freed leaves them to the garbage
// collector.
func (m *mergedMessage) free() {
	for _, b := range m.pooled {
		mergePool.Free(b)
	}
	m.pooled = nil
}

// mergePool gives the rebased string offsets of merged messages, 4 bytes
// a row and string column, without clearing them first (every entry is
// written): a cleared Go allocation of them cost more than rebasing.
var mergePool = tableformat.ScanAllocator()

var ipcPadding [8]byte

type ipcNode struct{ length, nulls int64 }

type ipcBuffer struct{ offset, length int64 }

type mergeEncoder struct {
	m       mergedMessage
	nodes   []ipcNode
	buffers []ipcBuffer
}

// add appends one body buffer made of chunks laid end to end, padded to 8
// bytes.
func (e *mergeEncoder) add(chunks ...[]byte) {
	start := e.m.size
	for _, c := range chunks {
		if len(c) > 0 {
			e.m.body = append(e.m.body, c)
			e.m.size += len(c)
		}
	}
	e.buffers = append(e.buffers, ipcBuffer{int64(start), int64(e.m.size - start)})
	if pad := (8 - e.m.size%8) % 8; pad > 0 {
		e.m.body = append(e.m.body, ipcPadding[:pad])
		e.m.size += pad
	}
}

// mergeBitmaps packs the bits of each part (validity when valid is true,
// else boolean values) into one bitmap; a part without a validity bitmap
// counts as all valid.
func mergeBitmaps(parts []arrow.Array, rows int64, valid bool) []byte {
	out := make([]byte, bitutil.BytesForBits(rows))
	pos := int64(0)
	for _, a := range parts {
		n := int64(a.Len())
		off := int64(a.Data().Offset())
		var src []byte
		if valid {
			src = a.NullBitmapBytes()
		} else {
			src = a.Data().Buffers()[1].Bytes()
		}
		if valid && (src == nil || a.NullN() == 0) {
			bitutil.SetBitsTo(out, pos, n, true)
		} else {
			bitutil.CopyBitmap(src, int(off), int(n), out, int(pos))
		}
		pos += n
	}
	return out
}

// encodeMerged encodes batches (same schema, mergeable) as one record
// batch message.
func encodeMerged(batches []arrow.RecordBatch) *mergedMessage {
	e := &mergeEncoder{}
	var rows int64
	for _, b := range batches {
		rows += b.NumRows()
	}
	schema := batches[0].Schema()
	parts := make([]arrow.Array, len(batches))
	for c, f := range schema.Fields() {
		nulls := 0
		for i, b := range batches {
			parts[i] = b.Column(c)
			nulls += parts[i].NullN()
		}
		if f.Type.ID() == arrow.NULL {
			e.nodes = append(e.nodes, ipcNode{rows, rows})
			continue
		}
		e.nodes = append(e.nodes, ipcNode{rows, int64(nulls)})
		if nulls == 0 {
			e.add()
		} else {
			bm := mergeBitmaps(parts, rows, true)
			e.m.owned += len(bm)
			e.add(bm)
		}
		switch f.Type.ID() {
		case arrow.BOOL:
			bm := mergeBitmaps(parts, rows, false)
			e.m.owned += len(bm)
			e.add(bm)
		case arrow.STRING, arrow.BINARY:
			raw := tableformat.AllocateUninit(mergePool, 4*int(rows+1))
			e.m.pooled = append(e.m.pooled, raw)
			offs := arrow.Int32Traits.CastFromBytes(raw)[:rows+1]
			var data [][]byte
			pos, base := 0, int32(0)
			for _, a := range parts {
				var src []int32 // the part's n+1 offsets
				switch v := a.(type) {
				case *array.String:
					src = v.ValueOffsets()
				case *array.Binary:
					src = v.ValueOffsets()
				}
				n := a.Len()
				first, end := src[0], src[n]
				rebase(offs[pos:pos+n], src[:n], base-first)
				if raw := a.Data().Buffers()[2]; raw != nil && end > first {
					data = append(data, raw.Bytes()[first:end])
				}
				base += end - first
				pos += n
			}
			offs[rows] = base
			e.m.owned += 4 * len(offs)
			e.add(arrow.Int32Traits.CastToBytes(offs))
			e.add(data...)
		default:
			w := f.Type.(arrow.FixedWidthDataType).BitWidth() / 8
			chunks := make([][]byte, 0, len(parts))
			for _, a := range parts {
				off, n := a.Data().Offset(), a.Len()
				chunks = append(chunks, a.Data().Buffers()[1].Bytes()[off*w:(off+n)*w])
			}
			e.add(chunks...)
		}
	}
	e.m.header = e.header(rows)
	e.m.buffers = e.buffers
	return &e.m
}

// rebase sets dst[i] = src[i] + delta (len(dst) == len(src)), eight at
// a time: twice as fast as the plain loop, which checked bounds on every
// element.
func rebase(dst, src []int32, delta int32) {
	if delta == 0 {
		copy(dst, src)
		return
	}
	dst = dst[:len(src)]
	i := 0
	for ; i+8 <= len(src); i += 8 {
		s, d := src[i:i+8:i+8], dst[i:i+8:i+8]
		d[0], d[1], d[2], d[3] = s[0]+delta, s[1]+delta, s[2]+delta, s[3]+delta
		d[4], d[5], d[6], d[7] = s[4]+delta, s[5]+delta, s[6]+delta, s[7]+delta
	}
	for ; i < len(src); i++ {
		dst[i] = src[i] + delta
	}
}

// longPairs writes a flatbuffer vector of n structs of two longs, the
// i-th holding pair(i) in field order.
func longPairs(b *flatbuffers.Builder, n int, pair func(i int) (int64, int64)) flatbuffers.UOffsetT {
	b.StartVector(16, n, 8)
	for i := n - 1; i >= 0; i-- {
		first, second := pair(i)
		b.Prep(8, 16)
		b.PrependInt64(second)
		b.PrependInt64(first)
	}
	return b.EndVector(n)
}

// header builds the flatbuffer Message of a record batch (Arrow format
// Message.fbs and Schema.fbs: metadata version V5, no compression).
func (e *mergeEncoder) header(rows int64) []byte {
	b := flatbuffers.NewBuilder(256 + 16*(len(e.nodes)+len(e.buffers)))
	// struct Buffer { offset: long; length: long; }
	buffers := longPairs(b, len(e.buffers), func(i int) (int64, int64) { return e.buffers[i].offset, e.buffers[i].length })
	// struct FieldNode { length: long; null_count: long; }
	nodes := longPairs(b, len(e.nodes), func(i int) (int64, int64) { return e.nodes[i].length, e.nodes[i].nulls })
	// table RecordBatch { length: long; nodes: [FieldNode]; buffers: [Buffer]; ... }
	b.StartObject(5)
	b.PrependInt64Slot(0, rows, 0)
	b.PrependUOffsetTSlot(1, nodes, 0)
	b.PrependUOffsetTSlot(2, buffers, 0)
	rb := b.EndObject()
	// table Message { version: MetadataVersion; header: MessageHeader (union); bodyLength: long; ... }
	const metadataV5, headerRecordBatch = 4, 3
	b.StartObject(5)
	b.PrependInt16Slot(0, metadataV5, 0)
	b.PrependByteSlot(1, headerRecordBatch, 0)
	b.PrependUOffsetTSlot(2, rb, 0)
	b.PrependInt64Slot(3, int64(e.m.size), 0)
	b.Finish(b.EndObject())
	return b.FinishedBytes()
}
