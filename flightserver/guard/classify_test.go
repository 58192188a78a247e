package guard

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// An Auth given no Classifier treats every call as writing: a read token
// is refused even a read, and a write token passes.
func TestAuthWithoutClassifierTreatsCallsAsWrites(t *testing.T) {
	const reader, writer = "reader-secret-0123456789", "writer-secret-0123456789"
	set, err := ParseTokens(strings.NewReader(reader+" read name=r\n"+writer+" write name=w\n"), "test tokens")
	if err != nil {
		t.Fatal(err)
	}
	a := NewAuth(AuthOptions{Tokens: func() *TokenSet { return set }})
	unary := a.Middleware().Unary
	info := &grpc.UnaryServerInfo{FullMethod: "/arrow.flight.protocol.FlightService/GetFlightInfo"}
	call := func(secret string) error {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+secret))
		_, err := unary(ctx, nil, info, func(context.Context, any) (any, error) { return "ran", nil })
		return err
	}
	if err := call(reader); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "GetFlightInfo needs write scope") {
		t.Errorf("read token without a classifier: %v, want PermissionDenied", err)
	}
	if err := call(writer); err != nil {
		t.Errorf("write token: %v", err)
	}
	// Health checks need no credential, classifier or not.
	_, err = unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"},
		func(context.Context, any) (any, error) { return "ran", nil })
	if err != nil {
		t.Errorf("health check: %v", err)
	}
}
