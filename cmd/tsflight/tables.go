package main

import (
	"context"
	"encoding/json"
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

	"github.com/tsflight/tsflight/flightserver"
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

A table the server cannot read (its log is damaged: CURRENT unreadable or
ahead of the commits, a commit missing or malformed; or it needs a newer
tsflight) is listed too, never left out: when there is one, the listing
gains the columns state ("ok", "damaged" or "unreadable") and error (what
the server says is wrong; in JSON also code, the gRPC code), its rows,
bytes and columns are unknown ("-" in the table, empty in CSV, null in
JSON), and after printing the whole listing the command fails with exit
status 1, naming the tables: run tsflight check TABLE for what to restore
or repair. A table directory whose log holds no commit (a create that
failed for lack of space leaves one) is no table and is not listed.

Example:
  tsflight tables
  tsflight tables --format json --server grpc://db1:8815`,
}

func init() { register(tablesCmd, runTables) }

// tableRow is one table of the tables command. Rows, Bytes and Columns
// are nil for a table the server cannot read; State, Code and Error are set
// only then.
type tableRow struct {
	Table   string `json:"table"`
	Rows    *int64 `json:"rows"`
	Bytes   *int64 `json:"bytes"`
	Columns *int   `json:"columns"`
	State   string `json:"state,omitempty"`
	Code    string `json:"code,omitempty"`
	Error   string `json:"error,omitempty"`
}

// tableRowOf reads one FlightInfo of ListFlights: a readable table, or one
// whose app_metadata is a flightserver.TableProblem.
func tableRowOf(info *flight.FlightInfo) tableRow {
	var r tableRow
	if d := info.FlightDescriptor; d != nil && len(d.Path) == 1 {
		r.Table = d.Path[0]
	}
	var p flightserver.TableProblem
	if len(info.AppMetadata) > 0 && json.Unmarshal(info.AppMetadata, &p) == nil && p.State != "" {
		r.State, r.Code, r.Error = p.State, p.Code, p.Error
		return r
	}
	rows, bytes, cols := info.TotalRecords, info.TotalBytes, 0
	if s, err := flight.DeserializeSchema(info.Schema, nil); err == nil {
		cols = s.NumFields()
	}
	r.Rows, r.Bytes, r.Columns = &rows, &bytes, &cols
	return r
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
		var rows []tableRow
		var bad []string
		for {
			info, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return c.wrap(err)
			}
			rows = append(rows, tableRowOf(info))
		}
		slices.SortFunc(rows, func(a, b tableRow) int { return strings.Compare(a.Table, b.Table) })
		for _, r := range rows {
			if r.State != "" {
				bad = append(bad, r.Table)
			}
		}
		if err := out.emit(e, func(w io.Writer) error {
			if out.format.value == formatJSON {
				for _, r := range rows {
					if err := writeJSONLine(w, r); err != nil {
						return err
					}
				}
				return nil
			}
			csv := out.format.value == formatCSV
			g := tablesGrid(rows, len(bad) > 0, csv)
			if csv {
				return g.writeCSV(w)
			}
			if err := g.print(w); err != nil || len(rows) > 0 {
				return err
			}
			_, err := fmt.Fprintln(w, "(no tables yet: tsflight create TABLE … then tsflight load TABLE FILE)")
			return err
		}); err != nil {
			return err
		}
		if len(bad) > 0 {
			return fmt.Errorf("%s of %s cannot be read: %s (tsflight check TABLE says what is wrong)",
				plural(int64(len(bad)), "table", "tables"), itoa(int64(len(rows))), strings.Join(bad, ", "))
		}
		return nil
	})
}

// tablesGrid lays rows out: the columns table, rows, bytes and columns,
// and state and error when some table cannot be read (problems). Unknown
// numbers are "-" in the table, empty in CSV.
func tablesGrid(rows []tableRow, problems, csv bool) *grid {
	g := grid{header: []string{"table", "rows", "bytes", "columns"}, right: []bool{false, true, true, true}}
	if problems {
		g.header = append(g.header, "state", "error")
	}
	unknown := "-"
	if csv {
		unknown = ""
	}
	for _, r := range rows {
		cells := []string{r.Table, unknown, unknown, unknown}
		if r.Rows != nil {
			cells = []string{r.Table, strconv.FormatInt(*r.Rows, 10), strconv.FormatInt(*r.Bytes, 10), strconv.Itoa(*r.Columns)}
		}
		if problems {
			state, msg := "ok", ""
			if r.State != "" {
				state, msg = r.State, r.Error
				// The row names the table: drop the message's
				// `table "NAME": ` prefix.
				msg = strings.TrimPrefix(msg, "table "+strconv.Quote(r.Table)+": ")
			}
			cells = append(cells, state, msg)
		}
		g.rows = append(g.rows, cells)
	}
	return &g
}
