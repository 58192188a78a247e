package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// This file holds what the client commands share (connecting, argument
// checks, --entity flags) and the tables command.

// clientContext is ctx cancelled by SIGINT or SIGTERM, so that an
// interrupted command abandons its calls (an interrupted load commits
// nothing). Only the first signal is caught: a second one kills the
// process, as it would any program, should the command not stop at once
// (blocked writing its output, say).
func clientContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}

// withClient connects to the server named by uri, runs fn and closes the
// connection.
func withClient(ctx context.Context, server *serverFlags, fn func(ctx context.Context, c *client) error) error {
	c, err := dialServer(server)
	if err != nil {
		return err
	}
	defer c.close()
	ctx, cancel := clientContext(ctx)
	defer cancel()
	return fn(ctx, c)
}

// oneTable checks that the positional arguments are exactly one table name.
func oneTable(rest []string) (string, error) {
	switch len(rest) {
	case 0:
		return "", usagef("missing the table name")
	case 1:
		if rest[0] == "" {
			return "", usagef("the table name is empty")
		}
		return rest[0], nil
	default:
		return "", usagef("unexpected argument %q after the table name (flags go before it: tsflight CMD [flags] TABLE)", rest[1])
	}
}

// parseTable parses a command whose one argument is a table name, and
// checks the output flags (when out is not nil).
func parseTable(fs *flagSet, e *env, args []string, out *outputFlags) (string, error) {
	rest, err := fs.parse(e, args)
	if err != nil {
		return "", err
	}
	table, err := oneTable(rest)
	if err != nil {
		return "", err
	}
	if out != nil {
		if err := out.check(e); err != nil {
			return "", err
		}
	}
	return table, nil
}

// entityFlag collects repeated --entity col=value flags.
type entityFlag map[string]string

func (e entityFlag) String() string {
	keys := make([]string, 0, len(e))
	for k := range e {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + e[k]
	}
	return strings.Join(parts, ",")
}

func (e entityFlag) Set(s string) error {
	col, val, ok := strings.Cut(s, "=")
	if !ok || col == "" {
		return fmt.Errorf("%q is not COLUMN=VALUE", s)
	}
	if _, dup := e[col]; dup {
		return fmt.Errorf("column %q given twice", col)
	}
	e[col] = val
	return nil
}

// request returns the entities as a request field: values are sent as
// JSON strings, which the server reads as integers for integer columns.
func (e entityFlag) request() map[string]string {
	if len(e) == 0 {
		return nil
	}
	return map[string]string(e)
}

// optionalVersion is a --version flag: a table version, or unset.
type optionalVersion struct{ v *int64 }

func (o *optionalVersion) String() string {
	if o.v == nil {
		return ""
	}
	return strconv.FormatInt(*o.v, 10)
}

func (o *optionalVersion) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a table version (a non-negative integer)", s)
	}
	o.v = &v
	return nil
}

var tablesCmd = &command{
	Name:    "tables",
	Group:   "client",
	Summary: "list the server's tables",
	Usage:   "tsflight tables [--server URI] [--format table|csv|json]",
	Help: `Lists every table the server holds, with its row count, live data size
and number of columns.

Example:
  tsflight tables
  tsflight tables --format json --server grpc://db1:8815`,
}

func init() {
	tablesCmd.Run = runTables
	register(tablesCmd)
}

func runTables(ctx context.Context, e *env, args []string) error {
	fs := newFlagSet(tablesCmd)
	server := serverFlag(fs)
	out := addOutputFlags(fs, formatTable, formatCSV, formatJSON)
	rest, err := fs.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	if err := out.check(e); err != nil {
		return err
	}
	return withClient(ctx, server, func(ctx context.Context, c *client) error {
		stream, err := c.fl.ListFlights(ctx, &flight.Criteria{})
		if err != nil {
			return c.wrap(err)
		}
		type row struct {
			Table   string `json:"table"`
			Rows    int64  `json:"rows"`
			Bytes   int64  `json:"bytes"`
			Columns int    `json:"columns"`
		}
		var rows []row
		for {
			info, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return c.wrap(err)
			}
			r := row{Rows: info.TotalRecords, Bytes: info.TotalBytes}
			if d := info.FlightDescriptor; d != nil && len(d.Path) == 1 {
				r.Table = d.Path[0]
			}
			if s, err := flight.DeserializeSchema(info.Schema, nil); err == nil {
				r.Columns = s.NumFields()
			}
			rows = append(rows, r)
		}
		slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.Table, b.Table) })
		return out.emit(e, func(w io.Writer) error {
			if out.format.value == formatJSON {
				for _, r := range rows {
					if err := writeJSONLine(w, r); err != nil {
						return err
					}
				}
				return nil
			}
			g := grid{header: []string{"table", "rows", "bytes", "columns"}, right: []bool{false, true, true, true}}
			for _, r := range rows {
				g.rows = append(g.rows, []string{r.Table, strconv.FormatInt(r.Rows, 10), strconv.FormatInt(r.Bytes, 10), strconv.Itoa(r.Columns)})
			}
			if out.format.value == formatCSV {
				return g.writeCSV(w)
			}
			if err := g.print(w); err != nil || len(rows) > 0 {
				return err
			}
			_, err := fmt.Fprintln(w, "(no tables yet: tsflight create TABLE … then tsflight load TABLE FILE)")
			return err
		})
	})
}
