package main

import (
	"errors"
	"io"
	"testing"
	"time"
)

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "67108864": 64 << 20, "64MiB": 64 << 20, "64mib": 64 << 20, "64M": 64 << 20,
		"512KiB": 512 << 10, "1k": 1 << 10, "2GiB": 2 << 30, "1g": 1 << 30, "5MB": 5_000_000,
		"3kb": 3000, "7B": 7, " 8 MiB ": 8 << 20,
	} {
		got, err := parseByteSize(in)
		if err != nil || got != want {
			t.Errorf("parseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MiB", "-1", "1.5MiB", "64XB", "lots", "99999999999GiB"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("parseByteSize(%q) = %d, want an error", in, got)
		}
	}
	for n, want := range map[int64]string{64 << 20: "64MiB", 1 << 30: "1GiB", 1536: "1536", 3 << 10: "3KiB", 7: "7"} {
		if got := formatByteSize(n); got != want {
			t.Errorf("formatByteSize(%d) = %q, want %q", n, got, want)
		}
	}
}

func testEnv(vars map[string]string) *env {
	return &env{stdout: io.Discard, stderr: io.Discard, getenv: func(k string) string { return vars[k] }}
}

func TestServeFlagPrecedence(t *testing.T) {
	// defaults
	cfg, err := parseServeFlags(testEnv(map[string]string{"TSFLIGHT_ROOT": "/env/root"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.root != "/env/root" || cfg.listen != defaultListen || cfg.logLevel.value != "info" || cfg.logFormat.value != "text" ||
		cfg.maxRecv != 64<<20 || cfg.maxSend != 64<<20 || cfg.shutdownTimeout != 30*time.Second || cfg.gcPercent != 50 || cfg.heapFloor != 64<<20 ||
		cfg.maxCalls != 1000 || cfg.streamsPerConn != 100 || cfg.requestTimeout != time.Hour || cfg.maxResultRows != 0 {
		t.Fatalf("defaults: %+v", cfg)
	}
	if l := cfg.limits(); l.MaxCalls != 1000 || l.MaxStreamsPerConn != 100 || l.RequestTimeout != time.Hour || l.MaxRecvMsgSize != 64<<20 {
		t.Fatalf("default limits: %+v", l)
	}
	cfg, err = parseServeFlags(testEnv(map[string]string{"TSFLIGHT_ROOT": "/r"}),
		[]string{"--max-calls", "-1", "--max-streams-per-conn", "8", "--request-timeout", "-1s", "--max-result-rows", "5000"})
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.limits(); l.MaxCalls != -1 || l.MaxStreamsPerConn != 8 || l.RequestTimeout != -time.Second || cfg.maxResultRows != 5000 {
		t.Fatalf("limit flags: %+v, max result rows %d", l, cfg.maxResultRows)
	}
	cfg, err = parseServeFlags(testEnv(map[string]string{"TSFLIGHT_ROOT": "/r"}), []string{"--heap-floor", "0", "--memory-limit", "1GiB"})
	if err != nil || cfg.heapFloor != 0 || cfg.memoryLimit != 1<<30 {
		t.Fatalf("--heap-floor 0: %d, %v", cfg.heapFloor, err)
	}
	// GOGC in the environment wins over the default GC percent, and
	// --gc-percent over GOGC.
	cfg, err = parseServeFlags(testEnv(map[string]string{"TSFLIGHT_ROOT": "/r", "GOGC": "200"}), nil)
	if err != nil || cfg.gcPercent != -1 {
		t.Fatalf("GOGC set: gc percent %d, %v", cfg.gcPercent, err)
	}
	cfg, err = parseServeFlags(testEnv(map[string]string{"TSFLIGHT_ROOT": "/r", "GOGC": "200"}), []string{"--gc-percent", "30"})
	if err != nil || cfg.gcPercent != 30 {
		t.Fatalf("GOGC and --gc-percent set: gc percent %d, %v", cfg.gcPercent, err)
	}
	// flags over the environment over defaults
	cfg, err = parseServeFlags(testEnv(map[string]string{"TSFLIGHT_ROOT": "/env/root", "TSFLIGHT_LISTEN": "127.0.0.2:9000",
		"TSFLIGHT_AUTH_TOKENS_FILE": "/etc/tokens", "TSFLIGHT_TLS_CERT": "/c.pem", "TSFLIGHT_TLS_KEY": "/k.pem", "TSFLIGHT_TLS_CLIENT_CA": "/ca.pem"}),
		[]string{"--root", "/flag/root", "--log-level=trace", "-log-format", "json", "--max-recv-msg-size", "128MiB", "--shutdown-timeout", "5s"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.sec.authTokens != "/etc/tokens" || cfg.sec.tlsCert != "/c.pem" || cfg.sec.tlsKey != "/k.pem" || cfg.sec.tlsClientCA != "/ca.pem" ||
		cfg.sec.reloadInterval != defaultReloadInterval || cfg.sec.insecure {
		t.Fatalf("security settings from the environment: %+v", cfg.sec)
	}
	if cfg.root != "/flag/root" || cfg.listen != "127.0.0.2:9000" || cfg.logLevel.value != "trace" || cfg.logFormat.value != "json" ||
		cfg.maxRecv != 128<<20 || cfg.shutdownTimeout != 5*time.Second {
		t.Fatalf("flags and env: %+v", cfg)
	}
	// help
	if _, err := parseServeFlags(testEnv(nil), []string{"--help"}); !errors.Is(err, errHelp) {
		t.Fatalf("--help: %v", err)
	}
}
