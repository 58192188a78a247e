package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// readBatches reads a Parquet file into batches of up to 64 Ki rows.
func readBatches(path string) (*arrow.Schema, []arrow.RecordBatch, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	pf, err := file.NewParquetReader(f)
	if err != nil {
		return nil, nil, err
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 1 << 16, Parallel: true}, memory.DefaultAllocator)
	if err != nil {
		return nil, nil, err
	}
	rr, err := fr.GetRecordReader(context.Background(), nil, nil)
	if err != nil {
		return nil, nil, err
	}
	defer rr.Release()
	var out []arrow.RecordBatch
	for rr.Next() {
		b := rr.RecordBatch()
		b.Retain()
		out = append(out, b)
	}
	if err := rr.Err(); err != nil {
		release(out)
		return nil, nil, err
	}
	return rr.Schema(), out, nil
}

func release(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}

// putFiles appends each file to the table with one DoPut, reading the
// file before the clock starts, and returns the seconds spent in DoPuts.
func putFiles(ctx context.Context, c flight.Client, table string, paths []string) (float64, error) {
	var total time.Duration
	for _, path := range paths {
		schema, batches, err := readBatches(path)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", path, err)
		}
		start := time.Now()
		err = put(ctx, c, table, schema, batches)
		total += time.Since(start)
		release(batches)
		if err != nil {
			return 0, fmt.Errorf("DoPut %s: %w", path, err)
		}
	}
	return total.Seconds(), nil
}

// put sends batches as one DoPut stream and waits for the commit.
func put(ctx context.Context, c flight.Client, table string, schema *arrow.Schema, batches []arrow.RecordBatch) error {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{table}})
	for _, b := range batches {
		if err := w.Write(b); err != nil {
			break // the server ended the call: Recv says why
		}
	}
	w.Close()
	if err := stream.CloseSend(); err != nil {
		return err
	}
	res, err := stream.Recv()
	if err != nil {
		return err
	}
	var want int64
	for _, b := range batches {
		want += b.NumRows()
	}
	var ans struct {
		Rows int64 `json:"rows"`
	}
	if err := json.Unmarshal(res.AppMetadata, &ans); err != nil || ans.Rows != want {
		return fmt.Errorf("the server committed %q for %d rows sent", res.AppMetadata, want)
	}
	for {
		if _, err := stream.Recv(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}
