package guard

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestGateHold: a hold counts as a call against MaxCalls, is refused at
// the limit with the error a call gets, and its release is idempotent.
func TestGateHold(t *testing.T) {
	g, err := NewGate(&Limits{MaxCalls: 2})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := g.Hold()
	if err != nil {
		t.Fatal(err)
	}
	r2, err := g.Hold()
	if err != nil {
		t.Fatal(err)
	}
	if n := g.InFlight(); n != 2 {
		t.Fatalf("InFlight = %d, want 2", n)
	}
	_, err = g.Hold()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-calls") {
		t.Fatalf("a third hold: %v, want ResourceExhausted naming --max-calls", err)
	}
	if err.Error() != g.enter().Error() {
		t.Fatalf("the hold's refusal %q is not a call's", err)
	}
	if g.Refused() != 2 {
		t.Fatalf("Refused = %d, want 2", g.Refused())
	}
	r1()
	r1()
	if n := g.InFlight(); n != 1 {
		t.Fatalf("InFlight after releasing one hold twice = %d, want 1", n)
	}
	r2()
	if n := g.InFlight(); n != 0 {
		t.Fatalf("InFlight = %d, want 0", n)
	}
}
