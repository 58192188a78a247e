package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"google.golang.org/grpc"
)

// The Flight ceiling: an arrow-go Flight server holding a table's batches
// in memory, streaming them with arrow-go's own record writer on every
// DoGet. No disk, no decoding, no planning: what a Flight server can send
// on this machine, the bound a whole-table DoGet is compared with. (It
// uses arrow-go's standard writer; tsflight sends its batches through its
// own zero-copy gRPC codec — part of what is being measured.)

var ceilingRE = listenRE("ceiling")

// ceilingServer serves its batches over as many endpoints as tsflight's
// plan of the same table has (batch i goes to endpoint i mod n), so that a
// client reads both with the same parallelism.
type ceilingServer struct {
	flight.BaseFlightServer
	schema    *arrow.Schema
	batches   []arrow.RecordBatch
	rows      int64
	endpoints int
}

func (s *ceilingServer) GetFlightInfo(context.Context, *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	info := &flight.FlightInfo{
		Schema:       flight.SerializeSchema(s.schema, memory.DefaultAllocator),
		TotalRecords: s.rows,
		TotalBytes:   -1,
	}
	for i := range s.endpoints {
		info.Endpoint = append(info.Endpoint, &flight.FlightEndpoint{Ticket: &flight.Ticket{Ticket: []byte(strconv.Itoa(i))}})
	}
	return info, nil
}

func (s *ceilingServer) DoGet(t *flight.Ticket, stream flight.FlightService_DoGetServer) error {
	ep, err := strconv.Atoi(string(t.Ticket))
	if err != nil || ep < 0 || ep >= s.endpoints {
		return fmt.Errorf("unknown ticket %q", t.Ticket)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(s.schema))
	defer w.Close()
	for i := ep; i < len(s.batches); i += s.endpoints {
		if err := w.Write(s.batches[i]); err != nil {
			return err
		}
	}
	return nil
}

// runCeiling is "tsbench ceiling [--listen ADDR] [--batch-rows N] FILE...":
// it loads the Parquet files and serves them until SIGTERM.
func runCeiling(args []string) error {
	fs := flag.NewFlagSet("ceiling", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address")
	batchRows := fs.Int("batch-rows", 65536, "rows per batch")
	endpoints := fs.Int("endpoints", 1, "endpoints to spread the batches over")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *endpoints < 1 {
		return fmt.Errorf("--endpoints must be at least 1")
	}
	s := &ceilingServer{endpoints: *endpoints}
	for _, path := range fs.Args() {
		if err := s.load(path, *batchRows); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if s.schema == nil {
		return fmt.Errorf("no files")
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := flight.NewServerWithMiddleware(nil, grpc.MaxSendMsgSize(1<<30))
	srv.RegisterFlightService(s)
	srv.InitListener(lis)
	fmt.Printf("ceiling listening on %s (%d rows in %d batches)\n", lis.Addr(), s.rows, len(s.batches))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sigs; srv.Shutdown() }()
	return srv.Serve()
}

func (s *ceilingServer) load(path string, batchRows int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: int64(batchRows), Parallel: true}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return err
	}
	defer rr.Release()
	for rr.Next() {
		b := rr.RecordBatch()
		if s.schema == nil {
			s.schema = b.Schema()
		} else if !s.schema.Equal(b.Schema()) {
			return fmt.Errorf("schema %v differs from the first file's %v", b.Schema(), s.schema)
		}
		b.Retain()
		s.batches = append(s.batches, b)
		s.rows += b.NumRows()
	}
	return rr.Err()
}
