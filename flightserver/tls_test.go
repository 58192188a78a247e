// Tests of ServerTLS through real listeners: a throwaway CA, server and
// client certificates made here, certificate rotation by Reload, a broken
// file keeping the previous certificate, and mutual TLS refusing clients
// without a certificate from the CA.

package flightserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/flightserver/tlstest"
	"github.com/tsflight/tsflight/internal/testkit"
)

// testPKI is a throwaway certificate authority (package tlstest) with a
// server certificate (SAN 127.0.0.1 and localhost) and a client
// certificate, as PEM files in a temporary directory.
type testPKI struct {
	ca                       *tlstest.CA
	caFile                   string
	certFile, keyFile        string // the server's
	clientCert               tls.Certificate
	pool                     *x509.CertPool
	clientCertFile, clientKF string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	ca := tlstest.NewCA(t, "tsflight test CA")
	p := &testPKI{ca: ca, caFile: ca.File, pool: ca.Pool}
	p.certFile, p.keyFile = ca.Issue(t, "tsflight test server", true)
	p.clientCertFile, p.clientKF = ca.Issue(t, "tsflight test client", false)
	var err error
	if p.clientCert, err = tls.LoadX509KeyPair(p.clientCertFile, p.clientKF); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue signs a certificate for cn (a server one with the loopback SANs,
// or a client one) and writes it and its key to certFile and keyFile.
func (p *testPKI) issue(t *testing.T, cn string, server bool, certFile, keyFile string) {
	t.Helper()
	p.ca.IssueTo(t, cn, server, certFile, keyFile)
}

// tlsClient is an arrow-go Flight client trusting the test CA and
// presenting certs (none: no client certificate). The server name is
// the address's IP, so the IP SAN is what is verified.
func tlsClient(t *testing.T, addr string, pool *x509.CertPool, certs ...tls.Certificate) flight.Client {
	t.Helper()
	c, err := flight.NewClientWithMiddleware(addr, nil, nil,
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12})),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// useTLSClient replaces the test server's plaintext client with one over
// TLS, so that every testServer helper speaks TLS.
func (ts *testServer) useTLSClient(pki *testPKI, certs ...tls.Certificate) {
	ts.t.Helper()
	ts.client.Close()
	ts.client = tlsClient(ts.t, ts.srv.Addr().String(), pki.pool, certs...)
}

// servedCert is the common name of the certificate addr serves to a new
// connection.
func servedCert(t *testing.T, addr string, pki *testPKI) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pki.pool, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatalf("TLS dial: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func actionTypesOf(ctx context.Context, c flight.Client) ([]string, error) {
	stream, err := c.ListActions(ctx, &flight.Empty{})
	if err != nil {
		return nil, err
	}
	types, err := testkit.Collect(stream.Recv)
	var out []string
	for _, a := range types {
		out = append(out, a.Type)
	}
	return out, err
}

func TestTLSServesAndReloads(t *testing.T) {
	pki := newTestPKI(t)
	st, err := guard.NewServerTLS(guard.TLSFiles{CertFile: pki.certFile, KeyFile: pki.keyFile})
	if err != nil {
		t.Fatal(err)
	}
	ts := startGatedServer(t, nil, nil, st.ServerOption())
	ts.useTLSClient(pki)
	ctx := ctxT(t)
	addr := ts.srv.Addr().String()
	if got := servedCert(t, addr, pki); got != "tsflight test server" {
		t.Fatalf("served %q", got)
	}
	ts.createTSBS(ctx, "cpu")
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 2), 40, 2)

	// A plaintext client gets nowhere.
	if _, err := startPlainCall(ctx, addr); status.Code(err) != codes.Unavailable {
		t.Fatalf("plaintext client against TLS: %v, want Unavailable", err)
	}

	// Rotation: a new certificate in the same files, Reload, and new
	// connections are served with it; the old connection goes on.
	pki.issue(t, "tsflight rotated server", true, pki.certFile, pki.keyFile)
	if got := servedCert(t, addr, pki); got != "tsflight test server" {
		t.Fatalf("before Reload, served %q", got)
	}
	if err := st.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := servedCert(t, addr, pki); got != "tsflight rotated server" {
		t.Fatalf("after Reload, served %q", got)
	}
	ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	fresh := tlsClient(t, addr, pki.pool)
	defer fresh.Close()
	if got, err := actionTypesOf(ctx, fresh); err != nil || len(got) != len(actionTypes) {
		t.Fatalf("new client after rotation: %v %v", got, err)
	}

	// A broken certificate file: Reload fails naming it, the rotated
	// certificate stays.
	if err := os.WriteFile(pki.certFile, []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = st.Reload()
	if err == nil || !strings.Contains(err.Error(), pki.certFile) {
		t.Fatalf("Reload of a broken certificate: %v, want an error naming %s", err, pki.certFile)
	}
	if got := servedCert(t, addr, pki); got != "tsflight rotated server" {
		t.Fatalf("after a failed Reload, served %q", got)
	}
	// A key that does not match the certificate is refused too.
	pki.issue(t, "tsflight third server", true, pki.certFile, filepath.Join(t.TempDir(), "third.key"))
	if err := st.Reload(); err == nil {
		t.Fatal("Reload with a key of another certificate succeeded")
	}
	if got := servedCert(t, addr, pki); got != "tsflight rotated server" {
		t.Fatalf("after a mismatched key, served %q", got)
	}
}

// startPlainCall makes one call over plaintext to addr.
func startPlainCall(ctx context.Context, addr string) ([]string, error) {
	c, err := flight.NewClientWithMiddleware(addr, nil, nil, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return actionTypesOf(ctx, c)
}

func TestTLSFilesRefused(t *testing.T) {
	pki := newTestPKI(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("no certificates here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		files guard.TLSFiles
		frag  string
	}{
		{"no key", guard.TLSFiles{CertFile: pki.certFile}, "both a certificate file and a key file"},
		{"no certificate", guard.TLSFiles{KeyFile: pki.keyFile}, "both a certificate file and a key file"},
		{"missing certificate", guard.TLSFiles{CertFile: missing, KeyFile: pki.keyFile}, missing},
		{"key of another certificate", guard.TLSFiles{CertFile: pki.certFile, KeyFile: pki.clientKF}, pki.certFile},
		{"missing client CA", guard.TLSFiles{CertFile: pki.certFile, KeyFile: pki.keyFile, ClientCAFile: missing}, "client CA"},
		{"client CA without certificates", guard.TLSFiles{CertFile: pki.certFile, KeyFile: pki.keyFile, ClientCAFile: garbage}, garbage},
	} {
		st, err := guard.NewServerTLS(c.files)
		if err == nil || st != nil || !strings.Contains(err.Error(), c.frag) {
			t.Errorf("%s: %v, %v; want an error naming %q", c.name, st, err, c.frag)
		}
	}
}

func TestTLSMutualRequiresClientCertificate(t *testing.T) {
	pki := newTestPKI(t)
	st, err := guard.NewServerTLS(guard.TLSFiles{CertFile: pki.certFile, KeyFile: pki.keyFile, ClientCAFile: pki.caFile})
	if err != nil {
		t.Fatal(err)
	}
	ts := startGatedServer(t, nil, nil, st.ServerOption())
	ts.useTLSClient(pki, pki.clientCert)
	ctx := ctxT(t)
	addr := ts.srv.Addr().String()

	// With the client certificate: everything works.
	ts.createTSBS(ctx, "cpu")
	ts.mustPut(ctx, pathDesc("cpu"), genRows(t0, 10, 2), 40, 2)

	// Without one: the TLS handshake fails, so no call gets through.
	bare := tlsClient(t, addr, pki.pool)
	defer bare.Close()
	short, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if got, err := actionTypesOf(short, bare); err == nil || status.Code(err) != codes.Unavailable {
		t.Fatalf("client without a certificate: %v, %v; want Unavailable", got, err)
	}
	// With a certificate from another CA: refused as well.
	stranger := newTestPKI(t)
	foreign := tlsClient(t, addr, pki.pool, stranger.clientCert)
	defer foreign.Close()
	if got, err := actionTypesOf(short, foreign); err == nil || status.Code(err) != codes.Unavailable {
		t.Fatalf("client with a foreign certificate: %v, %v; want Unavailable", got, err)
	}
}
