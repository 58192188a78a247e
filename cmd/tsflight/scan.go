package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var scanCmd = &command{
	Name:    "scan",
	Group:   "client",
	Summary: "read a table's rows in a time range",
	Usage:   "tsflight scan [--start T] [--end T] [--columns A,B] [--entity COL=VALUE]... [--format table|csv|json|parquet] [--output FILE] TABLE",
	Help: `Reads the rows of a table whose index lies in [--start, --end), reading
only the segments that range needs. Times are RFC 3339
(2016-01-01T06:00:00Z, any offset); integer indexes take integers. Rows
come in segment order, not sorted. --entity keeps one series (repeat for
tables with several entity columns). The table format shows the first
--max-rows rows; csv, json (one object per line) and parquet write them
all.

Example:
  tsflight scan --start 2016-01-01T06:00:00Z --end 2016-01-01T07:00:00Z --entity hostname=host_1 cpu
  tsflight scan --columns time,hostname,usage_user --format parquet --output cpu.parquet cpu`,
}

func init() { register(scanCmd, runScan) }

func runScan(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(scanCmd)
	server := serverFlag(fs)
	out := addOutputFlags(fs, formatTable, formatCSV, formatJSON, formatParquet)
	var start, end string
	var columns listFlag
	entities := entityFlag{}
	var version optionalVersion
	fs.StringVar(&start, "start", "", "first index value, inclusive (`time`: RFC 3339, or an integer)")
	fs.StringVar(&end, "end", "", "last index value, exclusive (`time`)")
	fs.Var(&columns, "columns", "the `columns` to return, in this order (comma-separated; all by default)")
	fs.Var(entities, "entity", "keep rows whose entity `column=value` (repeatable)")
	fs.Var(&version, "version", "read this table `version` instead of the newest")
	table, err := parseTable(fs, e, args, out)
	if err != nil {
		return err
	}
	req := map[string]any{"table": table}
	if start != "" {
		req["start"] = start
	}
	if end != "" {
		req["end"] = end
	}
	if len(columns) > 0 {
		req["columns"] = []string(columns)
	}
	if m := entities.request(); m != nil {
		req["entity"] = m
	}
	if version.v != nil {
		req["version"] = *version.v
	}
	cmd, err := json.Marshal(req)
	if err != nil {
		return err
	}
	return withClient(ctx, server, func(ctx context.Context, c *client) error {
		info, err := c.fl.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: cmd})
		if err != nil {
			return c.wrap(err)
		}
		return writeResult(ctx, e, c, out, info, func(ctx context.Context, t *flight.Ticket) (*flight.Reader, error) {
			stream, err := c.fl.DoGet(ctx, t)
			if err != nil {
				return nil, err
			}
			return flight.NewRecordReader(stream)
		})
	})
}

// doGetFunc opens one endpoint's stream.
type doGetFunc func(ctx context.Context, t *flight.Ticket) (*flight.Reader, error)

// writeResult reads info's endpoints in order and writes their rows to
// out. On failure a file given with --output is removed.
func writeResult(ctx context.Context, e *env, c *client, out *outputFlags, info *flight.FlightInfo, doGet doGetFunc) (err error) {
	schema, err := flight.DeserializeSchema(info.Schema, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	w, finish, err := out.open(e)
	if err != nil {
		return err
	}
	var sink rowSink
	defer func() {
		err = errors.Join(err, finish(err == nil))
	}()
	for _, ep := range info.Endpoint {
		rdr, err := doGet(ctx, ep.Ticket)
		if err != nil {
			return c.wrap(err)
		}
		if sink == nil {
			// The stream's schema is exact (the info's may be a
			// description made before the query ran).
			if sink, err = out.newSink(w, rdr.Schema()); err != nil {
				rdr.Release()
				return err
			}
		}
		for rdr.Next() {
			if err := sink.write(rdr.RecordBatch()); err != nil {
				rdr.Release()
				return err
			}
		}
		err = rdr.Err()
		rdr.Release()
		if err != nil {
			return c.wrap(err)
		}
	}
	if sink == nil {
		if sink, err = out.newSink(w, schema); err != nil {
			return err
		}
	}
	return sink.close()
}
