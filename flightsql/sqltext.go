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
// of s. It reads the text as DuckDB's lexer does: string literals (with
// ” and, in E” strings, backslash escapes), dollar-quoted strings,
// quoted identifiers, -- and nested /* */ comments are skipped whole, so
// that no parenthesis inside them counts.
func callSpan(s string) (int, bool) {
	depth := 0
	for i := 0; i < len(s); {
		if n, ok := skipLexeme(s, i); ok {
			if n < 0 {
				return 0, false // unterminated
			}
			i = n
			continue
		}
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i + 1, true
			}
			if depth < 0 {
				return 0, false
			}
		}
		i++
	}
	return 0, false
}

// skipLexeme reports whether a string, quoted identifier or comment starts
// at s[i], and where it ends (-1 when it does not).
func skipLexeme(s string, i int) (int, bool) {
	rest := s[i:]
	switch {
	case strings.HasPrefix(rest, "--"):
		// DuckDB ends a line comment at \n or \r.
		if j := strings.IndexAny(rest, "\n\r"); j >= 0 {
			return i + j + 1, true
		}
		return len(s), true
	case strings.HasPrefix(rest, "/*"):
		depth := 0
		for j := i; j+1 < len(s); j++ {
			switch {
			case s[j] == '/' && s[j+1] == '*':
				depth++
				j++
			case s[j] == '*' && s[j+1] == '/':
				depth--
				j++
				if depth == 0 {
					return j + 1, true
				}
			}
		}
		return -1, true
	case s[i] == '\'':
		escapes := i > 0 && (s[i-1] == 'e' || s[i-1] == 'E') && startsToken(s, i-1)
		for j := i + 1; j < len(s); j++ {
			switch {
			case escapes && s[j] == '\\':
				j++
			case s[j] == '\'' && j+1 < len(s) && s[j+1] == '\'':
				j++
			case s[j] == '\'':
				return j + 1, true
			}
		}
		return -1, true
	case s[i] == '"':
		for j := i + 1; j < len(s); j++ {
			if s[j] == '"' {
				if j+1 < len(s) && s[j+1] == '"' {
					j++
					continue
				}
				return j + 1, true
			}
		}
		return -1, true
	case s[i] == '$':
		// $tag$ … $tag$ (the tag may be empty); $1 is a parameter.
		j := i + 1
		for j < len(s) && (isIdentByte(s[j]) && !(j == i+1 && s[j] >= '0' && s[j] <= '9')) {
			j++
		}
		if j < len(s) && s[j] == '$' && (i == 0 || !isIdentByte(s[i-1])) {
			tag := s[i : j+1]
			if k := strings.Index(s[j+1:], tag); k >= 0 {
				return j + 1 + k + len(tag), true
			}
			return -1, true
		}
	}
	return 0, false
}

// startsToken reports whether the identifier character at s[i] starts a
// token, as DuckDB's lexer reads it: the run of identifier characters
// before it is empty or all digits (a number: "1E'x'" is 1 and then the
// string E'x'), not an identifier ("aE'x'" is aE and then 'x').
func startsToken(s string, i int) bool {
	j := i
	for j > 0 && isIdentByte(s[j-1]) {
		j--
	}
	for k := j; k < i; k++ {
		if s[k] < '0' || s[k] > '9' {
			return false
		}
	}
	return true
}

// asciiLower lowers ASCII letters only, as DuckDB folds identifiers: Go's
// strings.ToLower also folds letters such as the Kelvin sign (K) to ASCII,
// which made a CTE named "pg_settİngs" look like one named pg_settings.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// asciiEqualFold compares names as DuckDB does: ASCII letters without
// case, every other byte exactly.
func asciiEqualFold(a, b string) bool {
	return len(a) == len(b) && asciiLower(a) == asciiLower(b)
}
