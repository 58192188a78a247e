//go:build duckdb_arrow

package flightsql

// likeMatch against a dynamic-programming oracle, and on the pattern that
// made the recursive matcher it replaced take exponential time.

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// likeOracle matches with a table of prefixes: dp[i][j] says whether
// p[:i] matches s[:j].
func likeOracle(p, s []rune) bool {
	type tok struct {
		r    rune
		kind byte // '%', '_' or 'l' (literal)
	}
	var toks []tok
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			toks = append(toks, tok{p[i+1], 'l'})
			i++
		case p[i] == '%' || p[i] == '_':
			toks = append(toks, tok{kind: byte(p[i])})
		default:
			toks = append(toks, tok{p[i], 'l'})
		}
	}
	dp := make([][]bool, len(toks)+1)
	for i := range dp {
		dp[i] = make([]bool, len(s)+1)
	}
	dp[0][0] = true
	for i := 1; i <= len(toks); i++ {
		t := toks[i-1]
		for j := 0; j <= len(s); j++ {
			switch t.kind {
			case '%':
				dp[i][j] = dp[i-1][j] || (j > 0 && dp[i][j-1])
			case '_':
				dp[i][j] = j > 0 && dp[i-1][j-1]
			default:
				dp[i][j] = j > 0 && dp[i-1][j-1] && s[j-1] == t.r
			}
		}
	}
	return dp[len(toks)][len(s)]
}

func TestLikeMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"cpu", "cpu", true}, {"c%", "cpu", true}, {"%u", "cpu", true}, {"c_u", "cpu", true},
		{"c_", "cpu", false}, {"%", "", true}, {"_", "", false}, {"%%%", "x", true},
		{`a\%b`, "a%b", true}, {`a\%b`, "axb", false}, {`a\_b`, "a_b", true}, {`a\_b`, "axb", false},
		{"%a%b%c", "xxaxxbxxc", true}, {"%a%b%c", "xxaxxcxxb", false}, {"ü%", "über", true},
	} {
		if got := likeMatch([]rune(c.p), []rune(c.s)); got != c.want {
			t.Errorf("likeMatch(%q, %q) = %v, want %v", c.p, c.s, got, c.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune{'a', 'b', '%', '_', '\\'}
	for range 20000 {
		p := make([]rune, rng.IntN(8))
		for i := range p {
			p[i] = alphabet[rng.IntN(len(alphabet))]
		}
		s := make([]rune, rng.IntN(10))
		for i := range s {
			s[i] = alphabet[rng.IntN(3)] // a, b, %
		}
		if got, want := likeMatch(p, s), likeOracle(p, s); got != want {
			t.Fatalf("likeMatch(%q, %q) = %v, the oracle says %v", string(p), string(s), got, want)
		}
	}
	// The fifth review's pattern against a 128-character name: exponential
	// for the old matcher, a few thousand steps now.
	name := []rune(strings.Repeat("sensor_readings_", 8))
	if likeMatch([]rune(strings.Repeat("%_", 40)+"!"), name) {
		t.Fatal("a pattern ending in ! matched a name without one")
	}
}
