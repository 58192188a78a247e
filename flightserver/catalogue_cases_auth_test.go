package flightserver

// The authentication rows of the bad-input catalogue (see
// catalogue_test.go): calls without a usable credential (none, unknown,
// revoked, expired, malformed headers) and read tokens calling what
// writes. Their server runs the Auth middleware over a token set of a read
// token (reader), a write token (writer, held hashed), an expired write
// token (old) and a write token a setup can revoke (gone). Setup and the
// after-check send the write token; each case sends its own credential,
// and its message must quote no secret.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/guard"
)

// catTokens are the secrets of an authenticated catalogue server and the
// token set in force, which revoke replaces as a reload of the tokens file
// would.
type catTokens struct {
	read, write, expired, revoked string
	set                           atomic.Pointer[guard.TokenSet]
}

// newCatTokens makes fresh secrets and puts all four tokens in force.
func newCatTokens(t *testing.T) *catTokens {
	t.Helper()
	k := &catTokens{}
	for _, p := range []*string{&k.read, &k.write, &k.expired, &k.revoked} {
		s, err := guard.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		*p = s
	}
	k.load(t, true)
	return k
}

// load parses the token lines (with or without gone) and puts them in
// force.
func (k *catTokens) load(t *testing.T, withRevoked bool) {
	t.Helper()
	text := k.read + " read name=reader\n" +
		guard.HashToken(k.write) + " write name=writer\n" +
		k.expired + " write name=old expires=2020-01-01\n"
	if withRevoked {
		text += guard.HashToken(k.revoked) + " write name=gone\n"
	}
	set, err := guard.ParseTokens(strings.NewReader(text), "catalogue tokens")
	if err != nil {
		t.Fatal(err)
	}
	k.set.Store(set)
}

// serverOptions install the Auth middleware over the tokens in force.
func (k *catTokens) serverOptions() []grpc.ServerOption {
	mw := guard.NewAuth(guard.AuthOptions{Classify: Scopes(), Tokens: k.set.Load}).Middleware()
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(mw.Unary), grpc.ChainStreamInterceptor(mw.Stream)}
}

// assertNotQuoted fails when err's message holds any secret, or the start
// of one, or the Basic credentials made of one.
func (k *catTokens) assertNotQuoted(t *testing.T, err error) {
	t.Helper()
	msg := status.Convert(err).Message()
	for _, s := range []string{k.read, k.write, k.expired, k.revoked} {
		for _, form := range []string{s, s[:12], basicOf("anyuser", s)} {
			if strings.Contains(msg, form) {
				t.Fatalf("the error quotes a secret (%d characters of it): %q", len(form), msg)
			}
		}
	}
}

// basicOf is Basic credentials as clients encode them (padded).
func basicOf(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// sending is e with calls carrying authorization: header (and nothing
// else) instead of the write token.
func (e *catEnv) sending(header string) *catEnv {
	c := *e
	c.ctx = metadata.AppendToOutgoingContext(e.bare, "authorization", header)
	return &c
}

// anonymous is e with calls carrying no credential.
func (e *catEnv) anonymous() *catEnv {
	c := *e
	c.ctx = e.bare
	return &c
}

// reader is e with calls carrying the read token.
func (e *catEnv) reader() *catEnv { return e.sending("Bearer " + e.tok.read) }

// assertNoTable fails when the case left a directory for table name,
// which the snapshot (files only) would not see.
func (e *catEnv) assertNoTable(name string) {
	e.t.Helper()
	if _, err := os.Stat(filepath.Join(e.root, name)); !os.IsNotExist(err) {
		e.t.Fatalf("table %s exists after the refused call (%v)", name, err)
	}
}

// vacuumRemovable runs a vacuum dry run of cpu as ctx and returns the
// paths it would delete.
func (e *catEnv) vacuumRemovable(ctx context.Context) []string {
	e.t.Helper()
	raw, err := e.action(ctx, ActionVacuum, catVacuum(false))
	if err != nil {
		e.t.Fatalf("vacuum dry run: %v", err)
	}
	var res VacuumResult
	if err := json.Unmarshal(raw, &res); err != nil {
		e.t.Fatal(err)
	}
	if res.Applied {
		e.t.Fatal("a dry run says it applied")
	}
	return vacuumPaths(res, "removable")
}

// catVacuum is the body of a vacuum of cpu whose cutoff is the server's
// clock: every file no commit references is removable.
func catVacuum(apply bool) string {
	return jsonOf(map[string]any{"table": "cpu", "retention": "0s", "apply": apply})
}

func authCatalogue() []badCase {
	const authn = "authentication: no usable credential"
	const scope = "authentication: read token writing"
	required := "authentication required"
	needs := "send the header authorization: Bearer <token>"
	reader := "token reader has read scope"
	newt := map[string]any{"table": "newt", "index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": []string{"hostname"}}
	return []badCase{
		// No credential at all, on each kind of call.
		{name: "no authorization header: append", category: authn, op: "DoPut PATH [cpu], no header", code: codes.Unauthenticated, frags: []string{required, needs}, auth: true,
			run: func(e *catEnv) error { return e.anonymous().putTSBS(pathDesc("cpu"), newRows) }},
		{name: "no authorization header: plan a scan", category: authn, op: "GetFlightInfo PATH [cpu], no header", code: codes.Unauthenticated, frags: []string{required, needs}, auth: true,
			run: func(e *catEnv) error { return e.anonymous().infoErr(pathDesc("cpu")) }},
		{name: "no authorization header: a ticket the write token got", category: authn, op: "DoGet, no header", code: codes.Unauthenticated, frags: []string{required, needs}, auth: true,
			setup: func(e *catEnv) { e.ticket = e.info(e.ctx, pathDesc("cpu")).Endpoint[0].Ticket },
			run: func(e *catEnv) error {
				_, err := e.doGet(e.bare, e.ticket)
				return err
			}},
		{name: "no authorization header: create a table", category: authn, op: "DoAction create-table, no header", code: codes.Unauthenticated, frags: []string{required, needs}, auth: true,
			run: func(e *catEnv) error {
				err := e.anonymous().act(ActionCreateTable, newt)
				e.assertNoTable("newt")
				return err
			}},

		// A credential the server does not accept.
		{name: "unknown token", category: authn, op: "DoPut PATH [cpu], Bearer + a token not in the set", code: codes.Unauthenticated, frags: []string{"unknown token", "not in the server's tokens, or was revoked"}, auth: true,
			run: func(e *catEnv) error {
				wrong, err := guard.NewToken()
				if err != nil {
					e.t.Fatal(err)
				}
				return e.sending("Bearer "+wrong).putTSBS(pathDesc("cpu"), newRows)
			}},
		{name: "revoked token (write scope, removed from the set in force)", category: authn, op: "DoAction add-columns, Bearer GONE", code: codes.Unauthenticated, frags: []string{"unknown token", "was revoked"}, auth: true,
			setup: func(e *catEnv) {
				// gone works until it is revoked.
				if err := e.sending("Bearer "+e.tok.revoked).act(ActionDescribeTable, `{"table":"cpu"}`); err != nil {
					e.t.Fatalf("the token before its revocation: %v", err)
				}
				e.tok.load(e.t, false)
			},
			run: func(e *catEnv) error {
				return e.sending("Bearer "+e.tok.revoked).act(ActionAddColumns, `{"table":"cpu","columns":[{"name":"x","type":"int64"}]}`)
			}},
		{name: "expired token (write scope, expired 2020-01-01)", category: authn, op: "DoPut PATH [cpu], Bearer OLD", code: codes.Unauthenticated, frags: []string{"token old expired at 2020-01-01T00:00:00Z"}, auth: true,
			run: func(e *catEnv) error { return e.sending("Bearer "+e.tok.expired).putTSBS(pathDesc("cpu"), newRows) }},
		{name: "Bearer with an empty token", category: authn, op: `DoPut PATH [cpu], "Bearer "`, code: codes.Unauthenticated, frags: []string{"the Bearer authorization header carries no token"}, auth: true,
			run: func(e *catEnv) error { return e.sending("Bearer ").putTSBS(pathDesc("cpu"), newRows) }},
		{name: "Basic credentials without a password", category: authn, op: `DoAction create-table, Basic base64("writer:")`, code: codes.Unauthenticated, frags: []string{"the Basic credentials carry no password", "the password is the token"}, auth: true,
			run: func(e *catEnv) error {
				err := e.sending("Basic "+basicOf("writer", "")).act(ActionCreateTable, newt)
				e.assertNoTable("newt")
				return err
			}},
		{name: "Basic credentials that are not base64", category: authn, op: "DoPut PATH [cpu], `Basic ***`", code: codes.Unauthenticated, frags: []string{"not base64 of user:password"}, auth: true,
			run: func(e *catEnv) error { return e.sending("Basic ***").putTSBS(pathDesc("cpu"), newRows) }},
		{name: "an unsupported scheme (Digest) with the write token", category: authn, op: "DoPut PATH [cpu], Digest WRITER", code: codes.Unauthenticated, frags: []string{`authorization scheme "Digest" is not supported`, needs}, auth: true,
			run: func(e *catEnv) error { return e.sending("Digest "+e.tok.write).putTSBS(pathDesc("cpu"), newRows) }},
		{name: "the write token without a scheme", category: authn, op: "DoPut PATH [cpu], WRITER alone", code: codes.Unauthenticated, frags: []string{"the authorization header names no scheme"}, auth: true,
			run: func(e *catEnv) error { return e.sending(e.tok.write).putTSBS(pathDesc("cpu"), newRows) }},
		{name: "two authorization headers (both the write token)", category: authn, op: "DoPut PATH [cpu], Bearer WRITER twice", code: codes.Unauthenticated, frags: []string{"more than one authorization header"}, auth: true,
			run: func(e *catEnv) error {
				two := e.sending("Bearer " + e.tok.write)
				two.ctx = metadata.AppendToOutgoingContext(two.ctx, "authorization", "Bearer "+e.tok.write)
				return two.putTSBS(pathDesc("cpu"), newRows)
			}},
		{name: "Handshake with an unknown token as the Basic password", category: authn, op: "Handshake (AuthenticateBasicToken), a password that is no token", code: codes.Unauthenticated, frags: []string{"unknown token"}, auth: true,
			run: func(e *catEnv) error {
				_, err := e.client.AuthenticateBasicToken(e.bare, "anyuser", "not-a-token-of-this-server")
				return err
			}},

		// A read token calling what writes: refused before anything is read
		// or written.
		{name: "read token appends", category: scope, op: "DoPut PATH [cpu], Bearer READER", code: codes.PermissionDenied, frags: []string{"DoPut (append to cpu) needs write scope", reader}, auth: true,
			run: func(e *catEnv) error { return e.reader().putTSBS(pathDesc("cpu"), newRows) }},
		{name: "read token creates a table by DoPut", category: scope, op: "DoPut CMD {table: newt, create}, Bearer READER", code: codes.PermissionDenied, frags: []string{"DoPut (append) needs write scope", reader}, auth: true,
			run: func(e *catEnv) error {
				err := e.reader().putTSBS(cmdDesc(e.t, map[string]any{"table": "newt", "create": catCreate}), newRows)
				e.assertNoTable("newt")
				return err
			}},
		{name: "read token calls create-table", category: scope, op: "DoAction create-table, Bearer READER", code: codes.PermissionDenied, frags: []string{"action create-table needs write scope", reader}, auth: true,
			run: func(e *catEnv) error {
				err := e.reader().act(ActionCreateTable, newt)
				e.assertNoTable("newt")
				return err
			}},
		{name: "read token calls create-table with Basic credentials", category: scope, op: `DoAction create-table, Basic base64("anyuser:" + READER)`, code: codes.PermissionDenied, frags: []string{"action create-table needs write scope", reader}, auth: true,
			run: func(e *catEnv) error {
				err := e.sending("Basic "+basicOf("anyuser", e.tok.read)).act(ActionCreateTable, newt)
				e.assertNoTable("newt")
				return err
			}},
		{name: "read token calls add-columns", category: scope, op: "DoAction add-columns, Bearer READER", code: codes.PermissionDenied, frags: []string{"action add-columns needs write scope", reader}, auth: true,
			run: func(e *catEnv) error {
				return e.reader().act(ActionAddColumns, `{"table":"cpu","columns":[{"name":"temp","type":"float64","nullable":true}]}`)
			}},
		{name: "read token vacuums with apply (an orphan file planted)", category: scope, op: `DoAction vacuum {"retention":"0s","apply":true}, Bearer READER`, code: codes.PermissionDenied, frags: []string{"action vacuum with apply needs write scope", reader}, auth: true,
			setup: func(e *catEnv) {
				dir := filepath.Join(e.root, "cpu")
				planted := plantStray(e.t, dir, e.segmentOf(dir))
				// The read token may dry-run, and the dry run would
				// delete what was planted: a wrong apply would show.
				if got := e.vacuumRemovable(e.reader().ctx); strings.Join(got, " ") != strings.Join(planted, " ") {
					e.t.Fatalf("the dry run would remove %v, want the planted %v", got, planted)
				}
			},
			run: func(e *catEnv) error { return e.reader().act(ActionVacuum, catVacuum(true)) }},
		{name: "read token vacuums with a body that is not JSON", category: scope, op: "DoAction vacuum `{apply`, Bearer READER", code: codes.PermissionDenied, frags: []string{"action vacuum (with a body that does not decode) needs write scope", reader}, auth: true,
			run: func(e *catEnv) error { return e.reader().act(ActionVacuum, `{apply`) }},
		{name: "read token repairs with check (a copy of cpu whose CURRENT lags)", category: scope, op: `DoAction check {"table":"lag","repair":true}, Bearer READER`, code: codes.PermissionDenied, frags: []string{"action check with repair needs write scope", reader}, auth: true,
			setup: func(e *catEnv) {
				copyTable(e.t, e.root, "cpu", "lag")
				e.rewrite(filepath.Join(e.root, "lag"), "_timeseries_log/CURRENT", func([]byte) []byte { return []byte("1\n") })
				// The read token may check, and the check finds what a
				// repair would rewrite: a wrong repair would show.
				res, err := e.check(e.reader().ctx, map[string]any{"table": "lag"})
				if err != nil || res.OK || len(res.Tables) != 1 || len(res.Tables[0].Findings) != 1 || !res.Tables[0].Findings[0].Repairable {
					e.t.Fatalf("the read token's check of lag: %v, %+v; want one repairable finding", err, res)
				}
			},
			run: func(e *catEnv) error { return e.reader().act(ActionCheck, `{"table":"lag","repair":true}`) }},
		{name: "read token checks with a body that is not JSON", category: scope, op: "DoAction check `{repair`, Bearer READER", code: codes.PermissionDenied, frags: []string{"action check (with a body that does not decode) needs write scope", reader}, auth: true,
			run: func(e *catEnv) error { return e.reader().act(ActionCheck, `{repair`) }},
		// No service runs it, so scope is not the question: the read
		// token hears that it does not exist and what does (unknown.go).
		{name: "read token calls an action the server does not list", category: scope, op: "DoAction drop-table, Bearer READER", code: codes.InvalidArgument, frags: []string{`unknown action "drop-table"`, "The actions are: "}, auth: true,
			run: func(e *catEnv) error { return e.reader().act("drop-table", `{"table":"cpu"}`) }},
	}
}
