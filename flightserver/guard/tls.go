package guard

// TLS: the server's certificate and key, and optionally the CA bundle
// client certificates must chain to, loaded from PEM files and reloadable
// while serving (certificate rotation without a restart).

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// TLSFiles name the PEM files of a TLS listener.
type TLSFiles struct {
	// CertFile holds the server's certificate chain, leaf first.
	CertFile string
	// KeyFile holds the private key of the leaf certificate.
	KeyFile string
	// ClientCAFile, when set, holds the CA certificates client
	// certificates must chain to; clients without one are refused during
	// the TLS handshake.
	ClientCAFile string
}

// ServerTLS is a TLS configuration built from TLSFiles; Reload reads the
// files again and applies them to new connections.
type ServerTLS struct {
	files TLSFiles
	mu    sync.Mutex // serialises reloads
	cfg   atomic.Pointer[tls.Config]
}

// NewServerTLS loads files. Errors name the file at fault.
func NewServerTLS(files TLSFiles) (*ServerTLS, error) {
	if files.CertFile == "" || files.KeyFile == "" {
		return nil, errors.New("TLS needs both a certificate file and a key file")
	}
	t := &ServerTLS{files: files}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Reload reads the files again. On an error the previous configuration
// stays in force.
func (t *ServerTLS) Reload() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	cert, err := tls.LoadX509KeyPair(t.files.CertFile, t.files.KeyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate %s with key %s: %w", t.files.CertFile, t.files.KeyFile, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2"}, // gRPC clients require ALPN h2
	}
	if t.files.ClientCAFile != "" {
		pem, err := os.ReadFile(t.files.ClientCAFile)
		if err != nil {
			return fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("TLS client CA %s: no PEM certificate in it", t.files.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	t.cfg.Store(cfg)
	return nil
}

// Config returns a tls.Config that serves each new connection with the
// configuration loaded last.
func (t *ServerTLS) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return t.cfg.Load(), nil
		},
	}
}

// ServerOption returns the gRPC server option that makes a listener speak
// TLS with this configuration.
func (t *ServerTLS) ServerOption() grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(t.Config()))
}
