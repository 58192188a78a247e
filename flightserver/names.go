package flightserver

import (
	"fmt"
	"unicode/utf8"
)

// MaxTableNameLen is the longest table name accepted.
const MaxTableNameLen = 128

// ValidateTableName checks a table name: [A-Za-z_][A-Za-z0-9_]*, at most
// 128 characters. Names are directory names under the root, so this rule
// is what keeps every request inside it.
func ValidateTableName(name string) error {
	if name == "" {
		return invalid("table name is empty")
	}
	if len(name) > MaxTableNameLen {
		return invalid("table name is %d characters long; at most %d are allowed", utf8.RuneCountInString(name), MaxTableNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return invalid("table name %s is not allowed: use letters, digits and underscores, not starting with a digit", quoteName(name))
		}
	}
	return nil
}

// quoteName quotes a name for an error message, shortened if long.
func quoteName(name string) string {
	return fmt.Sprintf("%q", truncate(name, 64))
}

// truncate shortens s to n bytes and an ellipsis, for messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
