package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// flagSet is a flag.FlagSet that prints --help in this program's style and
// falls back to environment variables for flags not given on the command
// line (flags win over the environment, the environment over defaults).
type flagSet struct {
	*flag.FlagSet
	cmd *command
	env map[string]string // flag name -> environment variable
}

func newFlagSet(c *command) *flagSet {
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed by run and parse
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, cmd: c, env: map[string]string{}}
}

// doubleDash rewrites the flag package's "-name" in its errors to the
// "--name" this program documents.
var doubleDash = strings.NewReplacer("defined: -", "defined: --", "for flag -", "for flag --", "for -", "for --", "argument: -", "argument: --")

// fromEnv makes environment variable variable the fallback of flag name.
func (fs *flagSet) fromEnv(name, variable string) {
	if fs.Lookup(name) == nil {
		panic("fromEnv: no flag " + name)
	}
	fs.env[name] = variable
}

// parse parses args and applies the environment fallbacks. It prints the
// command's help and returns errHelp for -h/--help, and returns a
// usageError for anything malformed. The positional arguments are returned.
func (fs *flagSet) parse(e *env, args []string) ([]string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(e.stdout, fs.cmd, fs)
			return nil, errHelp
		}
		return nil, &usageError{msg: doubleDash.Replace(err.Error())}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	names := make([]string, 0, len(fs.env))
	for name := range fs.env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		variable := fs.env[name]
		val := e.getenv(variable)
		if set[name] || val == "" {
			continue
		}
		if err := fs.Set(name, val); err != nil {
			return nil, usagef("invalid value %q in %s: %v", val, variable, err)
		}
	}
	return fs.Args(), nil
}

func (fs *flagSet) hasFlags() bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// printDefaults lists the flags as "--name VALUE  usage (default; env)".
func (fs *flagSet) printDefaults(w io.Writer) {
	type row struct{ left, right string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if arg != "" {
			left += " " + strings.ToUpper(arg)
		}
		var notes []string
		if f.DefValue != "" && f.DefValue != "false" {
			notes = append(notes, "default "+f.DefValue)
		}
		if v, ok := fs.env[f.Name]; ok {
			notes = append(notes, "env "+v)
		}
		if len(notes) > 0 {
			usage += " (" + strings.Join(notes, "; ") + ")"
		}
		rows = append(rows, row{left, usage})
		width = max(width, len(left))
	})
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, r.right)
	}
}

// choice is a string flag restricted to a fixed set of values.
type choice struct {
	value   string
	allowed []string
}

func newChoice(def string, allowed ...string) *choice {
	return &choice{value: def, allowed: allowed}
}

func (c *choice) String() string { return c.value }

func (c *choice) Set(s string) error {
	for _, a := range c.allowed {
		if s == a {
			c.value = s
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(c.allowed, "|"))
}

// byteSize is a size flag: a number of bytes with an optional unit, B, KiB,
// MiB, GiB (K, M, G mean the same) or KB, MB, GB (powers of 1000).
type byteSize int64

var byteUnits = []struct {
	suffix string
	n      int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
	{"b", 1},
}

func parseByteSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.n
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size (examples: 67108864, 64MiB, 512KiB)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}

func formatByteSize(n int64) string {
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.n && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func (b *byteSize) String() string { return formatByteSize(int64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}
