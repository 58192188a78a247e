// Command floorserver is the floor of Flight SQL's per-query cost: a Flight
// SQL server (arrow-go's flightsql.BaseServer) that answers "SELECT 1" and
// "SELECT ? + 1" from memory, with no SQL engine, no planning and no disk.
// Any other text executed as a plain statement (GetFlightInfo, then DoGet;
// not prepared) gets one row of one int64, 1, without being read: the
// floor of the bench's bigseg queries over the ADBC Go driver.
// Measured with the same client loop as tsflight
// (examples/python/latency_adbc.py), the difference is tsflight's own cost;
// the rest is the client, gRPC and the machine.
//
//	go run ./flightsql/internal/floorserver [-listen 127.0.0.1:0]
//
// It prints "floorserver listening on ADDR" and serves until killed.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// server answers two prepared texts: "SELECT 1" (int32 1) and
// "SELECT ? + 1" (the bound int64 plus one); and every plain statement
// with anyRow.
type server struct {
	flightsql.BaseServer
	mu     sync.Mutex
	bound  map[string]int64 // handle → the value bound last
	params map[string]bool  // handle → the statement takes a parameter
}

var (
	oneSchema   = arrow.NewSchema([]arrow.Field{{Name: "1", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, nil)
	plusSchema  = arrow.NewSchema([]arrow.Field{{Name: "($1 + 1)", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	paramSchema = arrow.NewSchema([]arrow.Field{{Name: "parameter_1", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
)

// anyHandle is the statement handle in the ticket of every plain
// statement; prepared handles are 24 hex digits, so never this.
const anyHandle = "any statement"

var anySchema = arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)

// GetFlightInfoStatement answers any query text with one endpoint whose
// ticket DoGetStatement answers with anyRow; the text is not looked at.
func (s *server) GetFlightInfoStatement(_ context.Context, _ flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	tkt, err := flightsql.CreateStatementQueryTicket([]byte(anyHandle))
	if err != nil {
		return nil, err
	}
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(anySchema, memory.DefaultAllocator),
		FlightDescriptor: desc,
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		TotalRecords:     1,
		TotalBytes:       -1,
	}, nil
}

// anyRow is the answer to every plain statement: n = 1.
func anyRow() arrow.RecordBatch {
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Append(1)
	col := b.NewArray()
	defer col.Release()
	return array.NewRecordBatch(anySchema, []arrow.Array{col}, 1)
}

func newHandle() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *server) CreatePreparedStatement(_ context.Context, req flightsql.ActionCreatePreparedStatementRequest) (flightsql.ActionCreatePreparedStatementResult, error) {
	h := newHandle()
	q := strings.TrimSpace(req.GetQuery())
	s.mu.Lock()
	defer s.mu.Unlock()
	switch q {
	case "SELECT 1":
		s.params[h] = false
		return flightsql.ActionCreatePreparedStatementResult{Handle: []byte(h), DatasetSchema: oneSchema}, nil
	case "SELECT ? + 1":
		s.params[h] = true
		return flightsql.ActionCreatePreparedStatementResult{Handle: []byte(h), DatasetSchema: plusSchema, ParameterSchema: paramSchema}, nil
	}
	return flightsql.ActionCreatePreparedStatementResult{}, status.Errorf(codes.InvalidArgument, "floorserver answers only SELECT 1 and SELECT ? + 1, not %q", q)
}

func (s *server) ClosePreparedStatement(_ context.Context, req flightsql.ActionClosePreparedStatementRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.params, string(req.GetPreparedStatementHandle()))
	delete(s.bound, string(req.GetPreparedStatementHandle()))
	return nil
}

func (s *server) DoPutPreparedStatementQuery(_ context.Context, cmd flightsql.PreparedStatementQuery, rdr flight.MessageReader, _ flight.MetadataWriter) ([]byte, error) {
	h := cmd.GetPreparedStatementHandle()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumCols() == 1 && rec.NumRows() == 1 {
			if c, ok := rec.Column(0).(*array.Int64); ok {
				s.mu.Lock()
				s.bound[string(h)] = c.Value(0)
				s.mu.Unlock()
			}
		}
	}
	return h, rdr.Err()
}

func (s *server) GetFlightInfoPreparedStatement(_ context.Context, cmd flightsql.PreparedStatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	h := cmd.GetPreparedStatementHandle()
	s.mu.Lock()
	param, ok := s.params[string(h)]
	s.mu.Unlock()
	if !ok {
		return nil, status.Error(codes.NotFound, "unknown handle")
	}
	sc := oneSchema
	if param {
		sc = plusSchema
	}
	tkt, err := flightsql.CreateStatementQueryTicket(h)
	if err != nil {
		return nil, err
	}
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(sc, memory.DefaultAllocator),
		FlightDescriptor: desc,
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		TotalRecords:     1,
		TotalBytes:       -1,
	}, nil
}

func (s *server) DoGetStatement(_ context.Context, tkt flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	h := string(tkt.GetStatementHandle())
	if h == anyHandle {
		ch := make(chan flight.StreamChunk, 1)
		ch <- flight.StreamChunk{Data: anyRow()}
		close(ch)
		return anySchema, ch, nil
	}
	s.mu.Lock()
	param, ok := s.params[h]
	v := s.bound[h]
	s.mu.Unlock()
	if !ok {
		return nil, nil, status.Error(codes.NotFound, "unknown handle")
	}
	var rec arrow.RecordBatch
	sc := oneSchema
	if param {
		sc = plusSchema
		b := array.NewInt64Builder(memory.DefaultAllocator)
		b.Append(v + 1)
		col := b.NewArray()
		b.Release()
		rec = array.NewRecordBatch(sc, []arrow.Array{col}, 1)
		col.Release()
	} else {
		b := array.NewInt32Builder(memory.DefaultAllocator)
		b.Append(1)
		col := b.NewArray()
		b.Release()
		rec = array.NewRecordBatch(sc, []arrow.Array{col}, 1)
		col.Release()
	}
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: rec}
	close(ch)
	return sc, ch, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	flag.Parse()
	srv, err := start(*listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("floorserver listening on %s\n", srv.Addr())
	if err := srv.Serve(); err != nil {
		log.Fatal(err)
	}
}

// start listens on addr with a new server, not yet serving.
func start(addr string) (flight.Server, error) {
	srv := flight.NewServerWithMiddleware(nil)
	srv.RegisterFlightService(flightsql.NewFlightServer(&server{bound: map[string]int64{}, params: map[string]bool{}}))
	if err := srv.Init(addr); err != nil {
		return nil, err
	}
	return srv, nil
}
