package guard

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
)

// Classifier says what a call is and whether it needs write scope: the
// service's knowledge of its own calls, which Auth judges read tokens by.
// A call added to a service and not classified must come out as writing.
type Classifier interface {
	// Method judges a call by its full method name alone (DoPut and
	// DoAction are judged by their first message instead).
	Method(fullMethod string) (what string, write bool)
	// Put judges a DoPut by the descriptor of its first message.
	Put(d *flight.FlightDescriptor) (what string, write bool)
	// Action judges a DoAction.
	Action(a *flight.Action) (what string, write bool)
}

// allWrite is the classifier of an Auth given none: every call writes,
// so read tokens can do nothing until the service says what reads.
type allWrite struct{}

func (allWrite) Method(m string) (string, bool)              { return MethodName(m), true }
func (allWrite) Put(*flight.FlightDescriptor) (string, bool) { return "DoPut", true }
func (allWrite) Action(a *flight.Action) (string, bool)      { return "action " + a.GetType(), true }

// MethodName is a full gRPC method name's last part: DoGet for
// /arrow.flight.protocol.FlightService/DoGet.
func MethodName(method string) string {
	return method[strings.LastIndexByte(method, '/')+1:]
}

// healthMethods starts the full method name of every health call.
const healthMethods = "/grpc.health.v1.Health/"

// IsHealthMethod reports whether method (a full gRPC method name) belongs
// to the health service, which needs no credential.
func IsHealthMethod(method string) bool { return strings.HasPrefix(method, healthMethods) }
