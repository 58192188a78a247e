package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var lastCmd = &command{
	Name:    "last",
	Group:   "client",
	Summary: "the newest row of every entity",
	Usage:   "tsflight last [--entity COL=VALUE]... [--columns A,B] [--format table|csv|json] [--output FILE] TABLE",
	Help: `Prints the newest row (by index) of every entity of a table, sorted by
entity. The server answers from the table's last-value index, which it
keeps up to date from the coverage sidecars, without scanning the table.
--entity keeps the entities whose column has that value (repeat it for
more entity columns; a table with several may be filtered on some of
them); --columns picks the columns, in that order. The table must have
entity columns. The table format shows the first --max-rows rows; csv and
json (one object per line) write them all.

Example:
  tsflight last cpu
  tsflight last --entity hostname=host_7 --columns time,usage_user cpu`,
}

func init() { register(lastCmd, runLast) }

func runLast(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(lastCmd)
	server := serverFlag(fs)
	out := addOutputFlags(fs, formatTable, formatCSV, formatJSON)
	var columns listFlag
	entities := entityFlag{}
	fs.Var(&columns, "columns", "the `columns` to return, in this order (comma-separated; all by default)")
	fs.Var(entities, "entity", "keep the entities whose `column=value` (repeatable)")
	table, err := parseTable(fs, e, args, out)
	if err != nil {
		return err
	}
	req := map[string]any{"table": table}
	if m := entities.request(); m != nil {
		req["entity"] = m
	}
	if len(columns) > 0 {
		req["columns"] = []string(columns)
	}
	return withClient(ctx, server, func(ctx context.Context, c *client) error {
		raw, err := c.action(ctx, "last", req, nil)
		if err != nil {
			return err
		}
		return writeLast(e, out, raw)
	})
}

// writeLast writes the rows of a last answer (an Arrow IPC stream) as out
// asks. On failure a file given with --output is left as it was.
func writeLast(e *env, out *outputFlags, raw []byte) (err error) {
	rdr, err := ipc.NewReader(bytes.NewReader(raw), ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return fmt.Errorf("the server's answer to last is not an Arrow IPC stream: %w", err)
	}
	defer rdr.Release()
	w, finish, err := out.open(e)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, finish(err == nil))
	}()
	sink, err := out.newSink(w, rdr.Schema())
	if err != nil {
		return err
	}
	for rdr.Next() {
		if err := sink.write(rdr.RecordBatch()); err != nil {
			return err
		}
	}
	if err := rdr.Err(); err != nil {
		return fmt.Errorf("the server's answer to last: %w", err)
	}
	return sink.close()
}
