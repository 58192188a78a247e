package flightserver

import (
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the default codec we delegate to
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// The Flight libraries build each DoGet message by copying the Arrow body
// into one []byte, which gRPC's protobuf codec then copies again: two
// copies of every batch, live at once per stream. Servers that install
// [Service.GRPCOptions] send DoGet batches through zeroCopyCodec instead,
// which frames the FlightData protobuf around the Arrow buffers themselves
// and lets gRPC write them to the socket directly. Every other message goes
// through the standard codec.

// zeroCopyMessage is a FlightData message whose body is still in Arrow
// buffers. release is called once gRPC has written all of them.
type zeroCopyMessage struct {
	header  []byte
	chunks  [][]byte
	bodyLen int
	owned   int // bytes of chunks made for the message (not Arrow buffers)
	release func()
	// marshalled is set once gRPC owns the chunks: from then on only
	// gRPC's freeing of them releases the payload.
	marshalled atomic.Bool
}

type zeroCopyCodec struct{ std encoding.CodecV2 }

func (zeroCopyCodec) Name() string { return "proto" }

func (c zeroCopyCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return unmarshalFlightData(c.std, data, v)
}

// Marshal frames a zeroCopyMessage as FlightData: data_header (field 2) and
// data_body (field 1000), whose bytes are the Arrow buffers; anything else
// is marshalled by the standard codec.
func (c zeroCopyCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*zeroCopyMessage)
	if !ok {
		return c.std.Marshal(v)
	}
	m.marshalled.Store(true)
	prefix := protowire.AppendTag(nil, 2, protowire.BytesType)
	prefix = protowire.AppendBytes(prefix, m.header)
	if m.bodyLen > 0 {
		prefix = protowire.AppendTag(prefix, 1000, protowire.BytesType)
		prefix = protowire.AppendVarint(prefix, uint64(m.bodyLen))
	}
	out := make(mem.BufferSlice, 0, len(m.chunks)+1)
	out = append(out, mem.SliceBuffer(prefix))
	pool := &releasePool{release: m.release}
	var shared []*[]byte
	for _, chunk := range m.chunks {
		if mem.IsBelowBufferPoolingThreshold(len(chunk)) {
			// Too small for gRPC to track: copy it, so that nothing
			// untracked points into the Arrow buffers.
			out = append(out, mem.SliceBuffer(append([]byte(nil), chunk...)))
			continue
		}
		p := &chunk
		shared = append(shared, p)
		out = append(out, nil) // placeholder, filled below
	}
	pool.refs.Store(int32(len(shared)))
	j := 0
	for i := range out {
		if out[i] == nil {
			out[i] = mem.NewBuffer(shared[j], pool)
			j++
		}
	}
	if len(shared) == 0 {
		m.release()
	}
	return out, nil
}

// releasePool is the mem.BufferPool of one message's Arrow chunks: when
// gRPC has returned every chunk, the Arrow payload is released.
type releasePool struct {
	refs    atomic.Int32
	release func()
}

func (p *releasePool) Get(length int) *[]byte {
	b := make([]byte, length)
	return &b
}

func (p *releasePool) Put(*[]byte) {
	if p.refs.Add(-1) == 0 {
		p.release()
	}
}

// GRPCOptions returns the gRPC server options the service works best with:
// the zero-copy codec for DoGet. Pass them when creating the gRPC (Flight)
// server; the service then sends DoGet batches without copying them.
func (s *Service) GRPCOptions() []grpc.ServerOption {
	s.zeroCopy.Store(true)
	return []grpc.ServerOption{grpc.ForceServerCodecV2(zeroCopyCodec{std: encoding.GetCodecV2("proto")})}
}

// bodyCapture collects the slices ipc.Payload.SerializeBody writes, without
// copying them.
type bodyCapture struct {
	chunks [][]byte
	n      int
}

func (b *bodyCapture) Write(p []byte) (int, error) {
	b.chunks = append(b.chunks, p)
	b.n += len(p)
	return len(p), nil
}

// sendZeroCopy sends one IPC payload (schema or batch) on stream; then,
// when not nil, is called with the payload's release, once gRPC is done
// with the body.
func sendZeroCopy(stream grpc.ServerStream, p ipc.Payload, then func()) error {
	meta := p.Meta()
	var body bodyCapture
	if err := p.SerializeBody(&body); err != nil {
		meta.Release()
		p.Release()
		if then != nil {
			then()
		}
		return err
	}
	return sendMessage(stream, meta.Bytes(), body.chunks, body.n, 0, func() {
		meta.Release()
		p.Release()
		if then != nil {
			then()
		}
	})
}

// sendMessage sends one FlightData message whose body is chunks; release
// is called once, when nothing reads the chunks any more.
func sendMessage(stream grpc.ServerStream, header []byte, chunks [][]byte, bodyLen, owned int, release func()) error {
	var once atomic.Bool
	m := &zeroCopyMessage{header: header, chunks: chunks, bodyLen: bodyLen, owned: owned, release: func() {
		if once.CompareAndSwap(false, true) {
			release()
		}
	}}
	err := stream.SendMsg(m)
	if err != nil && !m.marshalled.Load() {
		// gRPC never took the chunks: nothing else will release them.
		// (Once marshalled, gRPC frees them even when sending fails; the
		// transport may still be reading them until then.)
		m.release()
	}
	return err
}

// zeroCopyWriter writes a DoGet stream: the schema first, then batches.
type zeroCopyWriter struct {
	stream   grpc.ServerStream
	mem      memory.Allocator
	groupMem memory.Allocator // for groups that must be concatenated
	started  bool
	schema   *arrow.Schema
}

func (w *zeroCopyWriter) start() error {
	if w.started {
		return nil
	}
	w.started = true
	return sendZeroCopy(w.stream, ipc.GetSchemaPayload(w.schema, w.mem), nil)
}

func (w *zeroCopyWriter) Write(rec arrow.RecordBatch) error {
	if err := w.start(); err != nil {
		return err
	}
	p, err := ipc.GetRecordBatchPayload(rec, ipc.WithAllocator(w.mem))
	if err != nil {
		return err
	}
	// The batch itself is held until gRPC has sent it, not only its
	// buffers: a batch of the scan cache's arrays is on the stream's
	// account while it is held (tableformat.SharedHolder).
	rec.Retain()
	return sendZeroCopy(w.stream, p, rec.Release)
}

// WriteGroup sends the batches of group as one record batch: merged
// without copying when the schema allows (see merge.go), else
// concatenated.
func (w *zeroCopyWriter) WriteGroup(group []arrow.RecordBatch) error {
	var merge func([]arrow.RecordBatch) error
	if mergeable(w.schema) {
		merge = w.writeMerged
	}
	return writeGroup(w, group, w.groupMem, merge)
}

// writeMerged sends group as one record batch laid end to end.
func (w *zeroCopyWriter) writeMerged(group []arrow.RecordBatch) error {
	if err := w.start(); err != nil {
		return err
	}
	m := encodeMerged(group)
	for _, b := range group {
		b.Retain()
	}
	return sendMessage(w.stream, m.header, m.body, m.size, m.owned, func() {
		m.free()
		releaseAll(group)
	})
}

func (w *zeroCopyWriter) Close() error { return w.start() }
