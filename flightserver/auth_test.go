// Tests of the Auth middleware through a real TLS server and the arrow-go
// client: refusals of missing, unknown and expired tokens on every method,
// read scope refused writes (nothing written), the Handshake answering in
// a response header, revocation by reload, expiry by the clock, secrets
// kept out of logs, authentication off, and client certificates.

package flightserver

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/internal/testkit"
)

// authEnv is a TLS server whose tokens come from a tokens file: a read
// token (reader), a write token stored hashed (writer) and an expired
// one (old). Its clock is the test's.
type authEnv struct {
	*testServer
	pki                   *testPKI
	read, write, expired  string
	tokensPath            string
	tokens                *guard.TokenFile
	logs                  *testkit.Buffer
	clock                 atomic.Int64 // unix nanoseconds AuthOptions.Now returns
	readTok, writeTok     guard.Token
	secretsForLogChecking []string
}

func startAuthServer(t *testing.T) *authEnv {
	t.Helper()
	e := &authEnv{pki: newTestPKI(t), logs: &testkit.Buffer{}}
	e.clock.Store(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	for _, p := range []*string{&e.read, &e.write, &e.expired} {
		tok, err := guard.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		*p = tok
	}
	e.secretsForLogChecking = []string{e.read, e.write, e.expired}
	e.tokensPath = filepath.Join(t.TempDir(), "tokens")
	writeTokens(t, e.tokensPath, "# test tokens\n"+
		e.read+" read name=reader\n"+
		guard.HashToken(e.write)+" write name=writer\n"+
		e.expired+" write name=old expires=2026-01-01\n")
	var err error
	if e.tokens, err = guard.OpenTokenFile(e.tokensPath); err != nil {
		t.Fatal(err)
	}
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: e.logs})
	auth := guard.NewAuth(guard.AuthOptions{Classify: Scopes(),
		Tokens: e.tokens.Tokens,
		Logger: log.Named("auth"),
		Now:    func() time.Time { return time.Unix(0, e.clock.Load()).UTC() },
	})
	if !auth.Enabled() {
		t.Fatal("an Auth with tokens is not enabled")
	}
	st, err := guard.NewServerTLS(guard.TLSFiles{CertFile: e.pki.certFile, KeyFile: e.pki.keyFile})
	if err != nil {
		t.Fatal(err)
	}
	mw := auth.Middleware()
	e.testServer = startGatedServer(t, func(o *Options) { o.Logger = log.Named("flight") }, nil,
		st.ServerOption(), grpc.ChainUnaryInterceptor(mw.Unary), grpc.ChainStreamInterceptor(mw.Stream))
	e.useTLSClient(e.pki)
	e.readTok, _ = e.tokens.Tokens().Lookup(e.read)
	e.writeTok, _ = e.tokens.Tokens().Lookup(e.write)
	return e
}

// as is ctx with the header a client sends on every call.
func as(ctx context.Context, authorization string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", authorization)
}

func bearer(ctx context.Context, token string) context.Context {
	return as(ctx, "Bearer "+token)
}

// everyMethod calls each Flight method once against table cpu (a real
// ticket from tkt) and returns each call's error.
func (e *authEnv) everyMethod(ctx context.Context, tkt *flight.Ticket) map[string]error {
	c := e.client
	out := map[string]error{}
	if s, err := c.ListFlights(ctx, &flight.Criteria{}); err != nil {
		out["ListFlights"] = err
	} else {
		out["ListFlights"] = testkit.Drain(s.Recv)
	}
	_, out["GetFlightInfo"] = c.GetFlightInfo(ctx, pathDesc("cpu"))
	_, out["GetSchema"] = c.GetSchema(ctx, pathDesc("cpu"))
	if s, err := c.DoGet(ctx, tkt); err != nil {
		out["DoGet"] = err
	} else {
		out["DoGet"] = testkit.Drain(s.Recv)
	}
	if s, err := c.DoPut(ctx); err != nil {
		out["DoPut"] = err
	} else {
		_ = s.Send(&flight.FlightData{FlightDescriptor: pathDesc("cpu")})
		_ = s.CloseSend()
		out["DoPut"] = testkit.Drain(s.Recv)
	}
	if s, err := c.DoAction(ctx, &flight.Action{Type: ActionDescribeTable, Body: []byte(`{"table":"cpu"}`)}); err != nil {
		out["DoAction"] = err
	} else {
		out["DoAction"] = testkit.Drain(s.Recv)
	}
	if s, err := c.ListActions(ctx, &flight.Empty{}); err != nil {
		out["ListActions"] = err
	} else {
		out["ListActions"] = testkit.Drain(s.Recv)
	}
	if s, err := c.Handshake(ctx); err != nil {
		out["Handshake"] = err
	} else {
		_ = s.CloseSend()
		out["Handshake"] = testkit.Drain(s.Recv)
	}
	return out
}

// startAuthCPU is startAuthServer with table cpu loaded (loadCPU), and
// the context to call it with (no credential).
func startAuthCPU(t *testing.T) (*authEnv, context.Context) {
	t.Helper()
	e := startAuthServer(t)
	ctx := ctxT(t)
	e.loadCPU(ctx)
	return e, ctx
}

// loadCPU creates table cpu with the write token and returns a ticket of it.
func (e *authEnv) loadCPU(ctx context.Context) *flight.Ticket {
	e.t.Helper()
	w := bearer(ctx, e.write)
	e.createTSBS(w, "cpu")
	e.mustPut(w, pathDesc("cpu"), genRows(t0, 30, 2), 40, 2)
	return e.info(w, pathDesc("cpu")).Endpoint[0].Ticket
}

// assertNoSecretLogged fails if the logs quote any secret, as such or in
// Basic credentials.
func (e *authEnv) assertNoSecretLogged() {
	e.t.Helper()
	logs := e.logs.String()
	if logs == "" {
		e.t.Fatal("nothing was logged: the secrecy check would prove nothing")
	}
	for _, s := range e.secretsForLogChecking {
		for _, form := range []string{s, s[:12], base64.StdEncoding.EncodeToString([]byte("anyuser:" + s)), base64.RawStdEncoding.EncodeToString([]byte("anyuser:" + s))} {
			if strings.Contains(logs, form) {
				e.t.Fatalf("the logs contain a secret (%d characters of it):\n%s", len(form), logs)
			}
		}
	}
}

func TestAuthRefusesWithoutValidToken(t *testing.T) {
	e := startAuthServer(t)
	ctx := ctxT(t)
	tkt := e.loadCPU(ctx)
	wrong, _ := guard.NewToken()
	e.secretsForLogChecking = append(e.secretsForLogChecking, wrong)
	for _, c := range []struct {
		name  string
		ctx   context.Context
		frags []string
	}{
		{"no header", ctx, []string{"authentication required", "Bearer"}},
		{"unknown token", bearer(ctx, wrong), []string{"unknown token"}},
		{"expired token", bearer(ctx, e.expired), []string{"token old expired at 2026-01-01T00:00:00Z"}},
		{"empty bearer", as(ctx, "Bearer "), []string{"carries no token"}},
		{"unknown scheme", as(ctx, "Digest "+e.read), []string{`scheme "Digest" is not supported`}},
		{"bare token, no scheme", as(ctx, e.read), []string{"names no scheme"}},
		{"Basic not base64", as(ctx, "Basic ***"), []string{"not base64"}},
		{"Basic without colon", as(ctx, "Basic "+base64.StdEncoding.EncodeToString([]byte(e.read))), []string{"user:password"}},
		{"Basic with empty password", as(ctx, "Basic "+base64.StdEncoding.EncodeToString([]byte("anyuser:"))), []string{"no password"}},
		{"Basic with a wrong password", as(ctx, "Basic "+base64.StdEncoding.EncodeToString([]byte("anyuser:"+wrong))), []string{"unknown token"}},
		{"two headers", as(bearer(ctx, e.write), "Bearer "+e.write), []string{"more than one"}},
	} {
		errs := e.everyMethod(c.ctx, tkt)
		if len(errs) != 8 {
			t.Fatalf("%s: %d methods called", c.name, len(errs))
		}
		for m, err := range errs {
			wantCode(t, c.name+": "+m, err, codes.Unauthenticated, c.frags...)
			for _, s := range []string{e.read, e.write, e.expired, wrong, e.read[:12], wrong[:12]} {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("%s: %s: the error %q quotes a secret", c.name, m, err)
				}
			}
		}
	}
	// Scheme names are case-insensitive; a valid token still works.
	for m, err := range e.everyMethod(as(ctx, "bearer "+e.write), tkt) {
		if err != nil && m != "DoPut" {
			t.Fatalf("lower-case bearer: %s: %v", m, err)
		}
	}
	e.assertNoSecretLogged()
}

func TestAuthReadScope(t *testing.T) {
	e, ctx := startAuthCPU(t)
	r := bearer(ctx, e.read)

	// Reading works.
	if errs := e.everyMethod(r, e.info(r, pathDesc("cpu")).Endpoint[0].Ticket); len(errs) != 8 {
		t.Fatal("not every method was called")
	} else {
		for m, err := range errs {
			if m == "DoPut" {
				wantCode(t, "read token DoPut", err, codes.PermissionDenied, "DoPut (append to cpu) needs write scope", "token reader has read scope")
			} else if err != nil {
				t.Fatalf("read token: %s: %v", m, err)
			}
		}
	}
	got, err := e.fetchAll(r, e.info(r, pathDesc("cpu")))
	if err != nil || len(got.rows) != 60 {
		t.Fatalf("DoGet with a read token: %v", err)
	}
	rng := map[string]any{"table": "cpu", "start": "2024-06-01T00:00:00Z", "end": "2024-06-01T00:10:00Z"}
	for name, body := range map[string]any{
		ActionDescribeTable: map[string]any{"table": "cpu"},
		ActionCoverage:      rng,
		ActionGaps:          rng,
		ActionCoverageGrid:  map[string]any{"table": "cpu"},
		ActionVacuum:        map[string]any{"table": "cpu", "older_than": time.Now().UTC().Format(time.RFC3339)},
	} {
		if _, err := e.action(r, name, body); err != nil {
			t.Fatalf("read token: %s: %v", name, err)
		}
	}

	// Writing is refused, naming what and the token, and writes nothing.
	before := snapshot(t, e.root)
	rows := genRows(t0.Add(time.Hour), 5, 2)
	batches := buildBatches(e.cliMem, rows, 40)
	defer releaseAll(batches)
	_, err = e.put(r, pathDesc("cpu"), tsbsSchema, batches...)
	wantCode(t, "DoPut PATH", err, codes.PermissionDenied, "DoPut (append to cpu) needs write scope", "token reader has read scope")
	_, err = e.put(r, cmdDesc(t, map[string]any{"table": "newt", "create": map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s"}}), tsbsSchema, batches...)
	wantCode(t, "DoPut CMD create", err, codes.PermissionDenied, "DoPut (append) needs write scope", "token reader")
	for _, c := range []struct {
		name string
		body any
		what string
	}{
		{ActionCreateTable, map[string]any{"table": "newt", "index_column": "ts", "index_type": "timestamp", "granularity": "10s"}, "action create-table"},
		{ActionAddColumns, map[string]any{"table": "cpu", "columns": []map[string]any{{"name": "temp", "type": "float64", "nullable": true}}}, "action add-columns"},
		{ActionVacuum, map[string]any{"table": "cpu", "older_than": time.Now().UTC().Format(time.RFC3339), "apply": true}, "action vacuum with apply"},
	} {
		_, err := e.action(r, c.name, c.body)
		wantCode(t, "read token: "+c.name, err, codes.PermissionDenied, c.what+" needs write scope", "token reader has read scope")
	}
	// An action no service has runs nothing: not a question of scope.
	_, err = e.action(r, "drop-everything", map[string]any{})
	wantCode(t, "read token: drop-everything", err, codes.InvalidArgument, `unknown action "drop-everything"`)
	sameSnapshot(t, "refused writes", before, snapshot(t, e.root))

	// The write token does all of it.
	w := bearer(ctx, e.write)
	e.mustPut(w, pathDesc("cpu"), rows, 40, 3)
	e.mustAction(w, ActionCreateTable, map[string]any{"table": "newt", "index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": []string{"hostname"}})
	e.mustPut(w, cmdDesc(t, map[string]any{"table": "newt"}), rows, 40, 2)
	e.mustPut(w, cmdDesc(t, map[string]any{"table": "other", "create": map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": []string{"hostname"}}}), rows, 40, 2)
	e.mustAction(w, ActionAddColumns, map[string]any{"table": "cpu", "columns": []map[string]any{{"name": "temp", "type": "float64", "nullable": true}}})
	if res := e.mustAction(w, ActionVacuum, map[string]any{"table": "cpu", "apply": true}); res["applied"] != true {
		t.Fatalf("vacuum apply with the write token: %v", res)
	}
	d := e.mustAction(r, ActionDescribeTable, map[string]any{"table": "cpu"})
	if d["rows"] != float64(70) || d["version"] != float64(4) {
		t.Fatalf("cpu after the writes: %v", d)
	}
	e.assertNoSecretLogged()
}

func TestAuthHandshake(t *testing.T) {
	e, ctx := startAuthCPU(t)

	// arrow-go's client: Basic in, the bearer token out, used after.
	authed, err := e.client.AuthenticateBasicToken(ctx, "anyuser", e.read)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := metadata.FromOutgoingContext(authed)
	if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+e.read {
		t.Fatalf("AuthenticateBasicToken gave authorization %d value(s)", len(got))
	}
	if _, err := e.action(authed, ActionDescribeTable, map[string]any{"table": "cpu"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.action(authed, ActionCreateTable, map[string]any{"table": "x", "index_column": "ts", "index_type": "timestamp", "granularity": "10s"})
	wantCode(t, "create-table after a read handshake", err, codes.PermissionDenied, "token reader")
	if _, err := e.client.AuthenticateBasicToken(ctx, "anyuser", e.expired); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("AuthenticateBasicToken with the expired token: %v", err)
	}
	if _, err := e.client.AuthenticateBasicToken(ctx, "anyuser", ""); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("AuthenticateBasicToken with no password: %v", err)
	}

	// The raw Handshake: the token comes back in the response HEADER (the
	// JDBC driver reads nothing else), for every way of presenting it.
	padded := base64.StdEncoding.EncodeToString([]byte("anyuser:" + e.write))
	if !strings.HasSuffix(padded, "=") {
		t.Fatalf("padding is not exercised: %d characters", len(padded))
	}
	for _, c := range []struct{ name, header, want string }{
		{"Basic, padded", "Basic " + padded, e.write},
		{"Basic, unpadded", "Basic " + base64.RawStdEncoding.EncodeToString([]byte("anyuser:"+e.write)), e.write},
		{"Basic, password with a colon user", "Basic " + base64.StdEncoding.EncodeToString([]byte("a:b:"+e.read)), ""},
		{"Bearer (JDBC token=)", "Bearer " + e.read, e.read},
	} {
		var header, trailer metadata.MD
		s, err := e.client.Handshake(as(ctx, c.header), grpc.Header(&header), grpc.Trailer(&trailer))
		if err != nil {
			t.Fatal(err)
		}
		// The server answers from the headers alone and may have ended
		// the stream already: Send then reports io.EOF, and Recv the
		// status.
		if err := s.Send(&flight.HandshakeRequest{}); err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		_ = s.CloseSend()
		err = testkit.Drain(s.Recv)
		if c.want == "" { // "a:b:<token>": the password is "b:<token>", unknown
			wantCode(t, c.name, err, codes.Unauthenticated, "unknown token")
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := header.Get("authorization"); len(got) != 1 || got[0] != "Bearer "+c.want {
			t.Fatalf("%s: the response header carries %d authorization value(s), want the bearer token", c.name, len(got))
		}
		if got := trailer.Get("authorization"); len(got) != 0 {
			t.Fatalf("%s: the token is in the trailer too", c.name)
		}
	}
	e.assertNoSecretLogged()
}

func TestAuthReloadRevokes(t *testing.T) {
	e, ctx := startAuthCPU(t)
	describe := func(tok string) error {
		_, err := e.action(bearer(ctx, tok), ActionDescribeTable, map[string]any{"table": "cpu"})
		return err
	}
	if err := describe(e.read); err != nil {
		t.Fatal(err)
	}
	// Revoke reader.
	writeTokens(t, e.tokensPath, guard.HashToken(e.write)+" write name=writer\n")
	if changed, err := e.tokens.Reload(); !changed || err != nil {
		t.Fatalf("Reload: %v %v", changed, err)
	}
	wantCode(t, "revoked token", describe(e.read), codes.Unauthenticated, "unknown token")
	if _, err := e.client.AuthenticateBasicToken(ctx, "u", e.read); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("handshake with a revoked token: %v", err)
	}
	if err := describe(e.write); err != nil {
		t.Fatalf("the remaining token: %v", err)
	}
	// Add one.
	added, _ := guard.NewToken()
	e.secretsForLogChecking = append(e.secretsForLogChecking, added)
	wantCode(t, "not yet added", describe(added), codes.Unauthenticated, "unknown token")
	if err := guard.AppendTokenLine(e.tokensPath, guard.HashToken(added)+" read name=added"); err != nil {
		t.Fatal(err)
	}
	if changed, err := e.tokens.Reload(); !changed || err != nil {
		t.Fatalf("Reload: %v %v", changed, err)
	}
	if err := describe(added); err != nil {
		t.Fatalf("the added token: %v", err)
	}
	// A broken file keeps the tokens in force.
	writeTokens(t, e.tokensPath, "garbage\n")
	if _, err := e.tokens.Reload(); err == nil {
		t.Fatal("a broken tokens file reloaded")
	}
	if err := describe(added); err != nil {
		t.Fatalf("after a failed reload: %v", err)
	}
	e.assertNoSecretLogged()
}

func TestAuthExpiryByClock(t *testing.T) {
	e, ctx := startAuthCPU(t)
	soon, _ := guard.NewToken()
	e.secretsForLogChecking = append(e.secretsForLogChecking, soon)
	if err := guard.AppendTokenLine(e.tokensPath, soon+" read name=soon expires=2026-06-01T00:00:10Z"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	list := func() error {
		_, err := actionTypesOf(bearer(ctx, soon), e.client)
		return err
	}
	e.clock.Store(time.Date(2026, 6, 1, 0, 0, 9, 999999999, time.UTC).UnixNano())
	if err := list(); err != nil {
		t.Fatalf("before expiry: %v", err)
	}
	if _, err := e.client.AuthenticateBasicToken(ctx, "u", soon); err != nil {
		t.Fatalf("handshake before expiry: %v", err)
	}
	e.clock.Store(time.Date(2026, 6, 1, 0, 0, 10, 0, time.UTC).UnixNano())
	wantCode(t, "at expiry", list(), codes.Unauthenticated, "token soon expired at 2026-06-01T00:00:10Z")
	_, err := e.client.AuthenticateBasicToken(ctx, "u", soon)
	wantCode(t, "handshake at expiry", err, codes.Unauthenticated, "token soon expired")
	// The clock going back (it is the test's) makes it valid again: expiry
	// is judged on every call, not remembered.
	e.clock.Store(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	if err := list(); err != nil {
		t.Fatalf("clock before expiry again: %v", err)
	}
	e.assertNoSecretLogged()
}

func TestAuthDisabled(t *testing.T) {
	a := guard.NewAuth(guard.AuthOptions{Classify: Scopes()})
	if a.Enabled() {
		t.Fatal("zero AuthOptions: enabled")
	}
	mw := a.Middleware()
	ts := startGatedServer(t, nil, nil, grpc.ChainUnaryInterceptor(mw.Unary), grpc.ChainStreamInterceptor(mw.Stream))
	ctx := ctxT(t)
	var header metadata.MD
	s, err := ts.client.Handshake(ctx, grpc.Header(&header))
	if err != nil {
		t.Fatal(err)
	}
	_ = s.CloseSend()
	if err := testkit.Drain(s.Recv); err != nil {
		t.Fatalf("Handshake with authentication off: %v", err)
	}
	if len(header.Get("authorization")) != 0 {
		t.Fatal("Handshake with authentication off answered a token")
	}
	// arrow-go (and so ADBC given a user and password) wants an
	// authorization header in the answer: it gets its own back.
	authed, err := ts.client.AuthenticateBasicToken(ctx, "u", "whatever")
	if err != nil {
		t.Fatalf("AuthenticateBasicToken with authentication off: %v", err)
	}
	if md, _ := metadata.FromOutgoingContext(authed); len(md.Get("authorization")) != 1 || md.Get("authorization")[0] != "Basic "+base64.RawStdEncoding.EncodeToString([]byte("u:whatever")) {
		t.Fatalf("AuthenticateBasicToken with authentication off answered %v", md)
	}
	if _, err := ts.action(authed, ActionDescribeTable, map[string]any{"table": "nosuch"}); status.Code(err) != codes.NotFound {
		t.Fatalf("a call after the handshake: %v, want NotFound", err)
	}
	ts.createTSBS(ctx, "cpu")
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 2), 40, 2)
	got, err := ts.fetchAll(ctx, ts.info(ctx, pathDesc("cpu")))
	if err != nil || len(got.rows) != 20 {
		t.Fatalf("DoGet: %v", err)
	}
	if res := ts.mustAction(ctx, ActionVacuum, map[string]any{"table": "cpu", "apply": true}); res["applied"] != true {
		t.Fatalf("vacuum apply: %v", res)
	}
}

func TestAuthClientCertificates(t *testing.T) {
	pki := newTestPKI(t)
	st, err := guard.NewServerTLS(guard.TLSFiles{CertFile: pki.certFile, KeyFile: pki.keyFile, ClientCAFile: pki.caFile})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	o := guard.AuthOptions{Classify: Scopes(), ClientCertificates: true, Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: logs})}
	mw := guard.NewAuth(o).Middleware()
	ts := startGatedServer(t, nil, nil, st.ServerOption(), grpc.ChainUnaryInterceptor(mw.Unary), grpc.ChainStreamInterceptor(mw.Stream))
	ts.useTLSClient(pki, pki.clientCert)
	ctx := ctxT(t)
	// The certificate is the credential, with write scope: no token.
	if _, err := ts.client.AuthenticateBasicToken(ctx, "u", "ignored-password"); err != nil {
		t.Fatalf("Handshake with a client certificate: %v", err)
	}
	ts.createTSBS(ctx, "cpu")
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 2), 40, 2)
	ts.mustAction(ctx, ActionAddColumns, map[string]any{"table": "cpu", "columns": []map[string]any{{"name": "temp", "type": "float64", "nullable": true}}})
	if !strings.Contains(logs.String(), "tsflight test client") {
		t.Fatalf("the handshake log does not name the certificate's subject:\n%s", logs)
	}

	// The same Auth on a listener that does not verify certificates (a
	// misconfiguration) lets nobody in.
	plain := startGatedServer(t, nil, nil, grpc.ChainUnaryInterceptor(mw.Unary), grpc.ChainStreamInterceptor(mw.Stream))
	_, err = actionTypesOf(ctx, plain.client)
	wantCode(t, "client-certificate auth without TLS", err, codes.Unauthenticated, "client certificate")
	_, err = plain.client.AuthenticateBasicToken(ctx, "u", "p")
	wantCode(t, "handshake without TLS", err, codes.Unauthenticated, "client certificate")

	// Tokens and certificates: a certificate alone is not enough.
	tokens, err := guard.ParseTokens(strings.NewReader(secretA+" read name=a"), "inline")
	if err != nil {
		t.Fatal(err)
	}
	both := guard.AuthOptions{Classify: Scopes(), ClientCertificates: true, Tokens: func() *guard.TokenSet { return tokens }}
	mw2 := guard.NewAuth(both).Middleware()
	ts2 := startGatedServer(t, nil, nil, st.ServerOption(), grpc.ChainUnaryInterceptor(mw2.Unary), grpc.ChainStreamInterceptor(mw2.Stream))
	ts2.useTLSClient(pki, pki.clientCert)
	_, err = actionTypesOf(ctx, ts2.client)
	wantCode(t, "certificate without token", err, codes.Unauthenticated, "authentication required")
	if _, err := actionTypesOf(bearer(ctx, secretA), ts2.client); err != nil {
		t.Fatalf("certificate and token: %v", err)
	}
	_, err = ts2.action(bearer(ctx, secretA), ActionCreateTable, map[string]any{"table": "x", "index_column": "ts", "index_type": "timestamp", "granularity": "10s"})
	wantCode(t, "read token with a certificate", err, codes.PermissionDenied, "token a has read scope")
}

// Auth.Tap refuses a call without a valid token from its headers, before
// gRPC reads the request: here it is the only authentication the server
// has (no middleware), so every refusal below is the tap's, and the big
// request of the first call was never held.
func TestAuthTapRefusesBeforeTheRequestIsRead(t *testing.T) {
	tokens, err := guard.ParseTokens(strings.NewReader("a-token-for-the-tap-test-0001 read name=reader"), "test")
	if err != nil {
		t.Fatal(err)
	}
	auth := guard.NewAuth(guard.AuthOptions{Classify: Scopes(), Tokens: func() *guard.TokenSet { return tokens }})
	gate := newGate(t, guard.DefaultLimits())
	ts := startGatedServer(t, nil, nil, gate.ServerOptions(auth.Tap)...)
	ctx := ctxT(t)
	big := &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: make([]byte, 8<<20)}
	_, err = ts.client.GetFlightInfo(ctx, big)
	wantCode(t, "an 8 MiB GetFlightInfo without a token", err, codes.Unauthenticated, "authentication required")
	_, err = ts.client.GetFlightInfo(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer nope-nope-nope-nope"), big)
	wantCode(t, "with an unknown token", err, codes.Unauthenticated, "unknown token")
	lf, err := ts.client.ListFlights(ctx, &flight.Criteria{})
	if err == nil {
		_, err = lf.Recv()
	}
	wantCode(t, "a stream without a token", err, codes.Unauthenticated, "authentication required")
	// With the token the call reaches the service.
	ok := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer a-token-for-the-tap-test-0001")
	_, err = ts.client.GetFlightInfo(ok, pathDesc("nope"))
	wantCode(t, "with the token", err, codes.NotFound, "nope")
}
