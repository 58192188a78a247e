package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Exit codes (exitUnavailable, 3, is in client.go).
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// env is what a command may touch of the process: its output streams and
// environment. Tests substitute their own.
type env struct {
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	in     io.Reader // standard input (nil: the process's)
}

// stdin returns the command's standard input.
func (e *env) stdin() io.Reader {
	if e.in == nil {
		return os.Stdin
	}
	return e.in
}

// command is one subcommand. A command file declares one and registers it
// from init; run dispatches on Name. Client commands (tables, describe,
// create, load, scan, last, sql, coverage, gaps, add-columns, vacuum, check) go
// in the "client" group.
type command struct {
	Name    string
	Group   string // "server", "client" or "other": orders the command list
	Summary string // one line for the command list
	Usage   string // synopsis, e.g. "tsflight serve [flags]"
	Help    string // what it does, with an example; printed by --help
	// Run executes the command with the arguments after its name. Return a
	// usageError for bad invocations (exit 2), errHelp after printing help
	// (exit 0), anything else for failures (exit 1).
	Run func(ctx context.Context, e *env, args []string) error
}

var (
	commands   = map[string]*command{}
	groupOrder = []string{"server", "client", "other"}
)

// register adds c to the commands with run as its Run. Each command's file
// calls it from init: run names its command (for the flag set), so setting
// Run in the command's literal would be an initialization cycle.
func register(c *command, run func(ctx context.Context, e *env, args []string) error) {
	c.Run = run
	if _, dup := commands[c.Name]; dup {
		panic("tsflight: command registered twice: " + c.Name)
	}
	commands[c.Name] = c
}

// usageError is a bad invocation: the message is printed with a pointer to
// --help and the exit code is 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp reports that help was asked for and printed.
var errHelp = errors.New("help printed")

// run dispatches args to a command and returns the exit code.
func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 {
		printTopUsage(e.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			if _, ok := commands[args[1]]; !ok {
				fmt.Fprintf(e.stderr, "tsflight help: unknown command %q\n", args[1])
				return exitUsage
			}
			return run(ctx, []string{args[1], "--help"}, e)
		}
		printTopUsage(e.stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(e.stderr, "tsflight: unknown command %q\nRun 'tsflight --help' for the list of commands.\n", name)
		return exitUsage
	}
	err := c.Run(ctx, e, args[1:])
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(e.stderr, "tsflight %s: %s\nRun 'tsflight %s --help' for usage.\n", c.Name, ue.msg, c.Name)
		return exitUsage
	case nothingDone(err):
		fmt.Fprintf(e.stderr, "tsflight %s: error: %v\n", c.Name, err)
		return exitUnavailable
	default:
		fmt.Fprintf(e.stderr, "tsflight %s: error: %v\n", c.Name, err)
		return exitFail
	}
}

func printTopUsage(w io.Writer) {
	fmt.Fprint(w, `tsflight keeps time series in timeseries-table-format tables and serves
them over Apache Arrow Flight and Flight SQL; the client commands load,
query and inspect them on a running server (--server, TSFLIGHT_SERVER).

Usage:
  tsflight <command> [flags]

Commands:
`)
	byGroup := map[string][]*command{}
	width := 0
	for _, c := range commands {
		byGroup[c.Group] = append(byGroup[c.Group], c)
		width = max(width, len(c.Name))
	}
	for _, g := range groupOrder {
		cs := byGroup[g]
		sort.Slice(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
		for _, c := range cs {
			fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Summary)
		}
	}
	fmt.Fprint(w, `
Run 'tsflight <command> --help' for a command's flags and an example.

Examples:
  tsflight serve --root ./data --demo
  tsflight gaps --start 2016-01-01T00:00:00Z --end 2016-01-02T00:00:00Z cpu

Exit codes: 0 success, 1 failure, 2 bad usage, 3 server unreachable.
`)
}

// printCommandHelp prints a command's synopsis, description and flags.
func printCommandHelp(w io.Writer, c *command, fs *flagSet) {
	fmt.Fprintf(w, "Usage:\n  %s\n\n%s\n", c.Usage, strings.TrimSpace(c.Help))
	if fs != nil && fs.hasFlags() {
		fmt.Fprint(w, "\nFlags:\n")
		fs.printDefaults(w)
	}
}
