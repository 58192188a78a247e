package flightserver

// Refusals of names and shapes the server does not know (an action, a
// descriptor, a ticket) that say what was sent, what is accepted and, for
// a name one or two edits away from a real one, which was meant. The
// Flight SQL router (package flightsql) uses them too, with withSQL set,
// so that a server with Flight SQL lists Flight SQL's forms as well.

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tsflight/tsflight/flightserver/reqerr"
	"github.com/tsflight/tsflight/tableformat/catalog"
)

// flightSQLActions are the actions arrow-go's Flight SQL server handles
// (flightsql.flightSqlServer.DoAction in arrow-go v18): the router sends
// these to Flight SQL, and a server without Flight SQL refuses them as
// such.
var flightSQLActions = []string{
	flight.CancelFlightInfoActionType,
	flight.RenewFlightEndpointActionType,
	"CreatePreparedStatement",
	"ClosePreparedStatement",
	"CreatePreparedSubstraitPlan",
	"CancelQuery",
	"BeginTransaction",
	"EndTransaction",
	"BeginSavepoint",
	"EndSavepoint",
	flight.SetSessionOptionsActionType,
	flight.GetSessionOptionsActionType,
	flight.CloseSessionActionType,
}

// FlightSQLActions returns the names of the Flight SQL actions.
func FlightSQLActions() []string { return slices.Clone(flightSQLActions) }

// IsFlightSQLAction reports whether name is a Flight SQL action.
func IsFlightSQLAction(name string) bool { return slices.Contains(flightSQLActions, name) }

// actionNames returns the names of this service's actions, in the order
// ListActions sends them.
func actionNames() []string {
	out := make([]string, len(actionTypes))
	for i, a := range actionTypes {
		out[i] = a.Type
	}
	return out
}

// maxSuggestDistance is how many edits (insertions, deletions,
// substitutions; letter case aside) a name may be from a known one for
// the refusal to suggest it.
const maxSuggestDistance = 2

// Closest returns the candidate nearest to name, when it is at most
// maxSuggestDistance edits away (letter case does not count), the first
// of the nearest on a tie; "" when none is that near or name is one of
// them.
func Closest(name string, candidates []string) string {
	best, bestD := "", maxSuggestDistance+1
	for _, c := range candidates {
		if c == name {
			return ""
		}
		if d := editDistance(name, c, bestD); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, letters compared
// without case; any distance of at least limit is reported as limit.
func editDistance(a, b string, limit int) int {
	ra, rb := []rune(strings.ToLower(a)), []rune(strings.ToLower(b))
	if d := len(ra) - len(rb); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return min(prev[len(rb)], limit)
}

// didYouMean is "; did you mean "X"?" for the nearest candidate, or "".
func didYouMean(name string, candidates []string) string {
	if c := Closest(name, candidates); c != "" {
		return fmt.Sprintf("; did you mean %q?", c)
	}
	return ""
}

// UnknownAction is the refusal of an action no service knows: it names
// the action sent, suggests the nearest one and lists them all (the
// Flight SQL ones too when withSQL). Without Flight SQL, a Flight SQL
// action is UNIMPLEMENTED instead, as Flight SQL commands are.
func UnknownAction(name string, withSQL bool) error {
	if !withSQL && IsFlightSQLAction(name) {
		return Status(reqerr.Errorf(reqerr.ErrUnimplemented, "Flight SQL is not served: this tsflight server was built without -tags duckdb_arrow (got action %s)", name))
	}
	names := actionNames()
	all := names
	list := strings.Join(names, ", ")
	if withSQL {
		all = append(slices.Clone(names), flightSQLActions...)
		list += "; Flight SQL: " + strings.Join(flightSQLActions, ", ")
	}
	return Status(invalidf("unknown action %q%s The actions are: %s (ListActions describes them)",
		catalog.Truncate(name, 64), sentenceEnd(didYouMean(name, all)), list))
}

// sentenceEnd turns a suggestion ("; did you mean …?") or nothing into
// the end of a sentence.
func sentenceEnd(suggestion string) string {
	if suggestion == "" {
		return "."
	}
	return suggestion
}

// anyTypeURL returns the type URL of b when b is a protobuf Any (as Flight
// SQL commands and tickets are).
func anyTypeURL(b []byte) (string, bool) {
	// An Any starts with field 1 (type_url, wire type 2); JSON never
	// starts with 0x0a.
	if len(b) < 2 || b[0] != 0x0a {
		return "", false
	}
	var a anypb.Any
	if err := proto.Unmarshal(b, &a); err != nil || !strings.Contains(a.GetTypeUrl(), "/") {
		return "", false
	}
	return a.GetTypeUrl(), true
}

// IsFlightSQLType reports whether a type URL names a Flight SQL message.
func IsFlightSQLType(url string) bool {
	return strings.HasPrefix(url, string(flightSQLTypePrefix))
}

// describeBytes says briefly what bytes a client sent: their length and
// the first few, quoted.
func describeBytes(b []byte) string {
	const shown = 24
	if len(b) == 0 {
		return "nothing (0 bytes)"
	}
	if url, ok := anyTypeURL(b); ok {
		return fmt.Sprintf("a protobuf Any of type %q", catalog.Truncate(url, 128))
	}
	s := fmt.Sprintf("%d bytes, %q", len(b), b[:min(len(b), shown)])
	if len(b) > shown {
		s += "…"
	}
	return s
}

// UnknownTicket is the refusal of a DoGet ticket that is no tsflight
// ticket (nor, withSQL, a Flight SQL one): what was sent and what a
// ticket looks like.
func UnknownTicket(b []byte, withSQL bool) error {
	nor, forms := "", `a tsflight ticket starts with "tsf1:"`
	if withSQL {
		nor = " nor a Flight SQL one"
		forms += ", a Flight SQL ticket is a protobuf Any of an arrow.flight.protocol.sql message"
	}
	return Status(invalidf("ticket: not a tsflight ticket%s: got %s (%s; take tickets from the endpoints of a FlightInfo)", nor, describeBytes(b), forms))
}

// descriptorForms says what descriptors call takes.
func descriptorForms(call string, withSQL bool) string {
	forms := `PATH ["TABLE"] or CMD holding a JSON scan request such as {"table":"cpu"}`
	if call == "DoPut" {
		forms = `PATH ["TABLE"] or CMD holding {"table":"TABLE"} (with "create": {…} to create it)`
	}
	if withSQL {
		forms += ", or CMD holding a Flight SQL command"
	}
	return forms
}

// UnknownDescriptor is the refusal of a descriptor whose shape call does
// not take: a type other than PATH and CMD, or a CMD holding a protobuf
// Any that is no Flight SQL command. It is nil for the other shapes
// (whose own checks say what is wrong with them) and for nil.
func UnknownDescriptor(call string, d *flight.FlightDescriptor, withSQL bool) error {
	switch {
	case d == nil, d.Type == flight.DescriptorPATH:
		return nil
	case d.Type != flight.DescriptorCMD:
		return Status(invalidf("%s: unknown descriptor type %s: send %s", call, descriptorTypeName(d.Type), descriptorForms(call, withSQL)))
	}
	if url, ok := anyTypeURL(d.Cmd); ok && !IsFlightSQLType(url) {
		return Status(invalidf("%s: the command is a protobuf Any of type %q, which this server does not take: send %s",
			call, catalog.Truncate(url, 128), descriptorForms(call, withSQL)))
	}
	return nil
}

// descriptorTypeName names a descriptor type: its protobuf name and
// number ("UNKNOWN (0)"), or the number alone for one protobuf does not
// define.
func descriptorTypeName(t flight.DescriptorType) string {
	name := t.String()
	if name == "" || unicode.IsDigit(rune(name[0])) {
		return fmt.Sprintf("%d", int32(t))
	}
	return fmt.Sprintf("%s (%d)", name, int32(t))
}
