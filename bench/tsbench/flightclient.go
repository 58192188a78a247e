package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// msgSize is the client's message limit: above any batch either server
// sends.
const msgSize = 1 << 30

func dialFlight(addr string) (flight.Client, error) {
	return flight.NewClientWithMiddleware(addr, nil, nil,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(msgSize), grpc.MaxCallSendMsgSize(msgSize)))
}

// serveAndDial starts a tsflight server of root (startServer) and dials
// it; a server whose dial fails is stopped.
func serveAndDial(bin, root string, extra ...string) (*child, flight.Client, error) {
	srv, err := startServer(bin, root, extra...)
	if err != nil {
		return nil, nil, err
	}
	c, err := dialFlight(srv.addr)
	if err != nil {
		srv.stop()
		return nil, nil, err
	}
	return srv, c, nil
}

// openSQL opens an ADBC Flight SQL connection to the server at addr;
// closeSQL closes the connection, then its database.
func openSQL(ctx context.Context, addr string) (cnxn adbc.Connection, closeSQL func(), err error) {
	db, err := adbcflightsql.NewDriver(memory.DefaultAllocator).NewDatabase(map[string]string{adbc.OptionKeyURI: "grpc+tcp://" + addr})
	if err != nil {
		return nil, nil, err
	}
	if cnxn, err = db.Open(ctx); err != nil {
		db.Close()
		return nil, nil, err
	}
	return cnxn, func() {
		cnxn.Close()
		db.Close()
	}, nil
}

// readTicket starts the DoGet of ticket and returns its reader.
func readTicket(ctx context.Context, c flight.Client, ticket *flight.Ticket) (*flight.Reader, error) {
	stream, err := c.DoGet(ctx, ticket)
	if err != nil {
		return nil, err
	}
	return flight.NewRecordReader(stream)
}

// drain plans desc and reads every endpoint, all at once as a client
// that wants the data fast would, decoding every batch. It returns the
// rows and the bytes of the decoded batches.
func drain(ctx context.Context, c flight.Client, desc *flight.FlightDescriptor) (rows, bytes int64, err error) {
	info, err := c.GetFlightInfo(ctx, desc)
	if err != nil {
		return 0, 0, err
	}
	var nrows, nbytes atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, len(info.Endpoint))
	for i, ep := range info.Endpoint {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = func() error {
				rdr, err := readTicket(ctx, c, ep.Ticket)
				if err != nil {
					return err
				}
				defer rdr.Release()
				for rdr.Next() {
					b := rdr.RecordBatch()
					nrows.Add(b.NumRows())
					for _, col := range b.Columns() {
						for _, buf := range col.Data().Buffers() {
							if buf != nil {
								nbytes.Add(int64(buf.Len()))
							}
						}
					}
				}
				return rdr.Err()
			}()
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return 0, 0, e
		}
	}
	return nrows.Load(), nbytes.Load(), nil
}

// action runs a tsflight action and decodes its JSON answer into out.
func action(ctx context.Context, c flight.Client, name string, req, out any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	stream, err := c.DoAction(ctx, &flight.Action{Type: name, Body: body})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	res, err := stream.Recv()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for {
		if _, err := stream.Recv(); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(res.Body, out)
}
