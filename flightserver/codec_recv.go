package flightserver

import (
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Receiving a FlightData message through gRPC's protobuf codec copies its
// Arrow body twice: the frames gRPC read are first gathered into one
// pooled buffer (cleared when taken from the pool), and protobuf then
// copies data_body out of it. For a DoPut of large batches those copies
// were a quarter of the server's receive time. unmarshalFlightData reads
// the FlightData fields straight out of gRPC's frame buffers instead, and
// copies the body once, into the slice the Arrow record will keep.
// Messages below recvDirectMin bytes, and anything that is not a
// FlightData, go through the standard codec.

// recvDirectMin is the smallest message decoded directly.
const recvDirectMin = 64 << 10

// recvDirect counts the messages decoded directly (for tests).
var recvDirect atomic.Int64

// unmarshalFlightData is the server codec's Unmarshal.
func unmarshalFlightData(std encoding.CodecV2, data mem.BufferSlice, v any) error {
	fd, ok := v.(*flight.FlightData)
	if !ok || data.Len() < recvDirectMin {
		return std.Unmarshal(data, v)
	}
	if !decodeFlightData(data, fd) {
		// Something decodeFlightData does not handle (a group, say):
		// protobuf decides what it is.
		return std.Unmarshal(data, v)
	}
	recvDirect.Add(1)
	return nil
}

// decodeFlightData decodes data into fd, reporting false (fd then in no
// particular state) when data holds anything but well-formed FlightData
// fields and unknown scalar or length-delimited fields.
func decodeFlightData(data mem.BufferSlice, fd *flight.FlightData) bool {
	proto.Reset(fd)
	c := frameCursor{bufs: data, left: data.Len()}
	for c.left > 0 {
		tag, ok := c.uvarint()
		if !ok {
			return false
		}
		num, typ := protowire.DecodeTag(tag)
		if tag>>3 > uint64(protowire.MaxValidNumber) || !num.IsValid() {
			return false
		}
		switch typ {
		case protowire.VarintType:
			if _, ok := c.uvarint(); !ok {
				return false
			}
			continue
		case protowire.Fixed32Type:
			if !c.skip(4) {
				return false
			}
			continue
		case protowire.Fixed64Type:
			if !c.skip(8) {
				return false
			}
			continue
		case protowire.BytesType:
		default:
			return false
		}
		n, ok := c.uvarint()
		if !ok || n > uint64(c.left) {
			return false
		}
		switch num {
		case 1: // flight_descriptor: small, and merged if repeated
			b := make([]byte, n)
			c.read(b)
			if fd.FlightDescriptor == nil {
				fd.FlightDescriptor = &flight.FlightDescriptor{}
			}
			if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(b, fd.FlightDescriptor); err != nil {
				return false
			}
		case 2: // data_header
			fd.DataHeader = make([]byte, n)
			c.read(fd.DataHeader)
		case 3: // app_metadata
			fd.AppMetadata = make([]byte, n)
			c.read(fd.AppMetadata)
		case 1000: // data_body: the one copy of the Arrow buffers
			fd.DataBody = make([]byte, n)
			c.read(fd.DataBody)
		default:
			c.skip(int(n))
		}
	}
	return true
}

// frameCursor reads a BufferSlice front to back without taking it over.
type frameCursor struct {
	bufs mem.BufferSlice
	i    int // current buffer
	off  int // offset in it
	left int // bytes not read yet
}

// next returns the unread part of the current buffer, moving past empty
// ones.
func (c *frameCursor) next() []byte {
	for c.i < len(c.bufs) {
		b := c.bufs[c.i].ReadOnlyData()[c.off:]
		if len(b) > 0 {
			return b
		}
		c.i, c.off = c.i+1, 0
	}
	return nil
}

func (c *frameCursor) uvarint() (uint64, bool) {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		b := c.next()
		if len(b) == 0 {
			return 0, false
		}
		c.off++
		c.left--
		if shift == 63 && b[0] > 1 {
			return 0, false // overflows 64 bits: protobuf refuses it too
		}
		v |= uint64(b[0]&0x7f) << shift
		if b[0] < 0x80 {
			return v, true
		}
	}
	return 0, false
}

// read fills dst; the caller has checked that enough bytes are left.
func (c *frameCursor) read(dst []byte) {
	for len(dst) > 0 {
		n := copy(dst, c.next())
		dst = dst[n:]
		c.off += n
		c.left -= n
	}
}

func (c *frameCursor) skip(n int) bool {
	if n > c.left {
		return false
	}
	for n > 0 {
		k := min(n, len(c.next()))
		n -= k
		c.off += k
		c.left -= k
	}
	return true
}
