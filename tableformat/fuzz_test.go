package tableformat

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecodeCommit: no input panics the decoder, and whatever it accepts
// re-encodes to a document that decodes to the same bytes again.
func FuzzDecodeCommit(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "reference", "tables", "*", LogDir, "*.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(createOK))
	f.Add([]byte(schemaOK))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := decodeCommit(data)
		if err != nil {
			return
		}
		enc, err := c.MarshalJSON()
		if err != nil {
			return // e.g. nesting beyond the limit
		}
		c2, err := decodeCommit(enc)
		if err != nil {
			t.Fatalf("re-encoded commit does not decode: %v\n%s", err, enc)
		}
		enc2, err := c2.MarshalJSON()
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, enc2)
		}
	})
}
