package main

// Tests of serve's authentication and TLS through real processes: the
// tokens file and token command, TLS and mutual TLS with a test CA, the
// CLI as a client, reloading on file change and SIGHUP, expiry, the
// refusal to listen beyond loopback without authentication, and that no
// secret reaches the log.

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/flightserver/tlstest"
)

// newToken runs "tsflight token new" and returns the secret it printed.
func newToken(t *testing.T, file, scope, name string, extra ...string) string {
	t.Helper()
	stdout, stderr, code := runCLI(t, nil, append([]string{"token", "new", "--scope", scope, "--name", name, "--file", file}, extra...)...)
	secret := strings.TrimSpace(stdout)
	if code != 0 || !strings.HasPrefix(secret, "tsf_") || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("token new: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	return secret
}

// secureClient runs CLI commands against a TLS server with a token.
type secureClient struct {
	t      *testing.T
	uri    string
	caFile string
}

func (c secureClient) run(token string, args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	env := []string{"TSFLIGHT_SERVER=" + c.uri}
	if c.caFile != "" {
		env = append(env, "TSFLIGHT_TLS_CA="+c.caFile)
	}
	if token != "" {
		env = append(env, "TSFLIGHT_TOKEN="+token)
	}
	return runCLI(c.t, env, args...)
}

// refused runs args with token and requires exit 1 with every fragment of
// want in the error.
func (c secureClient) refused(token string, want []string, args ...string) {
	c.t.Helper()
	stdout, stderr, code := c.run(token, args...)
	ok := code == exitFail && stdout == ""
	for _, w := range want {
		ok = ok && strings.Contains(stderr, w)
	}
	if !ok {
		c.t.Errorf("tsflight %q: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, code, stdout, stderr, want)
	}
}

func (c secureClient) ok(token string, args ...string) string {
	c.t.Helper()
	stdout, stderr, code := c.run(token, args...)
	if code != 0 {
		c.t.Errorf("tsflight %q: exit %d, stderr %q", args, code, stderr)
	}
	return stdout
}

func createArgs(table string) []string {
	return []string{"create", "--index-column", "ts", "--granularity", "10s", "--entity", "host", table}
}

func TestServeTLSWithTokens(t *testing.T) {
	ca := tlstest.NewCA(t, "tsflight-test")
	cert, key := ca.Issue(t, "server", true)
	tokens := filepath.Join(t.TempDir(), "tokens")
	writer := newToken(t, tokens, "write", "loader")
	reader := newToken(t, tokens, "read", "grafana")
	const expired = "an-old-token-that-expired-0001"
	appendLine(t, tokens, expired+" read name=old expires=2020-01-01")

	srv := startServer(t, nil, "--root", t.TempDir(), "--listen", "127.0.0.1:0", "--log-level", "trace",
		"--auth-tokens", tokens, "--tls-cert", cert, "--tls-key", key)
	c := secureClient{t: t, uri: "grpc+tls://" + srv.addr, caFile: ca.File}

	c.ok(writer, createArgs("t1")...)
	if out := c.ok(reader, "tables", "--format", "csv"); !strings.Contains(out, "\nt1,") {
		t.Errorf("tables with the read token:\n%s", out)
	}
	c.ok(reader, "describe", "t1")
	c.refused("", []string{"authentication required", "(unauthenticated)"}, "tables")
	c.refused("tsf_not-a-token-of-this-server", []string{"unknown token", "(unauthenticated)"}, "tables")
	c.refused(expired, []string{"token old expired at 2020-01-01T00:00:00Z", "(unauthenticated)"}, "tables")
	c.refused(reader, []string{"action create-table needs write scope; token grafana has read scope", "(permission denied)"}, createArgs("t2")...)
	c.refused(reader, []string{"action vacuum with apply needs write scope", "(permission denied)"}, "vacuum", "--apply", "t1")
	lf := &loadFixture{t: t, dir: t.TempDir(), mem: memory.NewCheckedAllocator(memory.NewGoAllocator())}
	rows := lf.writeParquet("rows.parquet", loadFloatSchema, 0, 40, 40)
	lf.mem.AssertSize(t, 0)
	c.refused(reader, []string{"DoPut (append to t1) needs write scope; token grafana has read scope", "(permission denied)"}, "load", "t1", rows)
	c.ok(writer, "load", "t1", rows)
	c.refused(reader, []string{"action add-columns needs write scope", "(permission denied)"}, "add-columns", "t1", "note:utf8")
	c.ok(writer, "add-columns", "t1", "note:utf8")
	if out := c.ok(reader, "scan", "--format", "csv", "t1"); strings.Count(out, "\n") != 41 {
		t.Errorf("scan with the read token after one load:\n%s", out)
	}
	c.ok(reader, "vacuum", "t1") // a dry run reads
	c.ok(writer, "vacuum", "--apply", "t1")
	if out := c.ok(writer, "tables", "--format", "csv"); strings.Contains(out, "t2") {
		t.Errorf("the refused create made a table:\n%s", out)
	}

	// Without the CA, the server's certificate is not trusted; a plaintext
	// client gets no answer from a TLS port.
	plain := secureClient{t: t, uri: "grpc+tls://" + srv.addr}
	if _, stderr, code := plain.run(reader, "tables"); code == 0 || !strings.Contains(stderr, "certificate") {
		t.Errorf("TLS without --tls-ca: exit %d, stderr %q; want a certificate error", code, stderr)
	}
	clear := secureClient{t: t, uri: "grpc://" + srv.addr}
	if _, stderr, code := clear.run(reader, "tables"); code != exitUnavailable {
		t.Errorf("plaintext client to a TLS server: exit %d, stderr %q; want %d", code, stderr, exitUnavailable)
	}
	// TLS flags without grpc+tls:// are a usage error.
	if _, stderr, code := runCLI(t, []string{"TSFLIGHT_TLS_CA=" + ca.File}, "tables", "--server", "grpc://"+srv.addr); code != exitUsage ||
		!strings.Contains(stderr, "need a grpc+tls:// --server") {
		t.Errorf("--tls-ca with grpc://: exit %d, stderr %q", code, stderr)
	}

	help := srv.stdout.String()
	wants := []string{"grpc+tls://" + srv.addr, "--tls-ca ca.pem", "authenticate_basic_token"}
	if sqlBuilt { // the binary is built as the test is
		wants = append(wants, "useEncryption=true&tlsRootCerts=ca.pem&token=TOKEN", `"password": token`)
	}
	for _, want := range wants {
		if !strings.Contains(help, want) {
			t.Errorf("the connect help lacks %q:\n%s", want, help)
		}
	}
	srv.stop()
	logs := srv.stderr.String()
	// The call log names the caller (never the secret) of accepted and
	// refused calls alike.
	for _, want := range [][]string{
		{"DoAction: code=OK", "principal=loader"},
		{"ListFlights: code=OK", "principal=grafana"},
		{"DoAction refused: code=PermissionDenied", "principal=grafana", "token grafana has read scope"},
		// Calls without a valid token are refused before the request is
		// read, and logged there.
		{"auth: ListFlights refused: code=Unauthenticated", "peer=127.0.0.1:", "authentication required"},
		{"auth: ListFlights refused: code=Unauthenticated", "unknown token"},
		// Changes to tables are logged at info level with who made them.
		{"[INFO]", "table created: table=t1 by=loader"},
		{"[INFO]", "vacuum applied: table=t1", "by=loader"},
		{"[INFO]", "columns added: table=t1 version=3 columns=1 by=loader"},
	} {
		if !logLineWith(logs, want...) {
			t.Errorf("no line of the call log holds all of %q", want)
		}
	}
	if !strings.Contains(logs, `transport=tls auth="3 token(s) from `) {
		t.Errorf("the start-up log does not describe TLS and tokens:\n%s", logs)
	}
	for _, secret := range []string{writer, reader, expired} {
		if strings.Contains(logs, secret) {
			t.Errorf("the server log contains a secret")
		}
	}
}

// logLineWith reports whether one line of logs holds every fragment.
func logLineWith(logs string, fragments ...string) bool {
	for _, line := range strings.Split(logs, "\n") {
		all := true
		for _, f := range fragments {
			all = all && strings.Contains(line, f)
		}
		if all {
			return true
		}
	}
	return false
}

func appendLine(t *testing.T, file, line string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		t.Fatal(err)
	}
}

// removeLines rewrites file without the lines containing any of hashes.
func removeLines(t *testing.T, file string, secrets ...string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		drop := false
		for _, s := range secrets {
			drop = drop || strings.HasPrefix(line, guard.HashToken(s)+" ") || strings.HasPrefix(line, s+" ")
		}
		if !drop {
			keep = append(keep, line)
		}
	}
	if err := os.WriteFile(file, []byte(strings.Join(keep, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// eventually polls "tsflight tables" with token until its exit code is
// want (0, or exitFail with fragment in the error), for up to 10 s.
func (c secureClient) eventually(token string, want int, fragment string) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, stderr, code := c.run(token, "tables")
		if code == want && strings.Contains(stderr, fragment) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("tables: exit %d, stderr %q; still not exit %d with %q after 10 s", code, stderr, want, fragment)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startReloadServer starts a server over an empty root whose tokens file
// (its path is returned) holds one read token, keeper, and is read again
// as --reload-interval interval says; c is a client of it.
func startReloadServer(t *testing.T, interval string) (tokens, keeper string, srv *serverProc, c secureClient) {
	t.Helper()
	tokens = filepath.Join(t.TempDir(), "tokens")
	keeper = newToken(t, tokens, "read", "keeper")
	srv = startServer(t, nil, "--root", t.TempDir(), "--auth-tokens", tokens, "--reload-interval", interval, "--listen", "127.0.0.1:0")
	return tokens, keeper, srv, secureClient{t: t, uri: "grpc://" + srv.addr}
}

// A changed tokens file applies within --reload-interval: a new token
// works, a removed one (revoked) is refused; a token whose time passes
// stops working without any reload.
func TestServeReloadsTokensFile(t *testing.T) {
	tokens, keeper, srv, c := startReloadServer(t, "100ms")

	fresh := newToken(t, tokens, "write", "fresh")
	c.eventually(fresh, 0, "")
	if out, stderr, code := runCLI(t, nil, "token", "revoke", "--file", tokens, "fresh"); code != 0 || !strings.HasPrefix(out, "revoked fresh (sha256:") {
		t.Fatalf("token revoke: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	c.eventually(fresh, exitFail, "unknown token")
	c.ok(keeper, "tables")
	srv.waitLog("tokens file reloaded", time.Second)

	// Expiry is checked on every call.
	soon := newToken(t, tokens, "read", "soon", "--expires", "3s")
	c.eventually(soon, 0, "")
	c.eventually(soon, exitFail, "token soon expired at")
	c.ok(keeper, "tables")

	// A broken file keeps the tokens in force and is reported once, not
	// at every poll.
	good, err := os.ReadFile(tokens)
	if err != nil {
		t.Fatal(err)
	}
	appendLine(t, tokens, "this-line-has-a-bad-scope-0001 admin")
	srv.waitLog("tokens file not reloaded; the previous tokens stay in force", 5*time.Second)
	time.Sleep(time.Second) // ten polls
	if n := strings.Count(srv.stderr.String(), "tokens file not reloaded"); n != 1 {
		t.Errorf("a broken tokens file was reported %d times in 1 s of polling, want once", n)
	}
	c.ok(keeper, "tables")

	// A deleted file revokes every token; written again, it applies.
	if err := os.Remove(tokens); err != nil {
		t.Fatal(err)
	}
	c.eventually(keeper, exitFail, "unknown token")
	if err := os.WriteFile(tokens, good, 0o600); err != nil {
		t.Fatal(err)
	}
	c.eventually(keeper, 0, "")

	// Revoking the last token revokes it: the emptied file applies.
	removeLines(t, tokens, keeper, soon)
	c.eventually(keeper, exitFail, "unknown token")
	srv.waitLog("it holds no tokens (or is gone), so every call is refused", 5*time.Second)
	srv.stop()
}

// With --reload-interval 0 only SIGHUP reloads; a broken file keeps the
// tokens in force and says so.
func TestServeReloadsTokensOnSIGHUP(t *testing.T) {
	tokens, keeper, srv, c := startReloadServer(t, "0")

	fresh := newToken(t, tokens, "write", "fresh")
	time.Sleep(300 * time.Millisecond)
	c.refused(fresh, []string{"unknown token"}, "tables") // not read yet
	srv.signal(syscall.SIGHUP)
	c.eventually(fresh, 0, "")
	c.ok(fresh, createArgs("t1")...)

	removeLines(t, tokens, fresh)
	srv.signal(syscall.SIGHUP)
	c.eventually(fresh, exitFail, "unknown token")

	// A broken file is not applied: the previous tokens stay.
	appendLine(t, tokens, "this-line-has-a-bad-scope-0001 admin")
	srv.signal(syscall.SIGHUP)
	srv.waitLog("tokens file not reloaded; the previous tokens stay in force", 10*time.Second)
	c.ok(keeper, "tables")
	if logs := srv.stderr.String(); !strings.Contains(logs, `line 2`) || strings.Contains(logs, "this-line-has-a-bad-scope-0001") {
		t.Errorf("the reload error should name the line and not quote the secret:\n%s", logs)
	}
	srv.stop()
}

// A token from TSFLIGHT_AUTH_TOKENS (';'-separated lines) works like one
// from a file.
func TestServeTokensFromEnvironment(t *testing.T) {
	secret := "env-token-0123456789abcdef"
	srv := startServer(t, []string{"TSFLIGHT_AUTH_TOKENS=" + guard.HashToken(secret) + " write name=env; other-token-0123456789 read"},
		"--root", t.TempDir(), "--listen", "127.0.0.1:0")
	c := secureClient{t: t, uri: "grpc://" + srv.addr}
	c.ok(secret, createArgs("t1")...)
	c.refused("other-token-0123456789", []string{"token sha256:"}, createArgs("t2")...)
	c.refused("", []string{"authentication required"}, "tables")
	srv.stop()
}

// A client does not send a token in clear text beyond loopback unless
// told --insecure.
func TestClientRefusesPlaintextTokenBeyondLoopback(t *testing.T) {
	tokens := writeTokens(t)
	const secret = "a-token-for-the-listen-test-01"
	srv := startServer(t, nil, "--root", t.TempDir(), "--listen", "0.0.0.0:0", "--auth-tokens", tokens)
	_, port, _ := net.SplitHostPort(srv.addr)
	ip := nonLoopbackIP(t)
	if ip == "" {
		t.Skip("this machine has no non-loopback IPv4 address")
	}
	remote := "grpc://" + net.JoinHostPort(ip, port)
	_, stderr, code := runCLI(t, []string{"TSFLIGHT_TOKEN=" + secret}, "tables", "--server", remote)
	if code != exitUsage || !strings.Contains(stderr, "would cross the network in clear text") || strings.Contains(stderr, secret) {
		t.Errorf("token over grpc:// to %s: exit %d, stderr %q; want a usage error", remote, code, stderr)
	}
	if _, stderr, code := runCLI(t, []string{"TSFLIGHT_TOKEN=" + secret}, "tables", "--insecure", "--server", remote); code != 0 {
		t.Errorf("token over grpc:// with --insecure: exit %d, stderr %q", code, stderr)
	}
	// Loopback needs no --insecure.
	if _, stderr, code := runCLI(t, []string{"TSFLIGHT_TOKEN=" + secret}, "tables", "--server", "grpc://127.0.0.1:"+port); code != 0 {
		t.Errorf("token over grpc:// to loopback: exit %d, stderr %q", code, stderr)
	}
	srv.stop()
}

func nonLoopbackIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// Mutual TLS: the client's certificate must chain to --tls-client-ca.
// Client certificates alone are authentication enough to listen on every
// interface.
func TestServeMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "tsflight-test")
	cert, key := ca.Issue(t, "server", true)
	clientCert, clientKey := ca.Issue(t, "client", false)
	other := tlstest.NewCA(t, "other")
	otherCert, otherKey := other.Issue(t, "stranger", false)

	srv := startServer(t, nil, "--root", t.TempDir(), "--listen", "0.0.0.0:0",
		"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", ca.File)
	_, port, _ := net.SplitHostPort(srv.addr)
	c := secureClient{t: t, uri: "grpc+tls://127.0.0.1:" + port, caFile: ca.File}
	if out := c.ok("", "tables", "--client-cert", clientCert, "--client-key", clientKey, "--format", "csv"); out != "table,rows,bytes,columns\n" {
		t.Errorf("tables with a client certificate: %q", out)
	}
	c.ok("", append([]string{"create", "--client-cert", clientCert, "--client-key", clientKey}, createArgs("t1")[1:]...)...)
	for _, args := range [][]string{
		{"tables"},
		{"tables", "--client-cert", otherCert, "--client-key", otherKey},
	} {
		if _, stderr, code := c.run("", args...); code == 0 {
			t.Errorf("tsflight %q against mutual TLS: exit 0, stderr %q; want a refusal", args, stderr)
		}
	}
	if _, stderr, code := c.run("", "tables", "--client-cert", clientCert); code != exitUsage || !strings.Contains(stderr, "--client-cert and --client-key go together") {
		t.Errorf("--client-cert alone: exit %d, stderr %q", code, stderr)
	}
	srv.stop()
	if logs := srv.stderr.String(); !strings.Contains(logs, `transport="mutual tls" auth="client certificates"`) {
		t.Errorf("start-up log:\n%s", logs)
	}
}

// The server refuses to listen beyond loopback unless authentication is
// configured or --insecure says so.
func TestServeListenGuard(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		_, stderr, code := runCLI(t, nil, "serve", "--root", t.TempDir(), "--listen", listen)
		if code != exitUsage || !strings.Contains(stderr, "--listen "+listen+" is reachable from other machines and no authentication is configured") ||
			!strings.Contains(stderr, "--insecure") {
			t.Errorf("serve --listen %s: exit %d, stderr %q; want a usage error", listen, code, stderr)
		}
	}
	for _, tc := range []struct {
		args []string
		warn string
	}{
		{[]string{"--listen", "localhost:0"}, ""},
		{[]string{"--listen", "0.0.0.0:0", "--insecure"}, "--insecure: no authentication"},
		{[]string{"--listen", "0.0.0.0:0", "--auth-tokens", writeTokens(t)}, "tokens travel in clear text"},
	} {
		srv := startServer(t, nil, append([]string{"--root", t.TempDir()}, tc.args...)...)
		srv.stop()
		if logs := srv.stderr.String(); tc.warn != "" && !strings.Contains(logs, tc.warn) {
			t.Errorf("serve %q: no warning %q in the log:\n%s", tc.args, tc.warn, logs)
		}
	}
}

func TestCheckBound(t *testing.T) {
	lo := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8815}
	any := &net.TCPAddr{IP: net.IPv4zero, Port: 8815}
	lan := &net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 8815}
	for _, c := range []struct {
		bound          net.Addr
		auth, insecure bool
		refused        bool
	}{
		{lo, false, false, false},
		{&net.TCPAddr{IP: net.IPv6loopback}, false, false, false},
		{any, false, false, true},
		{lan, false, false, true},
		{lan, true, false, false},
		{lan, false, true, false},
	} {
		err := checkBound("db.example:8815", c.bound, c.auth, c.insecure)
		if (err != nil) != c.refused || (err != nil && !strings.Contains(err.Error(), "--listen db.example:8815 bound")) {
			t.Errorf("checkBound(%v, auth=%v, insecure=%v) = %v, want refused=%v", c.bound, c.auth, c.insecure, err, c.refused)
		}
	}
}

func writeTokens(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "tokens")
	appendLine(t, f, "a-token-for-the-listen-test-01 read")
	return f
}

func TestServeAuthFlagErrors(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := file("good", "a-good-token-0123456789 read\n")
	ca := tlstest.NewCA(t, "ca")
	cert, key := ca.Issue(t, "server", true)
	for _, tc := range []struct {
		env  []string
		args []string
		code int
		want string
	}{
		{nil, []string{"--tls-cert", cert}, exitUsage, "--tls-cert and --tls-key go together"},
		{nil, []string{"--tls-client-ca", ca.File}, exitUsage, "--tls-client-ca needs TLS"},
		{[]string{"TSFLIGHT_AUTH_TOKENS=x"}, []string{"--auth-tokens", good}, exitUsage, "not both"},
		{nil, []string{"--reload-interval", "-1s"}, exitUsage, "--reload-interval must not be negative"},
		{nil, []string{"--auth-tokens", file("short", "# tokens\nsekret read\n")}, exitFail, "line 2: bad tokens: a token must be at least 16 characters"},
		{nil, []string{"--auth-tokens", file("scope", "a-good-token-0123456789 admin\n")}, exitFail, `scope "admin": want read or write`},
		{nil, []string{"--auth-tokens", file("empty", "# nothing\n")}, exitFail, "holds no tokens"},
		{nil, []string{"--auth-tokens", filepath.Join(dir, "missing")}, exitFail, "no such file"},
		{[]string{"TSFLIGHT_AUTH_TOKENS= ; "}, nil, exitFail, "TSFLIGHT_AUTH_TOKENS holds no tokens"},
		{nil, []string{"--tls-cert", filepath.Join(dir, "missing.pem"), "--tls-key", key}, exitFail, "TLS certificate"},
		{nil, []string{"--tls-cert", cert, "--tls-key", key, "--tls-client-ca", file("junk.pem", "junk")}, exitFail, "no PEM certificate"},
	} {
		_, stderr, code := runCLI(t, tc.env, append([]string{"serve", "--root", t.TempDir()}, tc.args...)...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("serve %q (env %q): exit %d, stderr %q; want %d and %q", tc.args, tc.env, code, stderr, tc.code, tc.want)
		}
		if strings.Contains(stderr, "sekret") {
			t.Errorf("serve %q: the error quotes a secret: %q", tc.args, stderr)
		}
	}
}

func TestTokenCommand(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens")
	secret := newToken(t, file, "read", "grafana", "--expires", "2099-01-01")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	want := guard.HashToken(secret) + " read name=grafana expires=2099-01-01T00:00:00Z\n"
	if string(data) != want {
		t.Errorf("tokens file %q, want %q", data, want)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens file mode %v (%v), want 0600", fi.Mode(), err)
	}
	second := newToken(t, file, "write", "loader")
	if second == secret || len(second) < guard.MinTokenLength {
		t.Errorf("a second token %d characters, equal to the first: %v", len(second), second == secret)
	}
	tf, err := guard.OpenTokenFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if tok, ok := tf.Tokens().Lookup(second); !ok || tok.Scope != guard.ScopeWrite || tok.Name != "loader" {
		t.Errorf("the second token reads back as %+v, %v", tok, ok)
	}

	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, getenv: func(string) string { return "" }, in: strings.NewReader("my-own-secret-0123456789\n")}
	if code := run(context.Background(), []string{"token", "hash", "--scope", "write", "--name", "ci"}, e); code != 0 ||
		out.String() != guard.HashToken("my-own-secret-0123456789")+" write name=ci\n" {
		t.Errorf("token hash: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"token"}, "needs a subcommand"},
		{[]string{"token", "rotate"}, `unknown token subcommand "rotate"`},
		{[]string{"token", "new", "--scope", "admin", "--file", file}, "--scope must be read or write"},
		{[]string{"token", "new", "--scope", "read"}, "--file is required"},
		{[]string{"token", "new", "--scope", "read", "--file", file, "--expires", "2001-01-01"}, "is in the past"},
		{[]string{"token", "new", "--scope", "read", "--file", file, "--expires", "soon"}, "neither a duration"},
		{[]string{"token", "new", "--scope", "read", "--file", file, "--name", "a b"}, "--name \"a b\""},
		{[]string{"token", "hash", "--scope", "read", "--file", file}, "--file is for token new"},
		{[]string{"token", "new", "--scope", "write", "--name", "grafana", "--file", file}, "already has a token named grafana"},
	} {
		_, stderr, code := runCLI(t, nil, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("tsflight %q: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if after, _ := os.ReadFile(file); strings.Count(string(after), "\n") != 2 {
		t.Errorf("the refused commands changed the tokens file:\n%s", after)
	}

	// list shows names, ids, scopes and expiry, never a secret.
	appendLine(t, file, "# a comment kept by revoke")
	appendLine(t, file, "plain-secret-typed-by-hand-01 read expires=2020-01-01; "+guard.HashToken("another-secret-0123456789")+" write name=batch")
	stdout, stderr, code := runCLI(t, nil, "token", "list", "--file", file)
	wantList := cliText(
		"name                 id                   scope  expires               state",
		"-------------------  -------------------  -----  --------------------  -------",
		"grafana              "+idOf(secret)+"  read   2099-01-01T00:00:00Z  active",
		"loader               "+idOf(second)+"  write  never                 active",
		idOf("plain-secret-typed-by-hand-01")+"  "+idOf("plain-secret-typed-by-hand-01")+"  read   2020-01-01T00:00:00Z  expired",
		"batch                "+idOf("another-secret-0123456789")+"  write  never                 active",
	)
	if code != 0 || stderr != "" || stdout != wantList {
		t.Errorf("token list: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, stderr, stdout, wantList)
	}
	if strings.Contains(stdout, "plain-secret") {
		t.Error("token list shows a secret")
	}
	// revoke by name and by id; one entry of a shared line goes, the
	// other stays; comments stay.
	stdout, stderr, code = runCLI(t, nil, "token", "revoke", "--file", file, "grafana", idOf("plain-secret-typed-by-hand-01"))
	if code != 0 || stdout != "revoked grafana ("+idOf(secret)+", read)\nrevoked "+idOf("plain-secret-typed-by-hand-01")+" ("+idOf("plain-secret-typed-by-hand-01")+", read)\n" {
		t.Errorf("token revoke: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	after, _ := os.ReadFile(file)
	wantFile := guard.HashToken(second) + " write name=loader\n# a comment kept by revoke\n" + guard.HashToken("another-secret-0123456789") + " write name=batch\n"
	if string(after) != wantFile {
		t.Errorf("tokens file after revoke:\n%s\nwant:\n%s", after, wantFile)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("tokens file mode after revoke %v (%v), want 0600", fi.Mode(), err)
	}
	_, stderr, code = runCLI(t, nil, "token", "revoke", "--file", file, "nobody")
	if code != exitFail || !strings.Contains(stderr, "no token in "+file+" is named nobody: nothing was changed") {
		t.Errorf("token revoke of an unknown name: exit %d, stderr %q", code, stderr)
	}
	if again, _ := os.ReadFile(file); string(again) != wantFile {
		t.Errorf("a revoke that matched nothing changed the file")
	}
	for _, args := range [][]string{{"token", "revoke", "--file", file}, {"token", "list"}, {"token", "list", "--file", file, "extra"}} {
		if _, stderr, code := runCLI(t, nil, args...); code != exitUsage {
			t.Errorf("tsflight %q: exit %d, stderr %q; want 2", args, code, stderr)
		}
	}
}

// idOf is the id token list shows for a secret.
func idOf(secret string) string {
	return guard.HashToken(secret)[:len("sha256:")+12]
}
