package guard

// Authentication: who is calling (a bearer token, Basic credentials whose
// password is a token, or a verified client certificate) and whether the
// call is within what that caller may do. One middleware does both, for
// plain Flight and Flight SQL alike; scope.go says which calls write.

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/hashicorp/go-hclog"
	"github.com/tsflight/tsflight/flightserver/reqerr"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
)

// AuthOptions configure an [Auth]. The zero value authenticates nobody and
// allows everything (a server on the loopback interface).
type AuthOptions struct {
	// Tokens returns the tokens in force; it is called on every call, so
	// a reloaded set applies at once. nil: no token authentication.
	Tokens func() *TokenSet
	// ClientCertificates says the TLS layer requires and verifies client
	// certificates. Without Tokens, a verified certificate is the
	// credential and has write scope; with Tokens, a token is required
	// as well.
	ClientCertificates bool
	// Logger receives authentication events (never a secret). nil: none.
	Logger hclog.Logger
	// Now is the clock expiry is checked against (nil: time.Now).
	Now func() time.Time
	// Classify says which calls need write scope (the Flight service's
	// flightserver.Scopes). nil: every call does, so a read token is
	// refused everything but the handshake and health checks.
	Classify Classifier
}

// Auth authenticates and authorizes calls; see [Auth.Middleware].
type Auth struct {
	o   AuthOptions
	log hclog.Logger
	now func() time.Time
	// refused, when set (OnTapRefusal), hears of every call Tap refuses:
	// no interceptor sees those calls.
	refused func(fullMethod string)
}

// OnTapRefusal makes Tap call f with the full method name of every call it
// refuses (Metrics.CountRefused counts them). Call it before serving.
func (a *Auth) OnTapRefusal(f func(fullMethod string)) { a.refused = f }

// NewAuth returns the authenticator o describes.
func NewAuth(o AuthOptions) *Auth {
	a := &Auth{o: o, log: o.Logger, now: o.Now}
	if a.o.Classify == nil {
		a.o.Classify = allWrite{}
	}
	if a.log == nil {
		a.log = hclog.NewNullLogger()
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a
}

// Enabled reports whether calls must carry a credential.
func (a *Auth) Enabled() bool { return a.o.Tokens != nil || a.o.ClientCertificates }

// Principal is the authenticated caller of a call.
type Principal struct {
	// Name is the token's name, the client certificate's subject, or
	// "anonymous" when authentication is off.
	Name string
	// Scope is what the caller may do.
	Scope Scope
	// Via is how the caller proved who it is: "token",
	// "client-certificate" or "none".
	Via string
	// ID tells callers apart even when names repeat: the token's id
	// (Token.ID) or the certificate's subject; "" without authentication.
	ID string
}

type principalKey struct{}

// tappedKey holds the caller Tap found, for the middleware.
type tappedKey struct{}

// CallerSlot receives the principal of a call from the Auth middleware, for
// a middleware that runs before it (a call log): WithCallerSlot puts one
// in the call's context, Auth fills it once the caller is known.
type CallerSlot struct {
	mu sync.Mutex
	p  Principal
	ok bool
}

type callerSlotKey struct{}

// WithCallerSlot returns ctx carrying a new, empty CallerSlot.
func WithCallerSlot(ctx context.Context) (context.Context, *CallerSlot) {
	slot := &CallerSlot{}
	return context.WithValue(ctx, callerSlotKey{}, slot), slot
}

// Principal returns the caller Auth found, if it got that far (nothing
// for a nil slot).
func (s *CallerSlot) Principal() (Principal, bool) {
	if s == nil {
		return Principal{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p, s.ok
}

func noteCaller(ctx context.Context, p Principal) {
	if slot, ok := ctx.Value(callerSlotKey{}).(*CallerSlot); ok {
		slot.mu.Lock()
		slot.p, slot.ok = p, true
		slot.mu.Unlock()
	}
}

// callerName names the caller of ctx's call for a log line: the token's
// name or the certificate's subject, "anonymous" without authentication,
// and "unknown" for a call that came through no Auth middleware.
func CallerName(ctx context.Context) string {
	if p, ok := PrincipalFromContext(ctx); ok {
		return p.Name
	}
	return "unknown"
}

// PrincipalFromContext returns the caller of the call ctx belongs to, as
// the Auth middleware established it.
func PrincipalFromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Full gRPC method names of the Flight service.
const (
	flightService     = "/arrow.flight.protocol.FlightService/"
	methodHandshake   = flightService + "Handshake"
	methodDoPut       = flightService + "DoPut"
	methodDoAction    = flightService + "DoAction"
	authorizationKey  = "authorization"
	bearerScheme      = "Bearer"
	basicScheme       = "Basic"
	credentialsNeeded = "send the header authorization: Bearer <token>, or call Handshake with Basic credentials whose password is the token"
)

// Middleware authenticates every call and refuses what the caller's scope
// does not allow:
//
//   - A call carries "authorization: Bearer <token>" (or "Basic" with the
//     token as the password; the user name is not checked). No credential,
//     an unknown or revoked token, or an expired one is Unauthenticated.
//   - Handshake with such a header answers, in a response header (not a
//     trailer: the JDBC driver reads headers only), "authorization:
//     Bearer <token>" for the client to send on every later call. With
//     authentication off (or by client certificate only), Handshake
//     succeeds and answers the authorization header the client sent, if
//     any, since some clients fail on an answer without one.
//   - A read-scope caller calling a writing method (scope.go) is
//     PermissionDenied, before the handler reads anything more.
//   - The health service (health.go) needs no credential: orchestrators
//     probe without one, and it tells nothing but whether the server is
//     up. A credential sent with it is not looked at.
//
// Messages never contain a secret; the token's name identifies it.
func (a *Auth) Middleware() flight.ServerMiddleware {
	return flight.ServerMiddleware{
		Unary: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if IsHealthMethod(info.FullMethod) {
				return h(ctx, req)
			}
			p, err := a.authenticate(ctx)
			if err != nil {
				return nil, reqerr.Status(err)
			}
			noteCaller(ctx, p)
			if what, write := a.o.Classify.Method(info.FullMethod); write && p.Scope < ScopeWrite {
				return nil, reqerr.Status(denied(p, what))
			}
			return h(context.WithValue(ctx, principalKey{}, p), req)
		},
		Stream: func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx := ss.Context()
			if IsHealthMethod(info.FullMethod) { // Watch
				return h(srv, ss)
			}
			if info.FullMethod == methodHandshake {
				return a.handshake(ss)
			}
			p, err := a.authenticate(ctx)
			if err != nil {
				return reqerr.Status(err)
			}
			noteCaller(ctx, p)
			stream := &principalStream{ServerStream: ss, ctx: context.WithValue(ctx, principalKey{}, p)}
			if p.Scope >= ScopeWrite {
				return h(srv, stream)
			}
			switch info.FullMethod {
			case methodDoPut, methodDoAction:
				// What the call does is in its first message: read it
				// here, judge it, and replay it to the handler.
				first, what, write, err := peekFirst(ss, info.FullMethod, a.o.Classify)
				if err != nil {
					return err
				}
				if write {
					return reqerr.Status(denied(p, what))
				}
				stream.first = first
			default:
				if what, write := a.o.Classify.Method(info.FullMethod); write {
					return reqerr.Status(denied(p, what))
				}
			}
			return h(srv, stream)
		},
	}
}

// Tap checks a call's token from its headers before gRPC reads its
// request message (install it with grpc.InTapHandle, as
// Gate.ServerOptions(auth.Tap) does): without it, a unary call's whole
// request (up to the message size limit) is held before any middleware
// runs, so clients without any credential could make the server hold
// gigabytes (fifth review). It answers as the middleware does; the
// middleware still runs (and judges scopes) for the calls it lets in.
// With client certificates only, TLS has refused them already. Calls of
// the health service pass: they need no credential.
func (a *Auth) Tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if a.o.Tokens == nil || IsHealthMethod(info.FullMethodName) {
		return ctx, nil
	}
	secret, err := credentialOf(info.Header.Get(authorizationKey))
	var p Principal
	if err == nil {
		p, err = a.check(secret)
	}
	if err != nil {
		// No later middleware sees the call: log it here, as the call log
		// does refused calls.
		a.log.Debug(MethodName(info.FullMethodName)+" refused", "code", codes.Unauthenticated.String(),
			"peer", peerAddr(ctx), "error", status.Convert(err).Message())
		if a.refused != nil {
			a.refused(info.FullMethodName)
		}
		return ctx, reqerr.Status(err)
	}
	// The middleware takes the caller from here instead of looking the
	// token up a second time.
	return context.WithValue(ctx, tappedKey{}, p), nil
}

// authenticate finds the caller of the call ctx belongs to.
func (a *Auth) authenticate(ctx context.Context) (Principal, error) {
	if !a.Enabled() {
		return Principal{Name: "anonymous", Scope: ScopeWrite, Via: "none"}, nil
	}
	if a.o.Tokens == nil { // client certificates only: TLS verified them
		return a.certPrincipal(ctx)
	}
	if p, ok := ctx.Value(tappedKey{}).(Principal); ok {
		return p, nil
	}
	secret, err := credential(ctx)
	if err != nil {
		return Principal{}, err
	}
	return a.check(secret)
}

// check looks secret up among the tokens in force.
func (a *Auth) check(secret string) (Principal, error) {
	tok, ok := a.o.Tokens().Lookup(secret)
	if !ok {
		return Principal{}, unauthenticatedf("unknown token: it is not in the server's tokens, or was revoked")
	}
	if now := a.now(); tok.Expired(now) {
		return Principal{}, unauthenticatedf("token %s expired at %s", tok.Name, tok.Expires.UTC().Format(time.RFC3339))
	}
	return Principal{Name: tok.Name, Scope: tok.Scope, Via: "token", ID: tok.ID}, nil
}

// certPrincipal names the caller by its verified client certificate.
func (a *Auth) certPrincipal(ctx context.Context) (Principal, error) {
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(info.State.VerifiedChains) > 0 && len(info.State.VerifiedChains[0]) > 0 {
			subject := info.State.VerifiedChains[0][0].Subject.String()
			return Principal{Name: subject, Scope: ScopeWrite, Via: "client-certificate", ID: subject}, nil
		}
	}
	return Principal{}, unauthenticatedf("a verified client certificate is required")
}

// credential returns the token a call carries in its authorization header.
func credential(ctx context.Context) (string, error) {
	// ValueFromIncomingContext reads the one key without copying all the
	// metadata (FromIncomingContext was 40 % of the middleware's time).
	return credentialOf(metadata.ValueFromIncomingContext(ctx, authorizationKey))
}

// credentialOf reads the token from a call's authorization header values.
func credentialOf(vals []string) (string, error) {
	if len(vals) == 0 || strings.TrimSpace(vals[0]) == "" {
		return "", unauthenticatedf("authentication required: %s", credentialsNeeded)
	}
	if len(vals) > 1 {
		return "", unauthenticatedf("more than one authorization header: send one")
	}
	v := strings.TrimSpace(vals[0])
	scheme, rest, _ := strings.Cut(v, " ")
	rest = strings.TrimSpace(rest)
	switch {
	case strings.EqualFold(scheme, bearerScheme):
		if rest == "" {
			return "", unauthenticatedf("the Bearer authorization header carries no token")
		}
		return rest, nil
	case strings.EqualFold(scheme, basicScheme):
		if rest == "" {
			return "", unauthenticatedf("the Basic authorization header carries no credentials")
		}
		return basicPassword(rest)
	}
	// Quote the scheme only when it is one: a header holding a bare token
	// must not have any of it echoed (refused calls are logged).
	if rest != "" && len(scheme) < MinTokenLength && strings.IndexFunc(scheme, notSchemeRune) < 0 {
		return "", unauthenticatedf("authorization scheme %q is not supported: %s", scheme, credentialsNeeded)
	}
	return "", unauthenticatedf("the authorization header names no scheme: %s", credentialsNeeded)
}

// notSchemeRune reports whether r cannot be part of an HTTP authentication
// scheme name as clients send them (letters, digits, '-').
func notSchemeRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-')
}

// basicPassword decodes Basic credentials (padded or not: pyarrow and JDBC
// pad, ADBC does not) and returns the password, which is the token.
func basicPassword(enc string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(enc)
	}
	if err != nil {
		return "", unauthenticatedf("the Basic authorization header is not base64 of user:password")
	}
	_, password, ok := strings.Cut(string(raw), ":")
	if !ok {
		return "", unauthenticatedf("the Basic authorization header is not base64 of user:password")
	}
	if password == "" {
		return "", unauthenticatedf("the Basic credentials carry no password: the password is the token (any user name)")
	}
	return password, nil
}

// handshake answers the Flight Handshake: it checks the credential and
// sends the bearer token back in a response header.
func (a *Auth) handshake(ss grpc.ServerStream) error {
	ctx := ss.Context()
	if !a.Enabled() {
		return echoAuthorization(ss) // nothing to prove
	}
	if a.o.Tokens == nil {
		p, err := a.certPrincipal(ctx)
		if err != nil {
			return reqerr.Status(err)
		}
		noteCaller(ctx, p)
		a.log.Debug("handshake", "principal", p.Name, "via", p.Via)
		return echoAuthorization(ss)
	}
	secret, err := credential(ctx)
	if err != nil {
		return reqerr.Status(err)
	}
	p, err := a.check(secret)
	if err != nil {
		a.log.Debug("handshake refused", "reason", err.Error(), "peer", peerAddr(ctx))
		return reqerr.Status(err)
	}
	noteCaller(ctx, p)
	a.log.Debug("handshake", "principal", p.Name, "scope", p.Scope.String(), "peer", peerAddr(ctx))
	return ss.SendHeader(metadata.Pairs(authorizationKey, bearerScheme+" "+secret))
}

// echoAuthorization answers a Handshake that proves nothing (no tokens in
// force) with the authorization header the client sent, if it sent one:
// arrow-go's AuthenticateBasicToken, and so the ADBC driver given a user
// name and password, fail when the answer carries no authorization header.
// The client then sends its own header on every call, which is ignored.
func echoAuthorization(ss grpc.ServerStream) error {
	md, _ := metadata.FromIncomingContext(ss.Context())
	vals := md.Get(authorizationKey)
	if len(vals) != 1 || strings.TrimSpace(vals[0]) == "" {
		return nil
	}
	return ss.SendHeader(metadata.Pairs(authorizationKey, vals[0]))
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}

// denied is the error of a call beyond the caller's scope.
func denied(p Principal, what string) error {
	return reqerr.Errorf(reqerr.ErrPermissionDenied, "%s needs write scope; token %s has %s scope", what, p.Name, p.Scope)
}

// peekFirst receives the first message of a DoPut or DoAction and
// classifies it.
func peekFirst(ss grpc.ServerStream, method string, classify Classifier) (first proto.Message, what string, write bool, err error) {
	if method == methodDoPut {
		fd := new(flight.FlightData)
		if err := ss.RecvMsg(fd); err != nil {
			return nil, "", false, err
		}
		what, write := classify.Put(fd.GetFlightDescriptor())
		return fd, what, write, nil
	}
	act := new(flight.Action)
	if err := ss.RecvMsg(act); err != nil {
		return nil, "", false, err
	}
	what, write = classify.Action(act)
	return act, what, write, nil
}

// principalStream carries the principal in its context and replays a
// message the middleware already received.
type principalStream struct {
	grpc.ServerStream
	ctx   context.Context
	first proto.Message
}

func (s *principalStream) Context() context.Context { return s.ctx }

func (s *principalStream) RecvMsg(m any) error {
	if f := s.first; f != nil {
		s.first = nil
		dst, ok := m.(proto.Message)
		if !ok {
			return reqerr.Status(reqerr.Errorf(reqerr.ErrInternal, "auth: cannot replay the first message into %T", m))
		}
		proto.Reset(dst)
		proto.Merge(dst, f)
		return nil
	}
	return s.ServerStream.RecvMsg(m)
}

// unauthenticatedf is an error of category reqerr.ErrUnauthenticated: the
// call carries no credential the server accepts. The guard's edges (the
// middleware, Tap, the Handshake, CheckHTTP) turn it into its status.
func unauthenticatedf(format string, args ...any) error {
	return reqerr.Errorf(reqerr.ErrUnauthenticated, format, args...)
}
