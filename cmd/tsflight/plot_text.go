package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The heat map's texts: coverage percentages, row labels, and text cut
// and measured as the PNG font draws it.

// plotPercent formats a coverage percentage that reads 0 % or 100 % only
// when it is exactly that.
func plotPercent(covered, total float64, gap, full bool) string {
	switch {
	case total == 0:
		return "-"
	case gap:
		return "0%"
	case full:
		return "100%"
	}
	pct := 100 * covered / total
	s := strconv.FormatFloat(pct, 'f', 1, 64)
	switch s {
	case "0.0":
		return "<0.1%"
	case "100.0":
		return ">99.9%"
	}
	return s + "%"
}

// plotRowLabel is row r's y label: the entity, "first … last (n)" for a row
// of several identities, the table's name for a table without entity
// columns.
func plotRowLabel(g *coverageGrid, r int) string {
	row := g.Rows[r]
	if row.Identities > 1 {
		// Within plotLabelChars as the PNG spells it (" ... ").
		count := fmt.Sprintf(" (%d)", row.Identities)
		half := max((plotLabelChars-len(count)-5)/2, 3)
		return plotTruncate(plotQuoteEmpty(row.First), half) + " … " + plotTruncate(plotQuoteEmpty(row.Last), half) + count
	}
	if row.First == "" && len(g.EntityColumns) == 0 {
		if g.Table == "" {
			return "(all)"
		}
		return plotTruncate(g.Table, plotLabelChars)
	}
	return plotTruncate(plotQuoteEmpty(row.First), plotLabelChars)
}

func plotQuoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// plotTruncate cuts s to at most n characters as drawn (plotTextLen),
// ending in "…" if cut.
func plotTruncate(s string, n int) string {
	if plotTextLen(s) <= n {
		return s
	}
	var b strings.Builder
	w := 0
	for _, r := range s {
		rw := plotTextLen(string(r))
		if w+rw > n-3 {
			break
		}
		b.WriteRune(r)
		w += rw
	}
	return b.String() + "…"
}

// plotASCII is s as the PNG font can draw it: the punctuation the labels
// use spelled in ASCII, control characters dropped, anything else left for
// the font's replacement glyph.
func plotASCII(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '…':
			b.WriteString("...")
		case r == '×':
			b.WriteByte('x')
		case r == '–' || r == '—' || r == '−':
			b.WriteByte('-')
		case r == '→':
			b.WriteString("->")
		case r == '·':
			b.WriteByte('.')
		case r < 0x20 || r == 0x7f:
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// plotTextLen is s's width in characters as drawn.
func plotTextLen(s string) int { return utf8.RuneCountInString(plotASCII(s)) }
