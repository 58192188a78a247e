package tableformat

// Fuzz target for the commit decoder: FuzzDecodeCommit. The log-level
// targets (CURRENT, whole logs) are in fuzz_log_test.go.

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// decodeErrorOK reports whether err is an error decodeCommit may return:
// a *ProtocolError, an ErrNeedsUpgrade, or a plain error (malformed) that
// claims no other category.
func decodeErrorOK(err error) bool {
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return errors.Is(err, ErrUnsupported) || errors.Is(err, ErrCorrupt)
	}
	if errors.Is(err, ErrNeedsUpgrade) {
		return true
	}
	for _, c := range []error{ErrInvalidInput, ErrNotFound, ErrAlreadyExists, ErrUnsupported, ErrConflict, ErrAmbiguousOutcome, ErrCorrupt, ErrStorage} {
		if errors.Is(err, c) {
			return false
		}
	}
	return true
}

// isTableMetaAction reports whether item is an object whose only key is
// UpdateTableMeta: the one action pass 1 of decodeCommit decodes.
func isTableMetaAction(item []byte) bool {
	o, err := decodeObject(item)
	return err == nil && len(o.fields) == 1 && o.fields[0].key == actUpdateTableMeta
}

// FuzzDecodeCommit: no input panics the decoder; its errors are of the
// documented kinds; whatever it accepts re-encodes to a document that
// decodes to the same commit and encodes to the same bytes again; and the
// compatibility check comes first: the data, as an action next to a
// metadata action this build cannot read, never hides that refusal.
func FuzzDecodeCommit(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "reference", "tables", "*", LogDir, "*.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	v6, _ := filepath.Glob(filepath.Join("..", "testdata", "format6", "tables", "*", LogDir, "*.json"))
	for _, p := range v6 {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(createOK))
	f.Add([]byte(schemaOK))
	f.Add([]byte(segJSON("data/a.parquet")))
	f.Add([]byte(covJSON))
	f.Add([]byte(`{"RemoveSegment":{"path":"data/a.parquet"}}`))
	f.Add([]byte(`"AddSegment"`))
	f.Add([]byte(`{"FutureAction":{"x":1}}`))
	f.Add([]byte(metaJSON(7, `["schema_metadata"]`, `["schema_metadata"]`, testSchema, "")))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkProtocolFirst(t, data)
		c, err := decodeCommit(data)
		if err != nil {
			if c != nil {
				t.Fatalf("decodeCommit returned a commit and an error: %v", err)
			}
			if !decodeErrorOK(err) {
				t.Fatalf("decodeCommit error of the wrong kind: %v", err)
			}
			return
		}
		enc, err := c.MarshalJSON()
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("MarshalJSON error of the wrong kind: %v", err)
			}
			return // e.g. nesting beyond the limit
		}
		c2, err := decodeCommit(enc)
		if err != nil {
			t.Fatalf("re-encoded commit does not decode: %v\n%s", err, enc)
		}
		// The encoder writes protocol 7 only: a format-6 commit comes back
		// as its protocol-7 equivalent.
		c.stripLegacy()
		if c2.Version != c.Version || c2.BaseVersion != c.BaseVersion || !c2.Timestamp.Equal(c.Timestamp) {
			t.Fatalf("header changed in the round trip: %d/%d/%v vs %d/%d/%v", c.Version, c.BaseVersion, c.Timestamp, c2.Version, c2.BaseVersion, c2.Timestamp)
		}
		if !reflect.DeepEqual(c.Actions, c2.Actions) {
			t.Fatalf("actions changed in the round trip:\n%#v\n%#v", c.Actions, c2.Actions)
		}
		if len(c2.Skipped) != 0 {
			t.Fatalf("the encoder wrote unknown actions %v", c2.Skipped)
		}
		enc2, err := c2.MarshalJSON()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, enc2)
		}
	})
}

// checkProtocolFirst puts data (when it is one JSON value) into a commit
// whose next action is metadata of an unsupported protocol or with an
// unknown reader feature. Unless data is itself a metadata action (whose
// own malformation may be reported first), the decoder must refuse with
// ErrUnsupported, whatever data holds.
func checkProtocolFirst(t *testing.T, data []byte) {
	if !json.Valid(data) || jsonDepth(data)+2 > maxJSONDepth {
		return
	}
	refused := metaJSON(8, "[]", "[]", "", "")
	if len(data)%2 == 1 {
		refused = metaJSON(7, `["zz_future_feature"]`, "[]", `{"columns":"not a schema"}`, "")
	}
	doc := `{"version":1,"base_version":0,"timestamp":"2026-01-01T00:00:00Z","actions":[` + string(data) + "," + refused + "]}"
	c, err := decodeCommit([]byte(doc))
	if isTableMetaAction(data) {
		if err == nil {
			t.Fatalf("a commit with an unsupported metadata action decoded: %#v", c)
		}
		return
	}
	var pe *ProtocolError
	if !errors.As(err, &pe) || !errors.Is(err, ErrUnsupported) {
		t.Fatalf("action %s next to unsupported metadata: got %v, want ErrUnsupported", data, err)
	}
}
