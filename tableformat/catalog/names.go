package catalog

import (
	"fmt"
	"unicode/utf8"

	"github.com/tsflight/tsflight/tableformat"
)

// MaxNameLen is the longest table name accepted.
const MaxNameLen = 128

// NameError is a table name the catalog refuses. It is
// tableformat.ErrInvalidInput; its message says what is wrong.
type NameError struct {
	Name   string
	Reason string
}

func (e *NameError) Error() string        { return e.Reason }
func (e *NameError) Is(target error) bool { return target == tableformat.ErrInvalidInput }

// ValidateName checks a table name: [A-Za-z_][A-Za-z0-9_]*, at most
// MaxNameLen characters. Names are directory names under the root, so
// this rule is what keeps every request inside it.
func ValidateName(name string) error {
	if name == "" {
		return &NameError{Name: name, Reason: "table name is empty"}
	}
	if len(name) > MaxNameLen {
		return &NameError{Name: name, Reason: fmt.Sprintf("table name is %d characters long; at most %d are allowed", utf8.RuneCountInString(name), MaxNameLen)}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return &NameError{Name: name, Reason: fmt.Sprintf("table name %s is not allowed: use letters, digits and underscores, not starting with a digit", QuoteName(name))}
		}
	}
	return nil
}

// QuoteName quotes a name for an error message, shortened if long.
func QuoteName(name string) string {
	return fmt.Sprintf("%q", Truncate(name, 64))
}

// Truncate shortens s to n bytes and an ellipsis, for messages.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
