package flightserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tsflight/tsflight/flightserver"
)

// A Service is an Arrow Flight service over a root directory of tables:
// register it with a Flight server and any Flight client writes with
// DoPut, reads with GetFlightInfo and DoGet, and asks for coverage with
// DoAction.
func ExampleService() {
	ctx := context.Background()
	root, err := os.MkdirTemp("", "tsflight-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(root)

	svc, err := flightserver.New(flightserver.DefaultOptions(root))
	if err != nil {
		log.Fatal(err)
	}
	srv := flight.NewServerWithMiddleware(nil, svc.GRPCOptions()...)
	srv.RegisterFlightService(svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv.InitListener(lis)
	go srv.Serve()
	defer srv.Shutdown()

	client, err := flight.NewClientWithMiddleware(srv.Addr().String(), nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// DoPut with a CMD descriptor that creates the table on first use:
	// two sensors, one reading a minute, sensor s2 silent at minute 1.
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "time", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
		{Name: "sensor", Type: arrow.BinaryTypes.String},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	start := time.Date(2024, 6, 1, 0, 0, 0, 0, time.UTC)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for _, r := range []struct {
		sensor string
		minute int
	}{{"s1", 0}, {"s1", 1}, {"s1", 2}, {"s2", 0}, {"s2", 2}} {
		b.Field(0).(*array.TimestampBuilder).Append(arrow.Timestamp(start.Add(time.Duration(r.minute) * time.Minute).UnixMicro()))
		b.Field(1).(*array.StringBuilder).Append(r.sensor)
		b.Field(2).(*array.Float64Builder).Append(float64(r.minute))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	put, err := client.DoPut(ctx)
	if err != nil {
		log.Fatal(err)
	}
	w := flight.NewRecordWriter(put, ipc.WithSchema(schema))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(
		`{"table":"temps","create":{"table":"temps","index_column":"time","index_type":"timestamp","granularity":"1m","entity_columns":["sensor"]}}`)})
	if err := w.Write(rec); err != nil {
		log.Fatal(err)
	}
	w.Close()
	if err := put.CloseSend(); err != nil {
		log.Fatal(err)
	}
	for {
		res, err := put.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		var pr flightserver.PutResult
		if err := json.Unmarshal(res.AppMetadata, &pr); err != nil {
			log.Fatal(err)
		}
		fmt.Println("put: version", pr.Version, "rows", pr.Rows)
	}

	// GetFlightInfo names the endpoints; DoGet reads each.
	info, err := client.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"temps"}})
	if err != nil {
		log.Fatal(err)
	}
	var rows int64
	for _, ep := range info.Endpoint {
		stream, err := client.DoGet(ctx, ep.Ticket)
		if err != nil {
			log.Fatal(err)
		}
		rdr, err := flight.NewRecordReader(stream)
		if err != nil {
			log.Fatal(err)
		}
		for rdr.Next() {
			rows += rdr.RecordBatch().NumRows()
		}
		if err := rdr.Err(); err != nil {
			log.Fatal(err)
		}
		rdr.Release()
	}
	fmt.Println("rows read:", rows)

	// The coverage action answers a CoverageAnswer.
	act, err := client.DoAction(ctx, &flight.Action{Type: flightserver.ActionCoverage, Body: []byte(
		`{"table":"temps","start":"2024-06-01T00:00:00Z","end":"2024-06-01T00:03:00Z"}`)})
	if err != nil {
		log.Fatal(err)
	}
	res, err := act.Recv()
	if err != nil {
		log.Fatal(err)
	}
	var cov flightserver.CoverageAnswer
	if err := json.Unmarshal(res.Body, &cov); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("coverage: %d of %d (sensor, minute) pairs\n", cov.Covered, cov.Expected)
	// Output:
	// put: version 2 rows 5
	// rows read: 5
	// coverage: 5 of 6 (sensor, minute) pairs
}
