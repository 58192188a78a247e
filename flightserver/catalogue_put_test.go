package flightserver

// The DoPut rows of the bad-input catalogue (see catalogue_test.go):
// wrong, missing and extra columns, nulls in keys, duplicates and overlap,
// bad descriptors and commands, empty streams, a schema that changes in
// the middle of a stream and a batch over the server's receive limit.

import (
	"encoding/json"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
)

// catTS is a timestamp of the fixture's type from RFC 3339 text.
func catTS(s string) arrow.Timestamp {
	v, err := arrow.TimestampFromString(s, arrow.Nanosecond)
	if err != nil {
		panic(err)
	}
	return v
}

// fillRows appends rows to the first five columns of a TSBS-shaped
// builder (ts, hostname, three int64s), nulls where valid says.
func fillRows(b *array.RecordBuilder, ts []string, hosts []string, hostValid []bool) {
	for _, s := range ts {
		b.Field(0).(*array.TimestampBuilder).Append(catTS(s))
	}
	b.Field(1).(*array.StringBuilder).AppendValues(hosts, hostValid)
	for c := 2; c < b.Schema().NumFields(); c++ {
		for i := range ts {
			b.Field(c).(*array.Int64Builder).Append(int64(i))
		}
	}
}

var (
	catTSField   = tsbsSchema.Field(0)
	catHostField = tsbsSchema.Field(1)
	catCreate    = map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": []string{"hostname"}}
)

// putTSBS puts rows of the fixture's schema under desc.
func (e *catEnv) putTSBS(desc *flight.FlightDescriptor, rows []row) error {
	bs := buildBatches(e.cliMem, rows, 100)
	defer releaseAll(bs)
	_, err := e.put(e.ctx, desc, tsbsSchema, bs...)
	return err
}

// newRows are rows that do not overlap the fixture (a day later).
var newRows = genRows(t0.AddDate(0, 0, 1), 3, 2)

// recvOnly ends the sending side of a DoPut stream and returns the
// server's answer.
func recvOnly(stream flight.FlightService_DoPutClient) error {
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

func putCatalogue() []badCase {
	const cat = "DoPut: columns and types"
	const keys = "DoPut: keys and uniqueness"
	const stream = "DoPut: stream shape"
	const desc = "DoPut: descriptor"
	return []badCase{
		{name: "wrong column type (usage_user as utf8)", category: cat, op: "DoPut PATH [cpu]", code: codes.InvalidArgument, frags: []string{`"usage_user"`, "utf8", "int64"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, pathDesc("cpu"), []arrow.Field{catTSField, catHostField, {Name: "usage_user", Type: arrow.BinaryTypes.String, Nullable: true}, tsbsSchema.Field(3), tsbsSchema.Field(4)}, func(b *array.RecordBuilder) {
					b.Field(0).(*array.TimestampBuilder).Append(catTS("2024-06-05T00:00:00Z"))
					b.Field(1).(*array.StringBuilder).Append("host_0")
					b.Field(2).(*array.StringBuilder).Append("lots")
					b.Field(3).(*array.Int64Builder).Append(1)
					b.Field(4).(*array.Int64Builder).Append(1)
				})
			}},
		{name: "index column of the wrong type (int64 ts)", category: cat, op: "DoPut PATH [cpu]", code: codes.InvalidArgument, frags: []string{`"ts"`, "int64"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, pathDesc("cpu"), []arrow.Field{{Name: "ts", Type: arrow.PrimitiveTypes.Int64}, catHostField, tsbsSchema.Field(2), tsbsSchema.Field(3), tsbsSchema.Field(4)}, func(b *array.RecordBuilder) {
					b.Field(0).(*array.Int64Builder).Append(1)
					b.Field(1).(*array.StringBuilder).Append("host_0")
					for c := 2; c <= 4; c++ {
						b.Field(c).(*array.Int64Builder).Append(1)
					}
				})
			}},
		{name: "missing entity column (no hostname)", category: cat, op: "DoPut PATH [cpu]", code: codes.InvalidArgument, frags: []string{`"hostname"`, "missing"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, pathDesc("cpu"), []arrow.Field{catTSField, tsbsSchema.Field(2), tsbsSchema.Field(3), tsbsSchema.Field(4)}, func(b *array.RecordBuilder) {
					b.Field(0).(*array.TimestampBuilder).Append(catTS("2024-06-05T00:00:00Z"))
					for c := 1; c <= 3; c++ {
						b.Field(c).(*array.Int64Builder).Append(1)
					}
				})
			}},
		{name: "missing index column (no ts)", category: cat, op: "DoPut PATH [cpu]", code: codes.InvalidArgument, frags: []string{`"ts"`, "missing"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, pathDesc("cpu"), []arrow.Field{catHostField, tsbsSchema.Field(2), tsbsSchema.Field(3), tsbsSchema.Field(4)}, func(b *array.RecordBuilder) {
					b.Field(0).(*array.StringBuilder).Append("host_0")
					for c := 1; c <= 3; c++ {
						b.Field(c).(*array.Int64Builder).Append(1)
					}
				})
			}},
		{name: "missing value column (no usage_idle)", category: cat, op: "DoPut PATH [cpu]", code: codes.InvalidArgument, frags: []string{`"usage_idle"`, "missing"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, pathDesc("cpu"), tsbsSchema.Fields()[:4], func(b *array.RecordBuilder) {
					fillRows(b, []string{"2024-06-05T00:00:00Z"}, []string{"host_0"}, nil)
				})
			}},
		{name: "extra unknown column", category: cat, op: "DoPut PATH [cpu]", code: codes.InvalidArgument, frags: []string{`"extra"`},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, pathDesc("cpu"), append(tsbsSchema.Fields(), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int64}), func(b *array.RecordBuilder) {
					fillRows(b, []string{"2024-06-05T00:00:00Z"}, []string{"host_0"}, nil)
				})
			}},
		{name: "nullable entity column where the table's is not", category: cat, op: "DoPut PATH [cpu]", code: codes.InvalidArgument, frags: []string{`"hostname"`, "nullable"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, pathDesc("cpu"), []arrow.Field{catTSField, {Name: "hostname", Type: arrow.BinaryTypes.String, Nullable: true}, tsbsSchema.Field(2), tsbsSchema.Field(3), tsbsSchema.Field(4)}, func(b *array.RecordBuilder) {
					fillRows(b, []string{"2024-06-05T00:00:00Z"}, []string{"host_0"}, nil)
				})
			}},
		{name: "null in the time index", category: keys, op: "DoPut PATH [fresh]", code: codes.InvalidArgument, frags: []string{`"ts"`, "null", "row 1"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, pathDesc("fresh"), []arrow.Field{{Name: "ts", Type: catTSField.Type, Nullable: true}, catHostField, tsbsSchema.Field(2)}, func(b *array.RecordBuilder) {
					b.Field(0).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{catTS("2024-06-01T00:00:00Z"), 0}, []bool{true, false})
					b.Field(1).(*array.StringBuilder).AppendValues([]string{"host_0", "host_0"}, nil)
					b.Field(2).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
				})
			}},
		{name: "null in an entity column", category: keys, op: "DoPut PATH [fresh]", code: codes.InvalidArgument, frags: []string{`"hostname"`, "null", "row 1"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, pathDesc("fresh"), []arrow.Field{catTSField, {Name: "hostname", Type: arrow.BinaryTypes.String, Nullable: true}, tsbsSchema.Field(2)}, func(b *array.RecordBuilder) {
					fillRows(b, []string{"2024-06-01T00:00:00Z", "2024-06-01T00:00:10Z"}, []string{"host_0", ""}, []bool{true, false})
				})
			}},
		{name: "null in an entity column of a table the put creates", category: keys, op: "DoPut CMD {table: newt, create}", code: codes.InvalidArgument, frags: []string{`"hostname"`, "null", "row 1"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, cmdDesc(e.t, map[string]any{"table": "newt", "create": catCreate}), []arrow.Field{catTSField, {Name: "hostname", Type: arrow.BinaryTypes.String, Nullable: true}, tsbsSchema.Field(2)}, func(b *array.RecordBuilder) {
					fillRows(b, []string{"2024-06-01T00:00:00Z", "2024-06-01T00:00:10Z"}, []string{"host_0", ""}, []bool{true, false})
				})
			}},
		{name: "two rows in one (entity, interval) within one stream", category: keys, op: "DoPut PATH [cpu]", code: codes.FailedPrecondition, frags: []string{"more than one row in 2 (identity, index interval) pairs", "host_0", "2024-06-02T00:00:00Z"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, pathDesc("cpu"), tsbsSchema.Fields(), func(b *array.RecordBuilder) {
					fillRows(b, []string{"2024-06-02T00:00:00Z", "2024-06-02T00:00:05Z", "2024-06-02T00:00:20Z", "2024-06-02T00:00:29Z", "2024-06-02T00:00:40Z"},
						[]string{"host_0", "host_0", "host_1", "host_1", "host_0"}, nil)
				})
			}},
		{name: "two rows in one (entity, interval) in a table the put creates", category: keys, op: "DoPut CMD {table: newt, create}", code: codes.FailedPrecondition, frags: []string{"more than one row in 1 (identity, index interval) pairs", "host_0", "2024-06-02T00:00:00Z"},
			run: func(e *catEnv) error {
				return e.putColumns(e.ctx, cmdDesc(e.t, map[string]any{"table": "newt", "create": catCreate}), tsbsSchema.Fields(), func(b *array.RecordBuilder) {
					fillRows(b, []string{"2024-06-02T00:00:00Z", "2024-06-02T00:00:05Z"}, []string{"host_0", "host_0"}, nil)
				})
			}},
		{name: "the same row twice in two batches of one stream", category: keys, op: "DoPut PATH [cpu]", code: codes.FailedPrecondition, frags: []string{"more than one row in 1 (identity, index interval) pairs", "host_1", "2024-06-02T00:00:10Z"},
			run: func(e *catEnv) error {
				rows := genRows(t0.AddDate(0, 0, 1), 2, 2)
				return e.putTSBS(pathDesc("cpu"), append(rows, rows[3]))
			}},
		{name: "overlap with committed data", category: keys, op: "DoPut PATH [cpu]", code: codes.FailedPrecondition, frags: []string{"overlaps data already in the table", "version 2", "5 (identity, index interval) pairs", "host_0", "nothing was committed"},
			run: func(e *catEnv) error {
				return e.putTSBS(pathDesc("cpu"), genRows(t0.Add(timeOfStep(5)), 10, 1))
			}},
		{name: "the whole committed put sent again", category: keys, op: "DoPut CMD {table: cpu, create}", code: codes.FailedPrecondition, frags: []string{"overlaps data already in the table", "20 (identity, index interval) pairs"},
			run: func(e *catEnv) error {
				return e.putTSBS(cmdDesc(e.t, map[string]any{"table": "cpu", "create": catCreate}), catFixtureRows)
			}},
		{name: "stream with no messages", category: stream, op: "DoPut (CloseSend at once)", code: codes.InvalidArgument, frags: []string{"descriptor", "schema"},
			run: func(e *catEnv) error {
				s, err := e.client.DoPut(e.ctx)
				if err != nil {
					return err
				}
				return recvOnly(s)
			}},
		{name: "schema but no batches", category: stream, op: "DoPut PATH [cpu]", code: codes.InvalidArgument, frags: []string{"no rows"},
			run: func(e *catEnv) error {
				_, err := e.put(e.ctx, pathDesc("cpu"), tsbsSchema)
				return err
			}},
		{name: "only zero-row batches", category: stream, op: "DoPut PATH [cpu]", code: codes.InvalidArgument, frags: []string{"no rows"},
			run: func(e *catEnv) error {
				return e.putTSBS(pathDesc("cpu"), nil)
			}},
		{name: "only zero-row batches into a table the put would create", category: stream, op: "DoPut CMD {table: newt, create}", code: codes.InvalidArgument, frags: []string{"no rows"},
			run: func(e *catEnv) error {
				b := array.NewRecordBuilder(e.cliMem, tsbsSchema)
				rec := b.NewRecordBatch()
				b.Release()
				defer rec.Release()
				_, err := e.put(e.ctx, cmdDesc(e.t, map[string]any{"table": "newt", "create": catCreate}), tsbsSchema, rec, rec)
				return err
			}},
		{name: "batches without a descriptor", category: stream, op: "DoPut (no descriptor)", code: codes.InvalidArgument, frags: []string{"descriptor"},
			run: func(e *catEnv) error {
				s, err := e.client.DoPut(e.ctx)
				if err != nil {
					return err
				}
				bs := buildBatches(e.cliMem, newRows, 100)
				defer releaseAll(bs)
				w := flight.NewRecordWriter(s, ipc.WithSchema(tsbsSchema), ipc.WithAllocator(e.cliMem))
				_ = w.Write(bs[0])
				w.Close()
				return recvOnly(s)
			}},
		{name: "schema that changes in the middle of the stream", category: stream, op: "DoPut PATH [cpu], a second schema message", code: codes.InvalidArgument, frags: []string{"second schema message", "one DoPut stream carries one schema"},
			run: func(e *catEnv) error {
				s, err := e.client.DoPut(e.ctx)
				if err != nil {
					return err
				}
				good := buildBatches(e.cliMem, newRows, 100)
				defer releaseAll(good)
				w := flight.NewRecordWriter(s, ipc.WithSchema(tsbsSchema), ipc.WithAllocator(e.cliMem))
				w.SetFlightDescriptor(pathDesc("cpu"))
				_ = w.Write(good[0])
				w.Close()
				other := arrow.NewSchema(tsbsSchema.Fields()[:3], nil)
				b := array.NewRecordBuilder(e.cliMem, other)
				fillRows(b, []string{"2024-06-03T00:00:00Z"}, []string{"host_0"}, nil)
				rec := b.NewRecordBatch()
				b.Release()
				defer rec.Release()
				w2 := flight.NewRecordWriter(s, ipc.WithSchema(other), ipc.WithAllocator(e.cliMem))
				_ = w2.Write(rec)
				w2.Close()
				return recvOnly(s)
			}},
		{name: "record batch larger than the server's receive limit", category: stream, op: "DoPut PATH [cpu], one 2 MiB batch, server limit 256 KiB", code: codes.ResourceExhausted, frags: []string{"larger than max"},
			recvLimit: 256 << 10,
			run: func(e *catEnv) error {
				rows := genRows(t0.AddDate(0, 0, 1), 25000, 2)
				bs := buildBatches(e.cliMem, rows, len(rows))
				defer releaseAll(bs)
				_, err := e.put(e.ctx, pathDesc("cpu"), tsbsSchema, bs...)
				return err
			}},
		{name: "unknown table", category: desc, op: "DoPut PATH [nosuch]", code: codes.NotFound, frags: []string{`"nosuch"`, "not found"},
			run: func(e *catEnv) error { return e.putTSBS(pathDesc("nosuch"), newRows) }},
		{name: "unknown table, CMD without create", category: desc, op: `DoPut CMD {"table":"nosuch"}`, code: codes.NotFound, frags: []string{`"nosuch"`, "not found"},
			run: func(e *catEnv) error { return e.putTSBS(cmdDesc(e.t, `{"table":"nosuch"}`), newRows) }},
		{name: "CMD body is not JSON", category: desc, op: "DoPut CMD `{table: cpu`", code: codes.InvalidArgument, frags: []string{"DoPut command", "malformed JSON"},
			run: func(e *catEnv) error { return e.putTSBS(cmdDesc(e.t, `{table: cpu`), newRows) }},
		{name: "CMD body with an unknown field", category: desc, op: `DoPut CMD {"table":"cpu","bogus":1}`, code: codes.InvalidArgument, frags: []string{"DoPut command", `unknown field "bogus"`},
			run: func(e *catEnv) error { return e.putTSBS(cmdDesc(e.t, `{"table":"cpu","bogus":1}`), newRows) }},
		{name: "CMD create.table differs from table", category: desc, op: "DoPut CMD {table: newt, create: {table: other}}", code: codes.InvalidArgument, frags: []string{"create.table", `"other"`, `"newt"`},
			run: func(e *catEnv) error {
				spec := map[string]any{"table": "other"}
				for k, v := range catCreate {
					spec[k] = v
				}
				return e.putTSBS(cmdDesc(e.t, map[string]any{"table": "newt", "create": spec}), newRows)
			}},
		{name: "CMD create with an unknown index type", category: desc, op: "DoPut CMD {table: newt, create: {index_type: float}}", code: codes.InvalidArgument, frags: []string{"index_type", `"float"`},
			run: func(e *catEnv) error {
				return e.putTSBS(cmdDesc(e.t, map[string]any{"table": "newt", "create": map[string]any{"index_column": "ts", "index_type": "float", "granularity": "10s"}}), newRows)
			}},
		{name: "CMD create whose index column is not in the stream", category: desc, op: "DoPut CMD {table: newt, create: {index_column: time}}", code: codes.InvalidArgument, frags: []string{`"time"`},
			run: func(e *catEnv) error {
				return e.putTSBS(cmdDesc(e.t, map[string]any{"table": "newt", "create": map[string]any{"index_column": "time", "index_type": "timestamp", "granularity": "10s"}}), newRows)
			}},
		{name: "Flight SQL command sent to a plain Flight server", category: desc, op: "DoPut CMD CommandStatementIngest", code: codes.Unimplemented, frags: []string{"Flight SQL is not served", "arrow.flight.protocol.sql.CommandStatementIngest"},
			run: func(e *catEnv) error {
				url := "type.googleapis.com/arrow.flight.protocol.sql.CommandStatementIngest"
				cmd := append([]byte{0x0a, byte(len(url))}, url...)
				return e.putTSBS(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd}, newRows)
			}},
		{name: "PATH descriptor with two elements", category: desc, op: "DoPut PATH [cpu, x]", code: codes.InvalidArgument, frags: []string{"exactly one element", "got 2"},
			run: func(e *catEnv) error {
				return e.putTSBS(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"cpu", "x"}}, newRows)
			}},
		{name: "descriptor of type UNKNOWN", category: desc, op: "DoPut UNKNOWN descriptor", code: codes.InvalidArgument, frags: []string{"descriptor type"},
			run: func(e *catEnv) error {
				return e.putTSBS(&flight.FlightDescriptor{Type: flight.DescriptorUNKNOWN, Path: []string{"cpu"}}, newRows)
			}},
	}
}

// jsonOf marshals v or panics (case bodies are static).
func jsonOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return strings.TrimSpace(string(b))
}
