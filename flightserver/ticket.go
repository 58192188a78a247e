package flightserver

import (
	"bytes"
	"encoding/json"
)

// ticketPrefix marks tsflight tickets (Flight SQL tickets are protobuf Any
// messages and never start with it). NB: clients hold tickets only briefly,
// but the prefix doubles as the ticket format version.
var ticketPrefix = []byte("tsf1:")

// ticket is what a DoGet ticket carries: the request, pinned to the
// version it was planned on, and which of the plan's parts to read.
type ticket struct {
	ScanRequest
	Part  int `json:"part"`
	Parts int `json:"parts"`
}

// IsTicket reports whether b is a tsflight ticket.
func IsTicket(b []byte) bool { return bytes.HasPrefix(b, ticketPrefix) }

func encodeTicket(t *ticket) []byte {
	body, _ := json.Marshal(t)
	return append(append([]byte{}, ticketPrefix...), body...)
}

func decodeTicket(b []byte) (*ticket, error) {
	if !IsTicket(b) {
		if err := refuseFlightSQL(b); err != nil {
			return nil, err
		}
		return nil, UnknownTicket(b, false)
	}
	var t ticket
	if err := decodeJSON("ticket", b[len(ticketPrefix):], &t); err != nil {
		return nil, err
	}
	if err := t.normalize("ticket"); err != nil {
		return nil, err
	}
	if t.Version == nil {
		return nil, invalidf("ticket: no version")
	}
	if t.Parts < 1 || t.Part < 0 || t.Part >= t.Parts {
		return nil, invalidf("ticket: part %d of %d is out of range", t.Part, t.Parts)
	}
	return &t, nil
}
