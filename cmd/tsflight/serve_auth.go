// serve's security: tokens, TLS, the refusal to listen beyond the
// loopback interface without authentication, and reloading credentials on
// SIGHUP or when their files change.

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/tsflight/tsflight/flightserver"
	"github.com/tsflight/tsflight/flightserver/guard"
)

// defaultReloadInterval is how often serve looks for changed tokens and
// TLS files.
const defaultReloadInterval = 2 * time.Second

// securityFlags are serve's authentication and TLS flags.
type securityFlags struct {
	authTokens     string
	tlsCert        string
	tlsKey         string
	tlsClientCA    string
	insecure       bool
	reloadInterval time.Duration
}

func (s *securityFlags) register(fs *flagSet) {
	fs.StringVar(&s.authTokens, "auth-tokens", "", "tokens `file`: one token per line with its scope, read or write (tsflight token new writes it; docs/security.md)")
	fs.StringVar(&s.tlsCert, "tls-cert", "", "PEM `file` of the server's TLS certificate chain (with --tls-key: serve TLS)")
	fs.StringVar(&s.tlsKey, "tls-key", "", "PEM `file` of the TLS certificate's private key")
	fs.StringVar(&s.tlsClientCA, "tls-client-ca", "", "PEM `file` of the CA client certificates must chain to (mutual TLS: clients without one are refused)")
	fs.BoolVar(&s.insecure, "insecure", false, "allow listening on an address other than loopback without authentication")
	fs.DurationVar(&s.reloadInterval, "reload-interval", defaultReloadInterval, "how often to look for changes to the tokens and TLS files (`duration`, 0 = only on SIGHUP)")
	fs.fromEnv("auth-tokens", "TSFLIGHT_AUTH_TOKENS_FILE")
	fs.fromEnv("tls-cert", "TSFLIGHT_TLS_CERT")
	fs.fromEnv("tls-key", "TSFLIGHT_TLS_KEY")
	fs.fromEnv("tls-client-ca", "TSFLIGHT_TLS_CLIENT_CA")
}

// check validates the flags against each other and the listen address.
// inline is TSFLIGHT_AUTH_TOKENS (tokens in the environment).
func (s *securityFlags) check(listen, inline string) error {
	switch {
	case (s.tlsCert == "") != (s.tlsKey == ""):
		return usagef("--tls-cert and --tls-key go together")
	case s.tlsClientCA != "" && s.tlsCert == "":
		return usagef("--tls-client-ca needs TLS: give --tls-cert and --tls-key too")
	case s.authTokens != "" && inline != "":
		return usagef("tokens come from --auth-tokens (TSFLIGHT_AUTH_TOKENS_FILE) or TSFLIGHT_AUTH_TOKENS, not both")
	case s.reloadInterval < 0:
		return usagef("--reload-interval must not be negative")
	}
	authenticated := s.authTokens != "" || inline != "" || s.tlsClientCA != ""
	// An address that does not parse is left to net.Listen to refuse.
	if _, _, err := net.SplitHostPort(listen); err == nil && !authenticated && !s.insecure && !loopbackOnly(listen) {
		return usagef("--listen %s is reachable from other machines and no authentication is configured: "+
			"give --auth-tokens FILE (tsflight token new makes one) with --tls-cert and --tls-key, "+
			"or --insecure to serve anyone who can connect", listen)
	}
	return nil
}

// loopbackOnly reports whether a listen address accepts connections from
// this machine only: a loopback IP, or a name all of whose addresses are
// loopback ("localhost"). An empty host listens everywhere.
func loopbackOnly(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil || host == "" {
		return false
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		return ip.IsLoopback()
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return false
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false
		}
	}
	return true
}

// checkBound is the listen guard again, on the address the socket was
// bound to: the flag check resolved the name, which may resolve
// differently the second time.
func checkBound(listen string, bound net.Addr, authenticated, insecure bool) error {
	tcp, ok := bound.(*net.TCPAddr)
	if !ok || tcp.IP.IsLoopback() || authenticated || insecure {
		return nil
	}
	return fmt.Errorf("--listen %s bound %s, which is not a loopback address, and no authentication is configured: give --auth-tokens, or --insecure", listen, tcp.IP)
}

// security is serve's running authentication and TLS.
type security struct {
	flags  *securityFlags
	log    hclog.Logger
	tokens *guard.TokenFile // nil: no tokens file
	inline *guard.TokenSet  // tokens from the environment
	tls    *guard.ServerTLS // nil: plaintext
	auth   *guard.Auth
	stamps map[string]fileStamp // TLS files as last loaded
	// lastTokensErr is the last reload error logged, so that a broken file
	// is reported once, not at every poll.
	lastTokensErr string
}

// newSecurity loads the tokens and TLS files the flags name.
func newSecurity(f *securityFlags, inline string, log hclog.Logger) (*security, error) {
	s := &security{flags: f, log: log, stamps: map[string]fileStamp{}}
	opts := guard.AuthOptions{Classify: flightserver.Scopes(), Logger: log, ClientCertificates: f.tlsClientCA != ""}
	switch {
	case f.authTokens != "":
		tf, err := guard.OpenTokenFile(f.authTokens)
		if err != nil {
			return nil, err
		}
		s.tokens = tf
		opts.Tokens = tf.Tokens
	case inline != "":
		set, err := guard.ParseTokens(strings.NewReader(inline), "TSFLIGHT_AUTH_TOKENS")
		if err != nil {
			return nil, err
		}
		if set.Len() == 0 {
			return nil, fmt.Errorf("TSFLIGHT_AUTH_TOKENS holds no tokens: every client would be refused")
		}
		s.inline = set
		opts.Tokens = func() *guard.TokenSet { return set }
	}
	if f.tlsCert != "" {
		t, err := guard.NewServerTLS(guard.TLSFiles{CertFile: f.tlsCert, KeyFile: f.tlsKey, ClientCAFile: f.tlsClientCA})
		if err != nil {
			return nil, err
		}
		s.tls = t
		s.stamps = s.tlsStamps()
	}
	s.auth = guard.NewAuth(opts)
	return s, nil
}

// serverOptions are the gRPC options of TLS (none for plaintext).
func (s *security) serverOptions() []grpc.ServerOption {
	if s.tls == nil {
		return nil
	}
	return []grpc.ServerOption{s.tls.ServerOption()}
}

// describe is the start-up log's account of the security settings.
func (s *security) describe() []any {
	transport := "plaintext"
	if s.tls != nil {
		transport = "tls"
		if s.flags.tlsClientCA != "" {
			transport = "mutual tls"
		}
	}
	auth := "off"
	switch {
	case s.tokens != nil:
		auth = fmt.Sprintf("%d token(s) from %s", s.tokens.Tokens().Len(), s.tokens.Path())
	case s.inline != nil:
		auth = fmt.Sprintf("%d token(s) from TSFLIGHT_AUTH_TOKENS", s.inline.Len())
	case s.flags.tlsClientCA != "":
		auth = "client certificates"
	}
	return []any{"transport", transport, "auth", auth}
}

// warnings logs what is allowed but unwise.
func (s *security) warnings(listen string) {
	if s.tls == nil && (s.tokens != nil || s.inline != nil) && !loopbackOnly(listen) {
		s.log.Warn("tokens travel in clear text: anyone on the network path can read them; give --tls-cert and --tls-key")
	}
	if !s.auth.Enabled() && !loopbackOnly(listen) {
		s.log.Warn("--insecure: no authentication; anyone who can connect can read and write every table", "listen", listen)
	}
}

// reload reads the tokens file and the TLS files again when they changed
// (or always, when forced: SIGHUP). A failed reload keeps what was loaded
// and logs an error.
func (s *security) reload(why string, force bool) {
	if s.tokens != nil {
		changed, err := s.tokens.Reload()
		switch {
		case err != nil:
			// Said once per distinct error, not at every poll; SIGHUP
			// says it again.
			if msg := err.Error(); msg != s.lastTokensErr || why == "SIGHUP" {
				s.log.Error("tokens file not reloaded; the previous tokens stay in force", "reason", why, "error", err)
				s.lastTokensErr = msg
			}
		case changed && s.tokens.Tokens().Len() == 0:
			s.log.Warn("tokens file reloaded: it holds no tokens (or is gone), so every call is refused", "reason", why, "path", s.tokens.Path())
		case changed:
			s.log.Info("tokens file reloaded", "reason", why, "path", s.tokens.Path(), "tokens", s.tokens.Tokens().Len())
		}
		if err == nil {
			s.lastTokensErr = ""
		}
	}
	if s.tls != nil {
		stamps := s.tlsStamps()
		if !force && sameStamps(stamps, s.stamps) {
			return
		}
		if err := s.tls.Reload(); err != nil {
			s.log.Error("TLS files not reloaded; the previous certificate stays in force", "reason", why, "error", err)
			return
		}
		s.stamps = stamps
		s.log.Info("TLS files reloaded", "reason", why, "cert", s.flags.tlsCert)
	}
}

// notifyHUP starts catching SIGHUP (whose default action would end the
// process) for watch; call it before the server says it is listening.
func notifyHUP() (<-chan os.Signal, func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return hup, func() { signal.Stop(hup) }
}

// watch reloads on SIGHUP (from hup) and every reload interval until ctx
// ends.
func (s *security) watch(ctx context.Context, hup <-chan os.Signal) {
	var tick <-chan time.Time
	if s.flags.reloadInterval > 0 && (s.tokens != nil || s.tls != nil) {
		t := time.NewTicker(s.flags.reloadInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			if s.tokens == nil && s.tls == nil {
				s.log.Info("SIGHUP: nothing to reload (no --auth-tokens, no TLS)")
				continue
			}
			s.reload("SIGHUP", true)
		case <-tick:
			s.reload("file changed", false)
		}
	}
}

// fileStamp identifies a version of a file cheaply.
type fileStamp struct {
	size  int64
	mtime time.Time
	err   bool
}

func (s *security) tlsStamps() map[string]fileStamp {
	m := map[string]fileStamp{}
	for _, p := range []string{s.flags.tlsCert, s.flags.tlsKey, s.flags.tlsClientCA} {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			m[p] = fileStamp{err: true}
			continue
		}
		m[p] = fileStamp{size: fi.Size(), mtime: fi.ModTime()}
	}
	return m
}

func sameStamps(a, b map[string]fileStamp) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !v.mtime.Equal(w.mtime) || v.size != w.size || v.err != w.err {
			return false
		}
	}
	return true
}
