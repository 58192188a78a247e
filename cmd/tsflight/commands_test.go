package main

import (
	"strings"
	"testing"

	"github.com/tsflight/tsflight/flightserver"
)

func TestBadUsageExits2(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{nil, nil, "Usage:"},
		{[]string{"frobnicate"}, nil, `unknown command "frobnicate"`},
		{[]string{"help", "frobnicate"}, nil, `unknown command "frobnicate"`},
		{[]string{"serve"}, nil, "--root is required (or set TSFLIGHT_ROOT)"},
		{[]string{"serve", "--root", root, "--nope"}, nil, "flag provided but not defined: --nope"},
		{[]string{"serve", "--root", root, "--log-level", "loud"}, nil, `invalid value "loud" for flag --log-level: must be one of trace|debug|info|warn|error`},
		{[]string{"serve", "--root", root, "--log-format", "xml"}, nil, "--log-format: must be one of text|json"},
		{[]string{"serve", "--root", root, "--max-recv-msg-size", "lots"}, nil, `"lots" is not a size`},
		{[]string{"serve", "--root", root, "--max-send-msg-size", "0"}, nil, "--max-send-msg-size must be between 1 and"},
		{[]string{"serve", "--root", root, "--max-recv-msg-size", "4GiB"}, nil, "--max-recv-msg-size must be between 1 and"},
		{[]string{"serve", "--root", root, "--shutdown-timeout", "-1s"}, nil, "--shutdown-timeout must not be negative"},
		{[]string{"serve", "--root", root, "--gc-percent", "-5"}, nil, "--gc-percent must be -1 or more, got -5"},
		{[]string{"serve", "--root", root, "--gc-percent", "lots"}, nil, "--gc-percent"},
		{[]string{"serve", "--root", root, "--heap-floor", "-1"}, nil, `invalid value "-1" for flag --heap-floor`},
		{[]string{"serve", "--root", root, "--heap-floor", "lots"}, nil, `"lots" is not a size`},
		{[]string{"serve", "--root", root, "--heap-floor", "64MiB", "--memory-limit", "64MiB"}, nil, "--heap-floor (64MiB) must be below --memory-limit (64MiB)"},
		{[]string{"serve", "--root", root, "--shutdown-timeout", "soon"}, nil, "--shutdown-timeout"},
		{[]string{"serve", "--root", root, "--max-calls", "0"}, nil, "--max-calls must be at least 1 (or -1 for no limit), got 0"},
		{[]string{"serve", "--root", root, "--max-calls", "-7"}, nil, "--max-calls must be at least 1"},
		{[]string{"serve", "--root", root, "--max-streams-per-conn", "0"}, nil, "--max-streams-per-conn must be at least 1, got 0"},
		{[]string{"serve", "--root", root, "--request-timeout", "0s"}, nil, "--request-timeout must be positive"},
		{[]string{"serve", "--root", root, "--request-timeout", "forever"}, nil, "--request-timeout"},
		{[]string{"serve", "--root", root, "--max-result-rows", "-1"}, nil, "--max-result-rows must not be negative, got -1"},
		{[]string{"serve", "--root", root, "--stream-budget", "lots"}, nil, `"lots" is not a size`},
		{[]string{"serve", "--root", root, "--stream-budget", "-1"}, nil, "--stream-budget"},
		{[]string{"serve", "--root", root, "--stream-stall-timeout", "0s"}, nil, "--stream-stall-timeout must be positive"},
		{[]string{"serve", "--root", root, "--maintenance-memory", "512KiB"}, nil, "--maintenance-memory must be at least 1MiB, got 512KiB"},
		{[]string{"serve", "--root", root, "--maintenance-memory", "0"}, nil, "--maintenance-memory must be at least 1MiB, got 0"},
		{[]string{"serve", "--root", root, "--maintenance-memory", "lots"}, nil, `"lots" is not a size`},
		{[]string{"serve", "--root", root, "--maintenance-memory", "-64MiB"}, nil, "--maintenance-memory"},
		{[]string{"serve", "--root", root, "--maintenance-busy-share", "0"}, nil, "--maintenance-busy-share must be above 0 and at most 1, got 0"},
		{[]string{"serve", "--root", root, "--maintenance-busy-share", "1.5"}, nil, "--maintenance-busy-share must be above 0 and at most 1, got 1.5"},
		{[]string{"serve", "--root", root, "--maintenance-busy-share", "-0.1"}, nil, "--maintenance-busy-share must be above 0 and at most 1, got -0.1"},
		{[]string{"serve", "--root", root, "--maintenance-busy-share", "NaN"}, nil, "--maintenance-busy-share must be above 0 and at most 1, got NaN"},
		{[]string{"serve", "--root", root, "--maintenance-busy-share", "lots"}, nil, "--maintenance-busy-share"},
		{[]string{"serve", "--root", root, "--stream-stall-timeout", "soon"}, nil, "--stream-stall-timeout"},
		{[]string{"serve", "--root", root, "--sql-memory-limit", "1MiB"}, nil, "--sql-memory-limit must be at least 16MiB (or 0 for the default), got 1MiB"},
		{[]string{"serve", "--root", root, "--sql-prepared-bytes", "-1"}, nil, "--sql-prepared-bytes"},
		{[]string{"serve", "--root", root, "extra"}, nil, `unexpected argument "extra"`},
		{[]string{"serve", "--root"}, nil, "flag needs an argument: --root"},
		{[]string{"serve"}, []string{"TSFLIGHT_ROOT="}, "--root is required"},
		{[]string{"version", "extra"}, nil, `unexpected argument "extra"`},
	} {
		stdout, stderr, code := runCLI(t, tc.env, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || stdout != "" {
			t.Errorf("tsflight %q: exit %d, stdout %q, stderr %q; want exit 2 and %q on stderr", tc.args, code, stdout, stderr, tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		stdout, _, code := runCLI(t, nil, args...)
		if code != 0 || !strings.Contains(stdout, "serve ") || !strings.Contains(stdout, "version ") || !strings.Contains(stdout, "Examples:") ||
			!strings.Contains(stdout, "3 server unreachable") {
			t.Errorf("tsflight %q: exit %d, stdout %q", args, code, stdout)
		}
	}
	for _, args := range [][]string{{"serve", "--help"}, {"serve", "-h"}, {"help", "serve"}} {
		stdout, _, code := runCLI(t, nil, args...)
		for _, want := range []string{"Usage:\n  tsflight serve", "Example:", "--root DIRECTORY", "env TSFLIGHT_ROOT", "env TSFLIGHT_LISTEN", "--max-recv-msg-size SIZE", "default 64MiB", "--shutdown-timeout DURATION", "default 30s",
			"--max-calls N", "default 1000", "--max-streams-per-conn N", "default 100", "--request-timeout DURATION", "default 1h0m0s", "--max-result-rows N",
			"--stream-budget SIZE", "--stream-stall-timeout DURATION", "--sql-memory-limit SIZE", "--sql-prepared-bytes SIZE",
			"--maintenance-memory SIZE", "and merged hour by hour (default 64MiB)", "--maintenance-busy-share FRACTION", "(default 0.1)"} {
			if code != 0 || !strings.Contains(stdout, want) {
				t.Errorf("tsflight %q: exit %d, want %q in:\n%s", args, code, want, stdout)
			}
		}
	}
	// Every command has help with its synopsis and an example, and is in
	// the command list.
	list, _, _ := runCLI(t, nil, "--help")
	for _, name := range []string{"serve", "version", "tables", "describe", "create", "load", "scan", "sql", "coverage", "gaps", "add-columns"} {
		stdout, _, code := runCLI(t, nil, name, "--help")
		if code != 0 || !strings.Contains(stdout, "Usage:\n  tsflight "+name) || !strings.Contains(stdout, "Example:") {
			t.Errorf("tsflight %s --help: exit %d, stdout %q", name, code, stdout)
		}
		if !strings.Contains(list, "\n  "+name+" ") {
			t.Errorf("tsflight --help does not list %s:\n%s", name, list)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		stdout, stderr, code := runCLI(t, nil, args...)
		if code != 0 || !strings.HasPrefix(stdout, "tsflight ") || !strings.Contains(stdout, "go1.") || stderr != "" {
			t.Errorf("tsflight %q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// TestServeMaintenanceMemoryFlag: --maintenance-memory defaults to the
// maintenance default (64 MiB) and takes sizes with units.
func TestServeMaintenanceMemoryFlag(t *testing.T) {
	cfg, err := parseServeFlags(testEnv(map[string]string{"TSFLIGHT_ROOT": "/r"}), nil)
	if err != nil || int64(cfg.maintMemory) != flightserver.DefaultMaintenanceMemoryBytes || cfg.maintMemory.String() != "64MiB" {
		t.Fatalf("default: %v %v", cfg.maintMemory.String(), err)
	}
	for arg, want := range map[string]int64{"96MiB": 96 << 20, "1MiB": 1 << 20, "2GiB": 2 << 30, "1048576": 1 << 20} {
		cfg, err := parseServeFlags(testEnv(map[string]string{"TSFLIGHT_ROOT": "/r"}), []string{"--maintenance-memory", arg})
		if err != nil || int64(cfg.maintMemory) != want {
			t.Errorf("--maintenance-memory %s: %d %v, want %d", arg, cfg.maintMemory, err, want)
		}
	}
}
