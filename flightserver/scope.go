package flightserver

// Scopes of calls: which Flight and Flight SQL calls change tables and so
// need ScopeWrite. Every method and action a service has that is not
// listed as reading is writing, so a call added later is refused to read
// tokens until it is classified here. (An action no service has reads:
// its handler refuses it, naming the actions there are.)

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tsflight/tsflight/flightserver/guard"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// Scopes is the Flight service's classifier of calls for Auth:
// which methods, DoPut descriptors and actions need write scope.
func Scopes() guard.Classifier { return scopes{} }

type scopes struct{}

func (scopes) Method(fullMethod string) (string, bool)       { return classifyMethod(fullMethod) }
func (scopes) Put(d *flight.FlightDescriptor) (string, bool) { return classifyPut(d) }
func (scopes) Action(a *flight.Action) (string, bool)        { return classifyAction(a) }

// flightService starts the full name of every Flight method.
const flightService = "/" + FlightServiceName + "/"

// readMethods are the Flight methods that never write, whatever they carry.
var readMethods = map[string]bool{
	flightService + "Handshake":      true,
	flightService + "ListFlights":    true,
	flightService + "GetFlightInfo":  true,
	flightService + "PollFlightInfo": true,
	flightService + "GetSchema":      true,
	flightService + "DoGet":          true,
	flightService + "ListActions":    true,
}

// readActions are the action types that never write (last reads the
// last-value index and never persists it). vacuum reads unless
// its body asks to apply, check unless it asks to repair. Every other
// action writes: create-table, add-columns, set-properties (a commit),
// compact, upgrade (both even as a dry run).
var readActions = map[string]bool{
	"describe-table": true,
	"coverage":       true,
	"gaps":           true,
	"coverage-grid":  true,
	"last":           true,
	// Flight SQL: preparing, closing and cancelling statements and session
	// options change no table. Executing a prepared update is a DoPut,
	// which is classified on its own; transactions are not served.
	"CreatePreparedStatement":     true,
	"CreatePreparedSubstraitPlan": true,
	"ClosePreparedStatement":      true,
	"CancelQuery":                 true,
	"CancelFlightInfo":            true,
	"RenewFlightEndpoint":         true,
	"SetSessionOptions":           true,
	"GetSessionOptions":           true,
	"CloseSession":                true,
	"BeginTransaction":            true,
	"EndTransaction":              true,
	"BeginSavepoint":              true,
	"EndSavepoint":                true,
}

// classifyMethod says whether a method needs write scope whatever its
// messages (DoPut and DoAction are judged by their first message instead).
func classifyMethod(method string) (what string, write bool) {
	return guard.MethodName(method), !readMethods[method]
}

// sqlCommandPrefix starts the type URL of every Flight SQL command.
const sqlCommandPrefix = "type.googleapis.com/arrow.flight.protocol.sql."

// classifyPut judges a DoPut by the descriptor of its first message. Only
// binding parameters to a prepared query reads; appends, bulk ingest and
// updates write.
func classifyPut(d *flight.FlightDescriptor) (what string, write bool) {
	switch {
	case d == nil:
		return "DoPut", true
	case d.Type == flight.DescriptorPATH:
		return "DoPut (append to " + strings.Join(d.Path, "/") + ")", true
	case d.Type == flight.DescriptorCMD:
		var a anypb.Any
		if err := proto.Unmarshal(d.Cmd, &a); err == nil && strings.HasPrefix(a.GetTypeUrl(), sqlCommandPrefix) {
			cmd := strings.TrimPrefix(a.GetTypeUrl(), sqlCommandPrefix)
			switch cmd {
			case "CommandPreparedStatementQuery":
				return "DoPut (binding query parameters)", false
			case "CommandStatementIngest":
				return "DoPut (Flight SQL bulk ingest)", true
			}
			return "DoPut (Flight SQL " + cmd + ")", true
		}
		return "DoPut (append)", true
	}
	return "DoPut", true
}

// classifyAction judges a DoAction by its type (and vacuum and check by
// their body). An action no service knows reads: it is refused anyway.
func classifyAction(a *flight.Action) (what string, write bool) {
	typ := a.GetType()
	what = "action " + catalog.Truncate(typ, 64)
	if typ == ActionCheck {
		// Decoded exactly as the action decodes it.
		body, err := decodeCheckRequest(a.GetBody())
		if err != nil {
			return "action check (with a body that does not decode)", true
		}
		if body.Repair {
			return "action check with repair", true
		}
		return what, false
	}
	if typ == ActionVacuum {
		// Decoded exactly as the action decodes it, so that the two can
		// never disagree on whether a body applies.
		var body vacuumRequest
		if err := decodeJSON(typ, a.GetBody(), &body); err != nil {
			return "action vacuum (with a body that does not decode)", true
		}
		if body.Apply {
			return "action vacuum with apply", true
		}
		return what, false
	}
	if typ == ActionMaintenance {
		// Reading the status is a read; pausing or resuming is not.
		body, err := decodeMaintenanceRequest(a.GetBody())
		if err != nil {
			return "action maintenance (with a body that does not decode)", true
		}
		if body.Paused != nil {
			return "action maintenance with paused", true
		}
		return what, false
	}
	if !IsAction(typ) && !IsFlightSQLAction(typ) {
		// No service runs it: the handler refuses it naming what there
		// is (UnknownAction), to a read token as to any.
		return what, false
	}
	return what, !readActions[typ]
}
