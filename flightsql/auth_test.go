//go:build duckdb_arrow

// Tests of authentication on the Flight SQL listener (the router with the
// flightserver Auth middleware, over TLS): the ADBC Go driver with user
// and password or an authorization header, read tokens refused bulk
// ingest and updates but allowed parameterised prepared queries, and every
// listed action classified on purpose.

package flightsql

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-adbc/go/adbc"
	adbcflightsql "github.com/apache/arrow-adbc/go/adbc/driver/flightsql"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/flightserver/tlstest"
	"github.com/tsflight/tsflight/internal/testkit"
)

// sqlAuthEnv is a TLS Flight SQL listener whose tokens are a read token
// (reader) and a write token (writer); client is arrow-go's Flight SQL
// client trusting the test CA, with no credential of its own.
type sqlAuthEnv struct {
	*sqlServer
	caPEM       []byte
	read, write string
}

// startSQLAuth is startSQLWith with the Auth middleware and TLS.
func startSQLAuth(t *testing.T) *sqlAuthEnv {
	t.Helper()
	e := &sqlAuthEnv{}
	var err error
	for _, p := range []*string{&e.read, &e.write} {
		if *p, err = guard.NewToken(); err != nil {
			t.Fatal(err)
		}
	}
	ca := tlstest.NewCA(t, "tsflight test CA")
	e.caPEM = ca.PEM
	var files guard.TLSFiles
	files.CertFile, files.KeyFile = ca.Issue(t, "tsflight test server", true)
	st, err := guard.NewServerTLS(files)
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := guard.ParseTokens(strings.NewReader(e.read+" read name=reader; "+guard.HashToken(e.write)+" write name=writer"), "test")
	if err != nil {
		t.Fatal(err)
	}

	logs := &testkit.Buffer{}
	auth := guard.NewAuth(guard.AuthOptions{Classify: flightserver.Scopes(), Tokens: func() *guard.TokenSet { return tokens },
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: logs, JSONFormat: true})})
	s := startSQLServer(t, sqlStart{
		mw:          []flight.ServerMiddleware{auth.Middleware()},
		serverOpts:  []grpc.ServerOption{st.ServerOption()},
		clientCreds: credentials.NewTLS(&tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}),
		trace:       true,
	})
	// Registered after the server's cleanup, so run before it.
	t.Cleanup(func() {
		for _, secret := range []string{e.read, e.write} {
			if strings.Contains(s.logs.String(), secret) || strings.Contains(logs.String(), secret) {
				t.Errorf("the server logged a secret")
			}
		}
	})
	e.sqlServer = s
	return e
}

func bearerCtx(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// wantStatus checks err's gRPC code and message fragments.
func wantStatus(t *testing.T, what string, err error, code codes.Code, frags ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if err == nil || st.Code() != code {
		t.Fatalf("%s: %v, want %v", what, err, code)
	}
	for _, f := range frags {
		if !strings.Contains(st.Message(), f) {
			t.Fatalf("%s: %q does not mention %q", what, st.Message(), f)
		}
	}
}

// adbcOpen opens an ADBC Go Flight SQL connection over TLS with opts added.
func (e *sqlAuthEnv) adbcOpen(ctx context.Context, mem memory.Allocator, opts map[string]string) (adbc.Connection, func(), error) {
	o := map[string]string{
		adbc.OptionKeyURI:                "grpc+tls://" + e.srv.Addr().String(),
		adbcflightsql.OptionSSLRootCerts: string(e.caPEM),
	}
	for k, v := range opts {
		o[k] = v
	}
	db, err := adbcflightsql.NewDriver(mem).NewDatabase(o)
	if err != nil {
		return nil, nil, err
	}
	cn, err := db.Open(ctx)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return cn, func() { cn.Close(); db.Close() }, nil
}

// adbcCount runs SELECT count(*) FROM cpu over cn.
func adbcCount(ctx context.Context, cn adbc.Connection) (int64, error) {
	var n int64 = -1
	err := adbcQueryEach(ctx, cn, "SELECT count(*) AS n FROM cpu", func(rec arrow.RecordBatch) {
		n = rec.Column(0).(*array.Int64).Value(0)
	})
	return n, err
}

// grpcOf turns an ADBC error back into the gRPC status the driver got.
func grpcOf(err error) error {
	var ae adbc.Error
	if errors.As(err, &ae) && ae.VendorCode != 0 {
		return status.Error(codes.Code(ae.VendorCode), ae.Msg)
	}
	return err
}

func TestAuthSQLADBC(t *testing.T) {
	e := startSQLAuth(t)
	ctx := ctxT(t)
	e.makeCPU(bearerCtx(ctx, e.write), 1)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)

	// User and password (the password is the token): the driver's
	// handshake gets the bearer token back and uses it.
	for _, c := range []struct {
		name string
		opts map[string]string
	}{
		{"username/password", map[string]string{adbc.OptionKeyUsername: "anyuser", adbc.OptionKeyPassword: e.read}},
		{"authorization header", map[string]string{adbcflightsql.OptionAuthorizationHeader: "Bearer " + e.read}},
	} {
		cn, closeCn, err := e.adbcOpen(ctx, mem, c.opts)
		if err != nil {
			t.Fatalf("%s: open: %v", c.name, err)
		}
		n, err := adbcCount(ctx, cn)
		closeCn()
		if err != nil || n != 7200 {
			t.Fatalf("%s: count %d, %v; want 7200", c.name, n, err)
		}
	}

	// Wrong password: refused at the handshake.
	wrong, _ := guard.NewToken()
	if _, _, err := e.adbcOpen(ctx, mem, map[string]string{adbc.OptionKeyUsername: "u", adbc.OptionKeyPassword: wrong}); status.Code(grpcOf(err)) != codes.Unauthenticated {
		t.Fatalf("wrong password: %v, want Unauthenticated", err)
	}
	// No credentials: connecting makes no call, the first one is refused.
	if cn, closeCn, err := e.adbcOpen(ctx, mem, nil); err != nil {
		wantStatus(t, "no credentials at connect", grpcOf(err), codes.Unauthenticated)
	} else {
		_, err := adbcCount(ctx, cn)
		closeCn()
		wantStatus(t, "no credentials", grpcOf(err), codes.Unauthenticated, "authentication required")
	}

	// Bulk ingest with a read token is refused and writes nothing; with
	// the write token it appends.
	ingest := func(token string) error {
		cn, closeCn, err := e.adbcOpen(ctx, mem, map[string]string{adbc.OptionKeyUsername: "u", adbc.OptionKeyPassword: token})
		if err != nil {
			return err
		}
		defer closeCn()
		return adbcIngestAt(ctx, "cpu", adbc.OptionValueIngestModeAppend, t0.Add(2*time.Hour))(cn)
	}
	before := testkit.Snapshot(t, e.root)
	wantStatus(t, "ADBC ingest with a read token", grpcOf(ingest(e.read)), codes.PermissionDenied, "bulk ingest", "token reader has read scope")
	if diff := testkit.SnapshotDiff(before, testkit.Snapshot(t, e.root)); len(diff) != 0 {
		t.Fatalf("a refused ingest changed the root: %v", diff)
	}
	if err := ingest(e.write); err != nil {
		t.Fatalf("ADBC ingest with the write token: %v", err)
	}
	cn, closeCn, err := e.adbcOpen(ctx, mem, map[string]string{adbcflightsql.OptionAuthorizationHeader: "Bearer " + e.write})
	if err != nil {
		t.Fatal(err)
	}
	n, err := adbcCount(ctx, cn)
	closeCn()
	if err != nil || n != 7220 {
		t.Fatalf("count after the ingest: %d, %v; want 7220", n, err)
	}
}

func TestAuthSQLReadScope(t *testing.T) {
	e := startSQLAuth(t)
	ctx := ctxT(t)
	w := bearerCtx(ctx, e.write)
	e.makeCPU(w, 1)

	// Without a credential nothing works, Flight SQL or plain.
	_, err := e.client.Execute(ctx, "SELECT 1")
	wantStatus(t, "query without a token", err, codes.Unauthenticated)

	// The arrow-go handshake gives the read token's context.
	r, err := e.client.Client.AuthenticateBasicToken(ctx, "anyuser", e.read)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.query(r, "SELECT count(*) FROM cpu")
	if err != nil {
		t.Fatal(err)
	}
	if got := res.recs[0].Column(0).(*array.Int64).Value(0); got != 7200 {
		t.Fatalf("count %d", got)
	}
	res.release()

	before := testkit.Snapshot(t, e.root)
	// A prepared query with parameters: binding them is a DoPut, which a
	// read token may do.
	p, err := e.client.Prepare(r, "SELECT count(*) FROM cpu WHERE host = ? AND usage >= ?")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(r)
	pb := array.NewRecordBuilder(e.cliMem, arrow.NewSchema([]arrow.Field{{Name: "h", Type: arrow.BinaryTypes.String}, {Name: "u", Type: arrow.PrimitiveTypes.Float64}}, nil))
	pb.Field(0).(*array.StringBuilder).Append("b")
	pb.Field(1).(*array.Float64Builder).Append(3000)
	params := pb.NewRecordBatch()
	pb.Release()
	p.SetParameters(params)
	params.Release()
	info, err := p.Execute(r)
	if err != nil {
		t.Fatalf("prepared query with parameters, read token: %v", err)
	}
	res, err = e.fetch(r, info)
	if err != nil {
		t.Fatal(err)
	}
	// host b's usage is its second offset + 1: >= 3000 from second 2999.
	if got := res.recs[0].Column(0).(*array.Int64).Value(0); got != 3600-2999 {
		t.Fatalf("prepared count %d, want %d", got, 3600-2999)
	}
	res.release()

	// A prepared statement is its maker's: another token neither uses nor
	// closes it (the handle is as unknown to it as a made-up one).
	_, err = p.Execute(w)
	wantStatus(t, "another token executing the reader's prepared statement", err, codes.NotFound, "unknown or expired prepared statement handle")
	stolen, err := e.client.LoadPreparedStatementFromResult(&flightsql.CreatePreparedStatementResult{PreparedStatementHandle: p.Handle()})
	if err != nil {
		t.Fatal(err)
	}
	if err := stolen.Close(w); err != nil {
		t.Fatalf("another token closing the reader's prepared statement: %v", err)
	}
	info, err = p.Execute(r)
	if err != nil {
		t.Fatalf("the reader's prepared statement after another token closed it: %v", err)
	}
	res, err = e.fetch(r, info)
	if err != nil {
		t.Fatal(err)
	}
	res.release()

	// Updates, prepared updates and bulk ingest are refused to the read
	// token before the server looks at them.
	_, err = e.client.ExecuteUpdate(r, "DELETE FROM cpu")
	wantStatus(t, "CommandStatementUpdate, read token", err, codes.PermissionDenied, "DoPut (Flight SQL CommandStatementUpdate) needs write scope", "token reader")
	_, err = p.ExecuteUpdate(r)
	wantStatus(t, "CommandPreparedStatementUpdate, read token", err, codes.PermissionDenied, "DoPut (Flight SQL CommandPreparedStatementUpdate) needs write scope", "token reader")
	rec := cpuBatch(e.cliMem, t0.Add(5*time.Hour), 10, "a")
	_, err = e.ingest(r, "cpu", "append", nil, rec)
	wantStatus(t, "CommandStatementIngest, read token", err, codes.PermissionDenied, "DoPut (Flight SQL bulk ingest) needs write scope", "token reader")
	_, err = e.ingest(r, "newt", "create", cpuOpts, rec)
	wantStatus(t, "CommandStatementIngest create, read token", err, codes.PermissionDenied, "DoPut (Flight SQL bulk ingest) needs write scope")
	if diff := testkit.SnapshotDiff(before, testkit.Snapshot(t, e.root)); len(diff) != 0 {
		t.Fatalf("refused writes changed the root: %v", diff)
	}
	// The write token gets through to the server's own answer: SQL is
	// read-only, ingest appends.
	_, err = e.client.ExecuteUpdate(w, "DELETE FROM cpu")
	wantStatus(t, "CommandStatementUpdate, write token", err, codes.InvalidArgument, "read-only")
	if n, err := e.ingest(w, "cpu", "append", nil, rec); err != nil || n != 10 {
		t.Fatalf("ingest with the write token: %d, %v", n, err)
	}
	rec.Release()
}

// sqlActionWrites is the expected scope of every action the Flight SQL
// listener lists: true when a read token is refused it.
var sqlActionWrites = map[string]bool{
	// plain Flight (vacuum: a dry run; with apply it writes)
	flightserver.ActionCreateTable:   true,
	flightserver.ActionAddColumns:    true,
	flightserver.ActionSetProperties: true,
	flightserver.ActionDescribeTable: false,
	flightserver.ActionCoverage:      false,
	flightserver.ActionGaps:          false,
	flightserver.ActionCoverageGrid:  false,
	flightserver.ActionVacuum:        false,
	flightserver.ActionCheck:         false,
	flightserver.ActionCompact:       true,
	flightserver.ActionRollback:      true, // a dry run too, as compact
	flightserver.ActionUpgrade:       true, // a dry run too, as compact
	flightserver.ActionMaintenance:   false,
	flightserver.ActionLast:          false,
	// Flight SQL: statements and sessions change no table
	flightsql.CreatePreparedStatementActionType:     false,
	flightsql.CreatePreparedSubstraitPlanActionType: false,
	flightsql.ClosePreparedStatementActionType:      false,
	flightsql.CancelQueryActionType:                 false,
	flight.CancelFlightInfoActionType:               false,
	flight.RenewFlightEndpointActionType:            false,
	flight.SetSessionOptionsActionType:              false,
	flight.GetSessionOptionsActionType:              false,
	flight.CloseSessionActionType:                   false,
	flightsql.BeginTransactionActionType:            false,
	flightsql.EndTransactionActionType:              false,
	flightsql.BeginSavepointActionType:              false,
	flightsql.EndSavepointActionType:                false,
}

func TestAuthSQLActionsClassified(t *testing.T) {
	e := startSQLAuth(t)
	ctx := ctxT(t)
	e.makeCPU(bearerCtx(ctx, e.write), 1)
	r := bearerCtx(ctx, e.read)
	listed := testkit.ActionNames(t, r, e.client.Client)
	sql := 0
	for _, typ := range listed {
		write, ok := sqlActionWrites[typ]
		if !ok {
			t.Errorf("ListActions lists %q, which the scope test does not know: decide whether it writes and add it here (and to readActions in flightserver/scope.go if it only reads)", typ)
			continue
		}
		if !flightserver.IsAction(typ) {
			sql++
		}
		// Through the real middleware with a read token: a writing
		// action is PermissionDenied whatever its body; a reading one
		// reaches its handler (which may dislike the empty body).
		body := []byte(`{"table":"cpu"}`)
		if !flightserver.IsAction(typ) {
			body = nil
		}
		s, err := e.client.Client.DoAction(r, &flight.Action{Type: typ, Body: body})
		if err == nil {
			for {
				if _, err = s.Recv(); err != nil {
					break
				}
			}
		}
		denied := status.Code(err) == codes.PermissionDenied
		if denied != write {
			t.Errorf("action %s with a read token: %v; want refused=%v", typ, err, write)
		}
		if write && !strings.Contains(status.Convert(err).Message(), "token reader has read scope") {
			t.Errorf("action %s: %v does not name the token", typ, err)
		}
	}
	if sql == 0 {
		t.Fatalf("ListActions lists no Flight SQL action: %v", listed)
	}
	t.Logf("%d actions listed and classified, %d of them Flight SQL", len(listed), sql)
}
