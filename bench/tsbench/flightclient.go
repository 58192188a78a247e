package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/flight"
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
				stream, err := c.DoGet(ctx, ep.Ticket)
				if err != nil {
					return err
				}
				rdr, err := flight.NewRecordReader(stream)
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
