// The token command: makes access tokens for serve --auth-tokens, storing
// only their hashes.

package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tsflight/tsflight/flightserver/guard"
)

var tokenCmd = &command{
	Name:    "token",
	Group:   "server",
	Summary: "make an access token for serve --auth-tokens (the file keeps only its hash)",
	Usage: "tsflight token new --scope read|write [--name NAME] [--expires DURATION|TIME] --file FILE\n" +
		"       tsflight token hash --scope read|write [--name NAME] [--expires DURATION|TIME] < SECRET\n" +
		"       tsflight token list --file FILE\n" +
		"       tsflight token revoke --file FILE NAME-OR-ID...",
	Help: `token new makes a random token (tsf_ and 43 characters), prints it on
standard output, once, and appends its line to the tokens file --file
(created readable by its owner only): the SHA-256 hash of the token, its
scope, name and expiry. The file never holds the token itself. A running
server reads the file again on SIGHUP and within --reload-interval of a
change, so a new token works at once and a deleted line revokes its token.

token hash reads a token you made elsewhere from standard input and prints
its line for the tokens file (hashed), without writing any file.

token list shows the tokens of a file: name, id (the start of the hash),
scope, expiry and whether it is expired; never a secret. token revoke
removes the tokens with the given names or ids (sha256:… as token list
shows them) from the file, keeping its other lines; a server reading the
file refuses them from its next reload (SIGHUP, or --reload-interval).

--scope read allows listing, scanning, SQL queries, metadata, coverage and
gaps; write also allows appending (DoPut), bulk ingest, create-table,
add-columns and vacuum --apply. --expires is a duration from now (720h)
or an RFC 3339 time or date; without it the token does not expire.
docs/security.md says how to deploy it.

Example:
  tsflight token new --scope write --name loader --file /etc/tsflight/tokens
  tsflight token new --scope read --name grafana --expires 2160h --file /etc/tsflight/tokens
  tsflight token list --file /etc/tsflight/tokens
  tsflight token revoke --file /etc/tsflight/tokens grafana`,
}

func init() { register(tokenCmd, runToken) }

func runToken(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			_, err := newFlagSet(tokenCmd).parse(e, args)
			return err
		}
		return usagef("tsflight token needs a subcommand: new, hash, list or revoke")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "new", "hash":
	case "list", "revoke":
		return runTokenFile(e, sub, args)
	default:
		return usagef("unknown token subcommand %q (want new, hash, list or revoke)", sub)
	}
	fs := newFlagSet(tokenCmd)
	scope := fs.String("scope", "", "what the token allows: `read` or write (required)")
	name := fs.String("name", "", "`name` that identifies the token in logs and errors (letters, digits, . _ -)")
	expires := fs.String("expires", "", "when the token stops working: a `duration` from now (720h) or an RFC 3339 time or date")
	file := fs.String("file", "", "tokens `file` to append the new token's line to (token new; required)")
	rest, err := fs.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	line, err := tokenLineAttrs(*scope, *name, *expires, time.Now())
	if err != nil {
		return err
	}
	if sub == "hash" {
		if *file != "" {
			return usagef("--file is for token new; token hash only prints the line")
		}
		sc := bufio.NewScanner(e.stdin())
		if !sc.Scan() {
			return usagef("token hash reads the token from standard input; it got nothing")
		}
		secret := strings.TrimSpace(sc.Text())
		if len(secret) < guard.MinTokenLength {
			return usagef("the token on standard input is shorter than %d characters", guard.MinTokenLength)
		}
		fmt.Fprintln(e.stdout, guard.HashToken(secret)+line)
		return nil
	}
	if *file == "" {
		return usagef("--file is required: the tokens file the server reads (--auth-tokens)")
	}
	if *name != "" {
		// Names identify tokens in logs and in token revoke: keep them apart.
		if toks, err := guard.ListTokens(*file); err == nil {
			for _, t := range toks {
				if t.Name == *name {
					return usagef("%s already has a token named %s (%s): choose another name, or revoke that one first", *file, *name, t.ID)
				}
			}
		}
	}
	secret, err := guard.NewToken()
	if err != nil {
		return err
	}
	if err := guard.AppendTokenLine(*file, guard.HashToken(secret)+line); err != nil {
		return fmt.Errorf("tokens file %s: %w", *file, err)
	}
	fmt.Fprintln(e.stdout, secret)
	fmt.Fprintf(e.stderr, "a %s token was added to %s (as its hash); the token above is shown only now\n", *scope, *file)
	return nil
}

// tokenLineAttrs checks the flags of a token and returns the rest of its
// tokens-file line (after the hash): " SCOPE [name=NAME] [expires=TIME]".
func tokenLineAttrs(scope, name, expires string, now time.Time) (string, error) {
	if _, err := guard.ParseScope(scope); err != nil || scope == "" {
		return "", usagef("--scope must be read or write (got %q)", scope)
	}
	line := " " + scope
	if name != "" {
		if strings.IndexFunc(name, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
		}) >= 0 {
			return "", usagef("--name %q: use letters, digits, '.', '_' and '-'", name)
		}
		line += " name=" + name
	}
	if expires != "" {
		t, err := parseExpires(expires, now)
		if err != nil {
			return "", err
		}
		line += " expires=" + t.UTC().Format(time.RFC3339)
	}
	return line, nil
}

func parseExpires(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, usagef("--expires %q: the duration must be positive", s)
		}
		return now.Add(d), nil
	}
	for _, layout := range []string{time.RFC3339, time.DateOnly} {
		if t, err := time.Parse(layout, s); err == nil {
			if !t.After(now) {
				return time.Time{}, usagef("--expires %q is in the past", s)
			}
			return t, nil
		}
	}
	return time.Time{}, usagef("--expires %q is neither a duration (720h) nor an RFC 3339 time or date", s)
}

// runTokenFile runs token list and token revoke.
func runTokenFile(e *env, sub string, args []string) error {
	fs := newFlagSet(tokenCmd)
	file := fs.String("file", "", "tokens `file` (required)")
	rest, err := fs.parse(e, args)
	if err != nil {
		return err
	}
	if *file == "" {
		return usagef("--file is required: the tokens file the server reads (--auth-tokens)")
	}
	if sub == "list" {
		if len(rest) > 0 {
			return usagef("unexpected argument %q", rest[0])
		}
		toks, err := guard.ListTokens(*file)
		if err != nil {
			return err
		}
		g := &grid{header: []string{"name", "id", "scope", "expires", "state"}}
		now := time.Now()
		for _, t := range toks {
			exp, state := "never", "active"
			if !t.Expires.IsZero() {
				exp = t.Expires.UTC().Format(time.RFC3339)
			}
			if t.Expired(now) {
				state = "expired"
			}
			g.rows = append(g.rows, []string{t.Name, t.ID, t.Scope.String(), exp, state})
		}
		return g.print(e.stdout)
	}
	if len(rest) == 0 {
		return usagef("token revoke needs the names or ids of the tokens to remove (token list shows them)")
	}
	want := map[string]bool{}
	for _, r := range rest {
		want[r] = true
	}
	removed, err := guard.RemoveTokens(*file, func(t guard.Token) bool { return want[t.Name] || want[t.ID] })
	if err != nil {
		return err
	}
	for _, t := range removed {
		delete(want, t.Name)
		delete(want, t.ID)
		fmt.Fprintf(e.stdout, "revoked %s (%s, %s)\n", t.Name, t.ID, t.Scope)
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for _, r := range rest {
			if want[r] {
				missing = append(missing, r)
			}
		}
		if len(removed) == 0 {
			return fmt.Errorf("no token in %s is named %s: nothing was changed", *file, strings.Join(missing, ", "))
		}
		return fmt.Errorf("no token in %s is named %s (the others were revoked)", *file, strings.Join(missing, ", "))
	}
	return nil
}
