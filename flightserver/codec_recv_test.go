package flightserver

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/tsflight/tsflight/internal/testkit"
)

// split cuts b into a BufferSlice of pieces of random sizes (some empty),
// as gRPC hands over a message read from several frames.
func split(rng *rand.Rand, b []byte) mem.BufferSlice {
	var out mem.BufferSlice
	for len(b) > 0 {
		n := min(len(b), rng.IntN(20000))
		out = append(out, mem.SliceBuffer(b[:n]))
		b = b[n:]
	}
	return out
}

// The direct decoder reads what protobuf reads: every field, in any
// order, repeated, among unknown fields (which it skips), from buffers cut
// anywhere.
func TestRecvDecodesFlightDataAsProtobuf(t *testing.T) {
	std := encoding.GetCodecV2("proto")
	rng := rand.New(rand.NewPCG(1, 2))
	body := make([]byte, 300_000)
	for i := range body {
		body[i] = byte(rng.IntN(256))
	}
	desc, err := proto.Marshal(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(`{"table":"t"}`)})
	if err != nil {
		t.Fatal(err)
	}
	descPath, err := proto.Marshal(&flight.FlightDescriptor{Path: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	field := func(b []byte, num protowire.Number, v []byte) []byte {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendBytes(b, v)
	}
	cases := map[string][]byte{}
	var m []byte
	m = field(m, 1, desc)
	m = field(m, 2, []byte("header"))
	m = field(m, 3, []byte("meta"))
	m = field(m, 1000, body)
	cases["in order"] = m
	m = nil
	m = field(m, 1000, body[:100_000])
	m = protowire.AppendTag(m, 7, protowire.VarintType)
	m = protowire.AppendVarint(m, 1<<40)
	m = protowire.AppendTag(m, 8, protowire.Fixed32Type)
	m = protowire.AppendFixed32(m, 5)
	m = protowire.AppendTag(m, 9, protowire.Fixed64Type)
	m = protowire.AppendFixed64(m, 6)
	m = field(m, 10, []byte("unknown bytes"))
	m = field(m, 2, []byte("header"))
	m = field(m, 1, desc)
	m = field(m, 1, descPath) // merged into the first
	m = field(m, 1000, body)  // the last one wins
	cases["shuffled, repeated, unknown fields"] = m
	cases["body only"] = field(nil, 1000, body)
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			want := &flight.FlightData{}
			if err := proto.Unmarshal(msg, want); err != nil {
				t.Fatal(err)
			}
			// Unknown fields are dropped (arrow-go ignores them).
			want.ProtoReflect().SetUnknown(nil)
			for range 5 {
				got := &flight.FlightData{DataHeader: []byte("stale")}
				if err := unmarshalFlightData(std, split(rng, msg), got); err != nil {
					t.Fatal(err)
				}
				if !proto.Equal(got, want) {
					t.Fatalf("decoded %v, protobuf %v", got.String()[:min(200, len(got.String()))], want.String()[:min(200, len(want.String()))])
				}
			}
		})
	}
}

// Malformed messages are refused as protobuf refuses them, and a group
// (which the direct decoder leaves to protobuf) is still refused.
func TestRecvRefusesMalformedFlightData(t *testing.T) {
	std := encoding.GetCodecV2("proto")
	rng := rand.New(rand.NewPCG(3, 4))
	body := bytes.Repeat([]byte{7}, 100_000)
	whole := protowire.AppendBytes(protowire.AppendTag(nil, 1000, protowire.BytesType), body)
	cases := map[string][]byte{
		"truncated body":      whole[:len(whole)-1],
		"length past the end": append(protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.BytesType), 1<<40), body...),
		"field number zero":   append([]byte{0x02, 0x01, 0x00}, whole...),
		"bad descriptor":      append(protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff}), whole...),
		"group":               append(protowire.AppendTag(nil, 5, protowire.StartGroupType), whole...),
		"truncated varint":    append(whole, 0x80),
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			if err := proto.Unmarshal(msg, &flight.FlightData{}); err == nil {
				t.Fatalf("protobuf accepts the case; it tests nothing")
			}
			if err := unmarshalFlightData(std, split(rng, msg), &flight.FlightData{}); err == nil {
				t.Fatal("accepted a malformed FlightData")
			}
		})
	}
}

// A DoPut whose IPC bodies are LZ4- or ZSTD-compressed (arrow-go client)
// is decoded and appended like an uncompressed one, through batches big
// enough for the direct decoder.
func TestPutCompressedIPCBodies(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	rows := genRows(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), 60, 500) // 30,000 rows
	for _, c := range []struct {
		name string
		opt  ipc.Option
	}{{"lz4", ipc.WithLZ4()}, {"zstd", ipc.WithZstd()}} {
		t.Run(c.name, func(t *testing.T) {
			table := "c" + c.name
			ts.createTSBS(ctx, table)
			batches := buildBatches(ts.cliMem, rows, 15_000)
			defer releaseAll(batches)
			stream, err := ts.client.DoPut(ctx)
			if err != nil {
				t.Fatal(err)
			}
			direct := recvDirect.Load()
			w := flight.NewRecordWriter(stream, ipc.WithSchema(tsbsSchema), ipc.WithAllocator(ts.cliMem), c.opt)
			w.SetFlightDescriptor(pathDesc(table))
			for _, b := range batches {
				if err := w.Write(b); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := stream.CloseSend(); err != nil {
				t.Fatal(err)
			}
			res, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != io.EOF {
				t.Fatalf("second Recv: %v, want EOF", err)
			}
			if !bytes.Contains(res.AppMetadata, []byte(`"rows":30000`)) {
				t.Fatalf("PutResult %s, want 30000 rows", res.AppMetadata)
			}
			got := ts.readAll(t, ctx, table)
			sameRows(t, c.name+" put", sortRows(got.rows), sortRows(rows))
			if recvDirect.Load() == direct {
				t.Fatal("no batch went through the direct decoder: the test needs bigger batches")
			}
		})
	}
}

// The same from pyarrow: IpcWriteOptions(compression=…) through the
// client's write options, batches big enough for the direct decoder.
func TestPutCompressedIPCBodiesPyarrow(t *testing.T) {
	py := testkit.CrashPython(t)
	if py == "" {
		return
	}
	ts := startServer(t, nil)
	const script = `import json, sys
import pyarrow as pa, pyarrow.flight as fl
n = 60000
t = pa.table({"ts": pa.array([i // 600 * 10_000_000 for i in range(n)], pa.timestamp("us", "UTC")),
              "hostname": pa.array(["host_%d" % (i % 600) for i in range(n)]),
              "usage_user": pa.array([i % 97 for i in range(n)], pa.int64())})
c = fl.connect("grpc://" + sys.argv[1])
opts = fl.FlightCallOptions(write_options=pa.ipc.IpcWriteOptions(compression=sys.argv[2]))
cmd = {"table": "p" + sys.argv[2], "create": {"index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": ["hostname"]}}
w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), t.schema, options=opts)
w.write_table(t, max_chunksize=30000)
w.done_writing()
print(r.read().to_pybytes().decode())
w.close()`
	for _, codec := range []string{"lz4", "zstd"} {
		direct := recvDirect.Load()
		out, err := exec.Command(py, "-c", script, ts.srv.Addr().String(), codec).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", codec, err, out)
		}
		if !bytes.Contains(out, []byte(`"rows":60000`)) {
			t.Fatalf("%s: PutResult %s, want 60000 rows", codec, out)
		}
		if recvDirect.Load() == direct {
			t.Fatalf("%s: no batch went through the direct decoder", codec)
		}
		got, err := ts.fetchAll(ctxT(t), ts.info(ctxT(t), pathDesc("p"+codec)))
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, r := range got.rows {
			sum += r.user
		}
		if len(got.rows) != 60000 || sum != 2878839 {
			t.Fatalf("%s: read back %d rows summing %d, want 60000 summing 2878839", codec, len(got.rows), sum)
		}
	}
}

// FuzzDecodeFlightData: on any bytes, cut anywhere, the direct decoder
// either gives the message up to protobuf (false) or reads exactly what
// protobuf reads; it never accepts what protobuf refuses and never panics.
func FuzzDecodeFlightData(f *testing.F) {
	full, err := proto.Marshal(&flight.FlightData{
		FlightDescriptor: &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"cpu"}},
		DataHeader:       []byte("header"), AppMetadata: []byte("meta"), DataBody: bytes.Repeat([]byte{7}, 300),
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(full, uint64(1))
	f.Add(full[:len(full)-5], uint64(2))
	f.Add(protowire.AppendTag(nil, 1000, protowire.BytesType), uint64(3))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00}, uint64(4))
	f.Add([]byte{0x0b, 0x0c}, uint64(5)) // a group
	f.Fuzz(func(t *testing.T, b []byte, seed uint64) {
		var want flight.FlightData
		wantErr := proto.Unmarshal(b, &want)
		var got flight.FlightData
		ok := decodeFlightData(split(rand.New(rand.NewPCG(seed, 7)), b), &got)
		if !ok {
			return // protobuf decides
		}
		if wantErr != nil {
			t.Fatalf("decoded what protobuf refuses (%v): % x", wantErr, b)
		}
		if !proto.Equal(got.FlightDescriptor, want.FlightDescriptor) ||
			!bytes.Equal(got.DataHeader, want.DataHeader) || !bytes.Equal(got.AppMetadata, want.AppMetadata) ||
			!bytes.Equal(got.DataBody, want.DataBody) {
			t.Fatalf("decoded differently from protobuf: % x", b)
		}
	})
}
