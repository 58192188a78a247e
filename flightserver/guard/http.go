package guard

import (
	"crypto/tls"
	"net/http"

	"github.com/tsflight/tsflight/flightserver/reqerr"
)

// The HTTP side of the guard: the operations listener (metrics, health
// probes) authenticates and serves TLS as the Flight listener does.

// CheckHTTP authenticates an HTTP request the way Middleware does a call:
// its token, or with client certificates only, a verified certificate.
// The errors are the Flight calls' (they quote no secret).
func (a *Auth) CheckHTTP(r *http.Request) error {
	if a.o.Tokens == nil {
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			return nil
		}
		return reqerr.Status(unauthenticatedf("a verified client certificate is required"))
	}
	secret, err := credentialOf(r.Header.Values(authorizationKey))
	if err != nil {
		return reqerr.Status(err)
	}
	_, err = a.check(secret)
	return reqerr.Status(err)
}

// HTTPConfig is Config for an HTTP/1.1 listener (Config offers gRPC's
// HTTP/2 only): the same certificates, reloaded the same way, and the
// same client-certificate rule.
func (t *ServerTLS) HTTPConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := t.cfg.Load().Clone()
			c.NextProtos = []string{"http/1.1"}
			return c, nil
		},
	}
}
