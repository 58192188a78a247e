package main

// The bad-input catalogue's operations section: what an operator or a
// monitoring system can get wrong with serve --http and its endpoints,
// each run against the real binary (a serve that refuses its flags, or a
// running serve asked over net/http), with the exit code or HTTP status
// it must get and the text it must say. Each case also writes nothing:
// a refused serve leaves no root behind, and a refused request leaves the
// root as it was. With -update-catalogue the test rewrites its section of
// docs/reliability-catalogue.md; without it, it fails when the file and
// the cases disagree. The rows are numbered from F170.

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tsflight/tsflight/internal/testkit"

	"google.golang.org/grpc/metadata"
)

var updateCatalogue = flag.Bool("update-catalogue", false, "rewrite the operations section of docs/reliability-catalogue.md from the cases")

const (
	opsCatalogueDoc   = "../../docs/reliability-catalogue.md"
	opsCatalogueFirst = 170 // rows are F170, F171, ...
)

// opsCase is one row: run returns the outcome ("exit 2", "HTTP 401") and
// the text (stderr or body) the fragments must be in.
type opsCase struct {
	category, name, call string
	want                 string
	frags                []string
	run                  func(t *testing.T, e *opsEnv) (outcome, text string)
}

// opsEnv is what the cases run against: a serve with tokens and --http on
// loopback, whose root holds table t.
type opsEnv struct {
	root, url, addr string
	srv             *serverProc
	expired         string
}

// opsWrites says what a case writes, where that is not nothing.
var opsWrites = map[string]string{
	"--http on a port another process holds": "the root directory, empty (created before the ports are bound, as with a busy --listen port)",
}

func exitOutcome(code int) string { return fmt.Sprintf("exit %d", code) }

// refusedServe runs serve with args on a root that does not exist yet,
// which a serve refusing its flags must not create.
func refusedServe(env []string, args ...string) func(t *testing.T, e *opsEnv) (string, string) {
	return func(t *testing.T, _ *opsEnv) (string, string) {
		root := filepath.Join(t.TempDir(), "root")
		_, stderr, code := runCLI(t, env, append([]string{"serve", "--root", root}, args...)...)
		if _, err := os.Stat(root); !os.IsNotExist(err) {
			t.Errorf("the refused serve created its root (%v)", err)
		}
		return exitOutcome(code), stderr
	}
}

// busyServe runs serve with --http on a port another listener holds: the
// root is created (empty) before the ports are bound, as with a busy
// --listen port, and nothing else is written.
func busyServe(t *testing.T, e *opsEnv) (string, string) {
	_, port, _ := net.SplitHostPort(e.addr)
	root := filepath.Join(t.TempDir(), "root")
	_, stderr, code := runCLI(t, nil, "serve", "--root", root, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:"+port)
	if entries, err := os.ReadDir(root); err != nil || len(entries) != 0 {
		t.Errorf("the root after the refused serve: %d entries (%v), want an empty directory", len(entries), err)
	}
	return exitOutcome(code), stderr
}

// request sends method path to the endpoints with the given headers.
func request(method, path string, headers ...string) func(t *testing.T, e *opsEnv) (string, string) {
	return func(t *testing.T, e *opsEnv) (string, string) {
		code, body := httpDo(t, nil, method, e.url+path, headers...)
		return fmt.Sprintf("HTTP %d", code), body
	}
}

func opsCatalogue() []opsCase {
	const flags, scrape, probes = "serve --http", "/metrics with authentication on", "probes"
	return []opsCase{
		{flags, "--http on every IPv4 interface without authentication", "tsflight serve --http 0.0.0.0:0", "exit 2",
			[]string{"--http 0.0.0.0:0 is reachable from other machines and no authentication is configured", "--auth-tokens", "--insecure"},
			refusedServe(nil, "--http", "0.0.0.0:0")},
		{flags, "--http with an empty host (every interface) without authentication", "tsflight serve --http :9090", "exit 2",
			[]string{"--http :9090 is reachable from other machines"}, refusedServe(nil, "--http", ":9090")},
		{flags, "TSFLIGHT_HTTP beyond loopback without authentication", "TSFLIGHT_HTTP=[::]:0 tsflight serve", "exit 2",
			[]string{"--http [::]:0 is reachable from other machines"}, refusedServe([]string{"TSFLIGHT_HTTP=[::]:0"})},
		{flags, "--http without a port", "tsflight serve --http 9090", "exit 2",
			[]string{"--http 9090: want HOST:PORT", "127.0.0.1:9090"}, refusedServe(nil, "--http", "9090")},
		{flags, "--http on a port another process holds", "tsflight serve --http 127.0.0.1:BUSY", "exit 1",
			[]string{"--http 127.0.0.1:", "address already in use"}, busyServe},
		{scrape, "no token", "GET /metrics", "HTTP 401", []string{"authentication required", "Bearer"}, request("GET", "/metrics")},
		{scrape, "a token the server does not have", "GET /metrics, Authorization: Bearer UNKNOWN", "HTTP 401",
			[]string{"unknown token"}, request("GET", "/metrics", "Authorization: Bearer tsf_not-a-token-of-this-server")},
		{scrape, "an expired token", "GET /metrics, Authorization: Bearer OLD", "HTTP 401",
			[]string{"token old expired at 2020-01-01T00:00:00Z"},
			func(t *testing.T, e *opsEnv) (string, string) {
				return request("GET", "/metrics", "Authorization: Bearer "+e.expired)(t, e)
			}},
		{scrape, "an authorization scheme other than Bearer and Basic", "GET /metrics, Authorization: Token abc", "HTTP 401",
			[]string{`authorization scheme "Token" is not supported`}, request("GET", "/metrics", "Authorization: Token abc")},
		{scrape, "Basic credentials that are not base64", "GET /metrics, Authorization: Basic %%%", "HTTP 401",
			[]string{"the Basic authorization header is not base64"}, request("GET", "/metrics", "Authorization: Basic %%%")},
		{"HTTP routes", "a method other than GET or HEAD", "POST /metrics", "HTTP 405",
			[]string{"Method Not Allowed"}, request("POST", "/metrics")},
		{"HTTP routes", "a path the server does not serve", "GET /nosuch", "HTTP 404",
			[]string{"404 page not found"}, request("GET", "/nosuch")},
		{probes, "readiness while the root directory is gone", "GET /readyz (root moved away)", "HTTP 503",
			[]string{"not ready: the root directory cannot be listed", "no such file or directory"},
			func(t *testing.T, e *opsEnv) (string, string) {
				if err := os.Rename(e.root, e.root+".aside"); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := os.Rename(e.root+".aside", e.root); err != nil {
						t.Fatal(err)
					}
				}()
				return request("GET", "/readyz")(t, e)
			}},
		{probes, "readiness while the root is a file", "GET /readyz (root replaced by a file)", "HTTP 503",
			[]string{"not ready: the root directory cannot be listed", "not a directory"},
			func(t *testing.T, e *opsEnv) (string, string) {
				if err := os.Rename(e.root, e.root+".aside"); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(e.root, []byte("a file"), 0o644); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := os.Remove(e.root); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(e.root+".aside", e.root); err != nil {
						t.Fatal(err)
					}
				}()
				return request("GET", "/readyz")(t, e)
			}},
		{probes, "liveness once a shutdown has begun", "GET /healthz after SIGTERM, a DoPut in flight", "HTTP 503",
			[]string{"shutting down"}, shuttingDown("/healthz")},
		{probes, "readiness once a shutdown has begun", "GET /readyz after SIGTERM, a DoPut in flight", "HTTP 503",
			[]string{"not ready: shutting down"}, shuttingDown("/readyz")},
	}
}

// shuttingDown asks path of a server of its own that received SIGTERM
// while a DoPut held its graceful shutdown open.
func shuttingDown(path string) func(t *testing.T, e *opsEnv) (string, string) {
	return func(t *testing.T, _ *opsEnv) (string, string) {
		srv := startServer(t, nil, "--root", t.TempDir(), "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level", "trace")
		url := srv.opsURL()
		ctx := testCtx(t)
		c := dial(t, srv.addr)
		p := newPut(t, ctx, c, "t", 10)
		srv.sigtermDuringPut()
		srv.waitLog("shutting down", 10*time.Second)
		code, body := httpGet(t, nil, url+path)
		if _, err := p.finish(); err != nil {
			t.Fatalf("the DoPut in flight: %v", err)
		}
		if exit := srv.wait(20 * time.Second); exit != 0 {
			t.Fatalf("exit code %d after the shutdown", exit)
		}
		return fmt.Sprintf("HTTP %d", code), body
	}
}

// bearerCtx is ctx sending token as Flight calls do.
func bearerCtx(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func TestOpsCatalogue(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	tokens := filepath.Join(t.TempDir(), "tokens")
	writer := newToken(t, tokens, "write", "loader")
	const expired = "an-old-token-that-expired-0001"
	appendLine(t, tokens, expired+" read name=old expires=2020-01-01")
	srv := startServer(t, nil, "--root", root, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--auth-tokens", tokens)
	e := &opsEnv{root: root, url: srv.opsURL(), addr: strings.TrimPrefix(srv.opsURL(), "http://"), srv: srv, expired: expired}
	ctx := testCtx(t)
	c := dial(t, srv.addr)
	createTable(t, bearerCtx(ctx, writer), c, "t")

	cases := opsCatalogue()
	for _, oc := range cases {
		t.Run(oc.name, func(t *testing.T) {
			before := testkit.Snapshot(t, root)
			outcome, text := oc.run(t, e)
			if outcome != oc.want {
				t.Fatalf("%s: %s, want %s; said %q", oc.call, outcome, oc.want, text)
			}
			for _, f := range oc.frags {
				if !strings.Contains(text, f) {
					t.Fatalf("%s: %q does not say %q", oc.call, text, f)
				}
			}
			if strings.Contains(text, root) || strings.Contains(text, writer) || strings.Contains(text, expired) {
				t.Fatalf("%s: %q shows the root or a secret", oc.call, text)
			}
			after := testkit.Snapshot(t, root)
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("%s changed the root", oc.call)
			}
		})
	}
	// The server still serves after all of it.
	if code, _ := httpGet(t, nil, e.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after the cases: %d", code)
	}
	srv.stop()
	if t.Failed() {
		return
	}
	syncOpsCatalogue(t, renderOpsCatalogue(cases))
}

func renderOpsCatalogue(cases []opsCase) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Operations: serve --http and its endpoints (the CLI and net/http): %d cases\n\n", len(cases))
	b.WriteString("Run by `go test ./cmd/tsflight -run TestOpsCatalogue`; all pass. The scrape cases run on a server with tokens ")
	b.WriteString("(OLD: read scope, named old, expired 2020-01-01); the rows are numbered from F170. See [operations.md](operations.md).\n\n")
	b.WriteString("| # | category | case | client call | expected | message fragments | writes |\n|---|---|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s) }
	for i, c := range cases {
		frags := make([]string, len(c.frags))
		for j, f := range c.frags {
			frags[j] = "`" + cell(f) + "`"
		}
		writes := opsWrites[c.name]
		if writes == "" {
			writes = "nothing"
		}
		fmt.Fprintf(&b, "| F%d | %s | %s | %s | `%s` | %s | %s |\n", opsCatalogueFirst+i, cell(c.category), cell(c.name), "`"+cell(c.call)+"`", c.want, strings.Join(frags, " · "), cell(writes))
	}
	return b.String()
}

// syncOpsCatalogue rewrites (with -update-catalogue) or checks the ops
// section of the catalogue, which comes last in the file.
func syncOpsCatalogue(t *testing.T, content string) {
	t.Helper()
	const begin, end = "<!-- ops catalogue: generated, do not edit -->\n", "<!-- end of ops catalogue -->\n"
	data, err := os.ReadFile(opsCatalogueDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc, want := string(data), begin+content+end
	var next string
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	switch {
	case i >= 0 && j > i && doc[i:j+len(end)] == want:
		return
	case i >= 0 && j > i:
		next = doc[:i] + want + doc[j+len(end):]
	default:
		next = strings.TrimRight(doc, "\n") + "\n\n" + want
	}
	if !*updateCatalogue {
		t.Fatalf("%s: the ops section does not match the cases; run the test with -update-catalogue and commit the file", opsCatalogueDoc)
	}
	if err := os.WriteFile(opsCatalogueDoc, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote the ops section of %s", opsCatalogueDoc)
}
