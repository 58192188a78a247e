package main

import (
	"errors"
	"testing"
)

// Unit tests of the small parsers the client commands share: --server,
// --entity, list flags, --version and the table argument.

func TestServerAddr(t *testing.T) {
	for uri, want := range map[string]struct {
		addr string
		tls  bool
	}{
		"grpc+tls://db1:9000":   {"db1:9000", true},
		"grpc+tls://:9000":      {"127.0.0.1:9000", true},
		"grpc+tcp://db1:9000":   {"db1:9000", false},
		"grpc://localhost:9000": {"localhost:9000", false},
	} {
		if addr, useTLS, err := parseServerURI(uri); err != nil || addr != want.addr || useTLS != want.tls {
			t.Errorf("parseServerURI(%q) = %q, %v, %v; want %q, %v", uri, addr, useTLS, err, want.addr, want.tls)
		}
	}
	for uri, want := range map[string]string{
		"grpc://127.0.0.1:8815": "127.0.0.1:8815",
		"grpc+tcp://db1:9000":   "db1:9000",
		"db1:9000":              "db1:9000",
		"grpc://db1:9000/":      "db1:9000",
		":8815":                 "127.0.0.1:8815",
		"grpc://:8815":          "127.0.0.1:8815",
		"grpc://[::1]:8815":     "[::1]:8815",
		"[::1]:1":               "[::1]:1",
		"localhost:8815":        "localhost:8815",
	} {
		if got, err := serverAddr(uri); err != nil || got != want {
			t.Errorf("serverAddr(%q) = %q, %v; want %q", uri, got, err, want)
		}
	}
	for uri, want := range map[string]string{
		"http://db1:9000": `--server "http://db1:9000": unknown scheme "http" (use grpc://HOST:PORT or grpc+tls://HOST:PORT)`,
		"nonsense":        `--server "nonsense" is not grpc://HOST:PORT`,
		"grpc://db1":      `--server "grpc://db1" is not grpc://HOST:PORT`,
		"db1:":            `--server "db1:" is not grpc://HOST:PORT`,
		"grpc://":         `--server "grpc://" is not grpc://HOST:PORT`,
		"":                `--server "" is not grpc://HOST:PORT`,
		"::1:8815":        `--server "::1:8815" is not grpc://HOST:PORT`,
	} {
		_, err := serverAddr(uri)
		var ue *usageError
		if !errors.As(err, &ue) || err.Error() != want {
			t.Errorf("serverAddr(%q): error %v; want the usage error %q", uri, err, want)
		}
	}
}

// TestServerAddrRejectsBadPorts: a port that is not a number is bad usage
// (exit 2), not an unreachable server (exit 3, "is it running?").
func TestServerAddrRejectsBadPorts(t *testing.T) {
	for _, uri := range []string{"grpc://db1:abc", "grpc://db1:8815/tsflight", "db1:99999", "db1:-1"} {
		var ue *usageError
		if got, err := serverAddr(uri); !errors.As(err, &ue) {
			t.Errorf("serverAddr(%q) = %q, %v; want a usage error", uri, got, err)
		}
	}
	stdout, stderr, code := runCLI(t, nil, "tables", "--server", "grpc://127.0.0.1:abc")
	cliCheckFailure(t, []string{"tables"}, stdout, stderr, code, exitUsage, []string{`--server "grpc://127.0.0.1:abc"`})
}

func TestEntityFlag(t *testing.T) {
	e := entityFlag{}
	if e.request() != nil || e.String() != "" {
		t.Errorf("empty entityFlag: request %v, String %q", e.request(), e.String())
	}
	for _, s := range []string{"host=a", "dc=", "rack=x=y"} {
		if err := e.Set(s); err != nil {
			t.Errorf("Set(%q): %v", s, err)
		}
	}
	if got := e.String(); got != "dc=,host=a,rack=x=y" {
		t.Errorf("String() = %q", got)
	}
	if got := e.request(); len(got) != 3 || got["host"] != "a" || got["dc"] != "" || got["rack"] != "x=y" {
		t.Errorf("request() = %v", got)
	}
	for s, want := range map[string]string{
		"host=b": `column "host" given twice`,
		"host":   `"host" is not COLUMN=VALUE`,
		"=a":     `"=a" is not COLUMN=VALUE`,
		"":       `"" is not COLUMN=VALUE`,
	} {
		if err := e.Set(s); err == nil || err.Error() != want {
			t.Errorf("Set(%q) = %v, want %q", s, err, want)
		}
	}
	if len(e) != 3 || e["host"] != "a" {
		t.Errorf("after the refused values: %v", e)
	}
}

func TestListFlag(t *testing.T) {
	var l listFlag
	for _, s := range []string{"a", " b , c ", "d"} {
		if err := l.Set(s); err != nil {
			t.Errorf("Set(%q): %v", s, err)
		}
	}
	if l.String() != "a,b,c,d" || len(l) != 4 {
		t.Errorf("listFlag = %q (%d)", l.String(), len(l))
	}
	for _, s := range []string{"", "x,", ",x", "x,,y", " , "} {
		var l listFlag
		if err := l.Set(s); err == nil || err.Error() != "empty name" {
			t.Errorf("Set(%q) = %v, want empty name", s, err)
		}
	}
}

func TestOptionalVersion(t *testing.T) {
	var v optionalVersion
	if v.String() != "" || v.v != nil {
		t.Errorf("unset version: %q", v.String())
	}
	if err := v.Set("0"); err != nil || v.v == nil || *v.v != 0 || v.String() != "0" {
		t.Errorf("Set(0): %v, %q", err, v.String())
	}
	if err := v.Set("42"); err != nil || *v.v != 42 {
		t.Errorf("Set(42): %v, %q", err, v.String())
	}
	for _, s := range []string{"-1", "1.5", "v2", "", "99999999999999999999"} {
		if err := v.Set(s); err == nil || err.Error() != `"`+s+`" is not a table version (a non-negative integer)` {
			t.Errorf("Set(%q) = %v", s, err)
		}
	}
	if *v.v != 42 {
		t.Errorf("after the refused values: %d", *v.v)
	}
}

func TestOneTable(t *testing.T) {
	if got, err := oneTable([]string{"cpu"}); got != "cpu" || err != nil {
		t.Errorf("oneTable(cpu) = %q, %v", got, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing the table name"},
		{[]string{""}, "the table name is empty"},
		{[]string{"cpu", "--start"}, `unexpected argument "--start" after the table name (flags go before it: tsflight CMD [flags] TABLE)`},
	} {
		var ue *usageError
		if _, err := oneTable(tc.args); !errors.As(err, &ue) || err.Error() != tc.want {
			t.Errorf("oneTable(%q) = %v, want the usage error %q", tc.args, err, tc.want)
		}
	}
}
