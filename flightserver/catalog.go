package flightserver

import (
	"encoding/json"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Tables that cannot be read in listings. A listing (ListFlights, Flight
// SQL GetTables with schemas) never fails for one table: it lists the table
// with an empty schema that says what is wrong, and logs it. Opening the
// table by name keeps failing with the error.

// Table states of a TableProblem.
const (
	// TableDamaged: the table's log does not replay (DATA_LOSS): CURRENT is
	// unreadable or ahead of the commits, a commit is missing or malformed.
	// tsflight check says what to restore or repair.
	TableDamaged = "damaged"
	// TableUnreadable: any other failure to open the table: it needs a
	// newer protocol or an upgrade (FAILED_PRECONDITION), its files cannot
	// be read (UNAVAILABLE), …
	TableUnreadable = "unreadable"
)

// Schema metadata keys of the empty schema listed for a table that cannot
// be read (UnreadableSchema): the TableProblem's fields.
const (
	MetadataTableState = "tsflight.state"
	MetadataTableCode  = "tsflight.code"
	MetadataTableError = "tsflight.error"
)

// TableProblem says why a listed table cannot be read. It is the JSON
// app_metadata of the FlightInfo ListFlights sends for such a table (a
// readable table's FlightInfo has no app_metadata).
type TableProblem struct {
	// State is TableDamaged or TableUnreadable.
	State string `json:"state"`
	// Code is the gRPC status code opening the table fails with, in the
	// canonical upper-case form ("DATA_LOSS").
	Code string `json:"code"`
	// Error is the status message, naming the table and the file at fault.
	Error string `json:"error"`
}

// ProblemOf describes err, the error opening a table failed with (a gRPC
// status or an error of tableformat's categories).
func ProblemOf(err error) TableProblem {
	st := status.Convert(Status(err))
	p := TableProblem{State: TableUnreadable, Code: codeName(st.Code()), Error: st.Message()}
	if st.Code() == codes.DataLoss {
		p.State = TableDamaged
	}
	return p
}

// codeName is a gRPC code's canonical name: DataLoss is DATA_LOSS.
func codeName(c codes.Code) string {
	s := c.String()
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// UnreadableSchema is the schema listed for a table that cannot be read:
// no fields, and p in its metadata (MetadataTableState, …).
func UnreadableSchema(p TableProblem) *arrow.Schema {
	md := arrow.NewMetadata(
		[]string{MetadataTableState, MetadataTableCode, MetadataTableError},
		[]string{p.State, p.Code, p.Error})
	return arrow.NewSchema(nil, &md)
}

// unreadableInfo is the FlightInfo ListFlights sends for a table that
// cannot be read: its PATH descriptor, UnreadableSchema, no endpoint,
// unknown totals (-1) and the TableProblem as app_metadata.
func unreadableInfo(desc *flight.FlightDescriptor, p TableProblem, alloc memory.Allocator) *flight.FlightInfo {
	meta, _ := json.Marshal(p) // strings only: cannot fail
	return &flight.FlightInfo{
		Schema:           flight.SerializeSchema(UnreadableSchema(p), alloc),
		FlightDescriptor: desc,
		TotalRecords:     -1,
		TotalBytes:       -1,
		AppMetadata:      meta,
	}
}
