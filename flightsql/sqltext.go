//go:build duckdb_arrow

package flightsql

import (
	"bytes"
	"strings"
)

// Reading SQL text at positions DuckDB's parser reported.

// qualifiedName reads an identifier chain (a, a.b or a.b.c, each part
// bare or double-quoted) at the start of s and returns its parts and
// length in bytes.
func qualifiedName(s string) ([]string, int, bool) {
	var parts []string
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) && len(parts) > 0 {
			i++
		}
		if i >= len(s) {
			return nil, 0, false
		}
		if s[i] == '"' {
			var b bytes.Buffer
			j := i + 1
			for {
				if j >= len(s) {
					return nil, 0, false
				}
				if s[j] == '"' {
					if j+1 < len(s) && s[j+1] == '"' {
						b.WriteByte('"')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(s[j])
				j++
			}
			parts = append(parts, b.String())
			i = j + 1
		} else {
			j := i
			for j < len(s) && isIdentByte(s[j]) {
				j++
			}
			if j == i {
				return nil, 0, false
			}
			parts = append(parts, s[i:j])
			i = j
		}
		end := i
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i >= len(s) || s[i] != '.' || len(parts) == 3 {
			return parts, end, true
		}
		i++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// callSpan returns the length of a function call name(...) at the start
// of s, skipping string literals and nested parentheses.
func callSpan(s string) (int, bool) {
	open := strings.IndexByte(s, '(')
	if open < 0 {
		return 0, false
	}
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '\'':
			j := i + 1
			for j < len(s) {
				if s[j] == '\'' {
					if j+1 < len(s) && s[j+1] == '\'' {
						j += 2
						continue
					}
					break
				}
				j++
			}
			i = j
		case '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return 0, false
			}
			i += j + 1
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}
