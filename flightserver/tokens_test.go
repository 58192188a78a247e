// Tests of the tokens file: what ParseTokens accepts and refuses (never
// quoting a secret), lookups and expiry, TokenFile reloads, appending a
// line, and NewToken.

package flightserver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tsflight/tsflight/flightserver/guard"
)

const (
	secretA = "alpha-secret-0123456789"
	secretB = "bravo-secret-0123456789"
	secretC = "charlie-secret-0123456789"
)

func TestTokenParseAccepts(t *testing.T) {
	text := "# tokens for the tests\n" +
		"\n" +
		"   " + secretA + "   read   name=alice  \n" +
		guard.HashToken(secretB) + " write expires=2030-01-31T12:00:00+01:00\n" +
		"# another comment\n" +
		secretC + " read expires=2031-02-01 name=carol; tsf_" + strings.Repeat("x", 20) + " write ;; \n" +
		"\t\n"
	set, err := guard.ParseTokens(strings.NewReader(text), "tokens.txt")
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != 4 {
		t.Fatalf("Len %d, want 4", set.Len())
	}
	a, ok := set.Lookup(secretA)
	if !ok || a.Name != "alice" || a.Scope != guard.ScopeRead || !a.Expires.IsZero() {
		t.Fatalf("alice: %+v %v", a, ok)
	}
	b, ok := set.Lookup(secretB)
	wantB := guard.HashToken(secretB)[:len("sha256:")+12]
	if !ok || b.Name != wantB || b.Scope != guard.ScopeWrite || !b.Expires.Equal(time.Date(2030, 1, 31, 11, 0, 0, 0, time.UTC)) {
		t.Fatalf("hashed token: %+v %v, want name %s", b, ok, wantB)
	}
	c, ok := set.Lookup(secretC)
	if !ok || c.Name != "carol" || c.Scope != guard.ScopeRead || !c.Expires.Equal(time.Date(2031, 2, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("carol: %+v %v", c, ok)
	}
	d, ok := set.Lookup("tsf_" + strings.Repeat("x", 20))
	if !ok || d.Scope != guard.ScopeWrite || !strings.HasPrefix(d.Name, "sha256:") {
		t.Fatalf("second entry of a ';' line: %+v %v", d, ok)
	}
	for _, s := range []string{"", "alpha-secret-012345678", secretA + " ", guard.HashToken(secretA), "ALPHA-SECRET-0123456789"} {
		if tok, ok := set.Lookup(s); ok {
			t.Errorf("Lookup(%q) found %+v", s, tok)
		}
	}
	var none *guard.TokenSet
	if _, ok := none.Lookup(secretA); ok || none.Len() != 0 {
		t.Fatal("a nil set holds tokens")
	}

	// Expired: at and after the instant, not before; never without one.
	if b.Expired(b.Expires.Add(-time.Nanosecond)) || !b.Expired(b.Expires) || !b.Expired(b.Expires.Add(time.Hour)) {
		t.Fatal("Expired around the expiry instant")
	}
	if a.Expired(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatal("a token without expiry expired")
	}
	if guard.ScopeRead.String() != "read" || guard.ScopeWrite.String() != "write" || guard.ScopeNone.String() != "none" {
		t.Fatal("Scope.String")
	}
}

func TestTokenParseRefuses(t *testing.T) {
	long := "tsf_" + strings.Repeat("k", 30)
	other := "tsf_" + strings.Repeat("q", 30)
	for _, c := range []struct {
		name, text string
		line       string // "line N" expected in the message
		frag       string
		secrets    []string // must not appear in the message
	}{
		{"short secret", "# c\nshort-secret-15 read\n", "line 2", "at least 16", []string{"short-secret-15"}},
		{"non-ASCII", "geheimnis-schlüssel-1234 read\n", "line 1", "printable ASCII", []string{"geheimnis"}},
		{"control character", "secret-with-\x07-bell-123 read\n", "line 1", "printable ASCII", []string{"secret-with"}},
		{"hash too short", guard.HashToken(secretA)[:40] + " read\n", "line 1", "64 hex digits", nil},
		{"hash not hex", "sha256:" + strings.Repeat("zz", 32) + " read\n", "line 1", "64 hex digits", nil},
		{"bad scope", long + " admin\n", "line 1", `scope "admin"`, []string{long}},
		{"two tokens on one line", long + " " + other + " write\n", "line 1", "not quoted", []string{long, other}},
		{"token in place of an attribute", long + " read " + other + "\n", "line 1", "name=NAME or expires=TIME", []string{long, other}},
		{"unknown attribute", long + " read owner=bob\n", "line 1", `unknown attribute "owner"`, []string{long}},
		{"name twice", long + " read name=a name=b\n", "line 1", "name= given twice", []string{long}},
		{"empty name", long + " read name=\n", "line 1", "name= given twice or empty", []string{long}},
		{"no scope", "\n\n" + long + "\n", "line 3", "got 1 field", []string{long}},
		{"bad expiry", long + " read expires=next-tuesday\n", "line 1", `expires="next-tuesday"`, []string{long}},
		{"expiry without zone", long + " read expires=2030-01-01T00:00:00\n", "line 1", "RFC 3339", []string{long}},
		{"same secret twice", long + " read\n# x\n" + long + " write\n", "line 3", "same token as line 1", []string{long}},
		{"secret and its hash", long + " read; " + guard.HashToken(long) + " write\n", "line 1", "same token as line 1", []string{long}},
		{"hash and its secret", guard.HashToken(long) + " read\n" + long + " write name=w\n", "line 2", "same token as line 1", []string{long}},
	} {
		set, err := guard.ParseTokens(strings.NewReader(c.text), "tokens.txt")
		if err == nil {
			t.Errorf("%s: accepted (%d tokens)", c.name, set.Len())
			continue
		}
		msg := err.Error()
		if !errors.Is(err, guard.ErrBadTokens) || !strings.Contains(msg, "tokens.txt "+c.line) || !strings.Contains(msg, c.frag) {
			t.Errorf("%s: %q, want ErrBadTokens naming tokens.txt %s and %q", c.name, msg, c.line, c.frag)
		}
		for _, s := range c.secrets {
			if strings.Contains(msg, s) {
				t.Errorf("%s: the message %q quotes a secret", c.name, msg)
			}
		}
	}
	if _, err := guard.ParseScope("Write"); !errors.Is(err, guard.ErrBadTokens) {
		t.Fatalf("ParseScope(Write): %v", err)
	}
}

func writeTokens(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTokenFileReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if _, err := guard.OpenTokenFile(path); err == nil || !errors.Is(err, guard.ErrBadTokens) {
		t.Fatalf("OpenTokenFile of a missing file: %v", err)
	}
	writeTokens(t, path, "# only comments\n\n")
	if _, err := guard.OpenTokenFile(path); err == nil || !strings.Contains(err.Error(), "holds no tokens") {
		t.Fatalf("OpenTokenFile of an empty file: %v", err)
	}
	writeTokens(t, path, secretA+" read name=a\n")
	tf, err := guard.OpenTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if tf.Path() != path || tf.Tokens().Len() != 1 {
		t.Fatalf("opened: %s, %d tokens", tf.Path(), tf.Tokens().Len())
	}
	first := tf.Tokens()

	// No change: the same set stays.
	if changed, err := tf.Reload(); changed || err != nil {
		t.Fatalf("Reload of an unchanged file: %v %v", changed, err)
	}
	if tf.Tokens() != first {
		t.Fatal("an unchanged file produced a new set")
	}

	// A change: B added, A revoked.
	writeTokens(t, path, secretB+" write name=b\n")
	if changed, err := tf.Reload(); !changed || err != nil {
		t.Fatalf("Reload of a changed file: %v %v", changed, err)
	}
	if _, ok := tf.Tokens().Lookup(secretA); ok {
		t.Fatal("a removed token is still accepted")
	}
	if tok, ok := tf.Tokens().Lookup(secretB); !ok || tok.Name != "b" {
		t.Fatalf("the added token: %+v %v", tok, ok)
	}
	if _, ok := first.Lookup(secretA); !ok {
		t.Fatal("an earlier set changed under its holder")
	}

	// Broken: an error, B stays in force.
	second := tf.Tokens()
	for _, c := range []struct {
		name, text string
		frag       string
	}{
		{"broken", secretB + " write name=b\n" + secretC + " superuser\n", "line 2"},
	} {
		writeTokens(t, path, c.text)
		changed, err := tf.Reload()
		if changed || !errors.Is(err, guard.ErrBadTokens) || !strings.Contains(err.Error(), c.frag) {
			t.Fatalf("%s file: %v %v, want an error naming %q", c.name, changed, err, c.frag)
		}
		if tf.Tokens() != second {
			t.Fatalf("%s file replaced the tokens in force", c.name)
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// Deleted: every token is revoked (once; reloading again changes
	// nothing).
	if changed, err := tf.Reload(); !changed || err != nil || tf.Tokens().Len() != 0 {
		t.Fatalf("removed file: %v %v, %d tokens", changed, err, tf.Tokens().Len())
	}
	if changed, err := tf.Reload(); changed || err != nil || tf.Tokens().Len() != 0 {
		t.Fatalf("removed file, reloaded again: %v %v", changed, err)
	}
	// Fixed again: reloaded.
	writeTokens(t, path, secretB+" write name=b\n"+secretC+" read\n")
	if changed, err := tf.Reload(); !changed || err != nil || tf.Tokens().Len() != 2 {
		t.Fatalf("repaired file: %v %v", changed, err)
	}
	// Emptied of tokens: every token is revoked (a first load refuses such
	// a file; a reload applies it).
	writeTokens(t, path, "# all revoked\n")
	if changed, err := tf.Reload(); !changed || err != nil || tf.Tokens().Len() != 0 {
		t.Fatalf("emptied file: %v %v, %d tokens", changed, err, tf.Tokens().Len())
	}
	if _, ok := tf.Tokens().Lookup(secretB); ok {
		t.Fatal("a token of the emptied file is still accepted")
	}
}

func TestTokenAppendLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	tok, err := guard.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if err := guard.AppendTokenLine(path, guard.HashToken(tok)+" read name=first"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("created with mode %v, want 0600", fi.Mode().Perm())
	}
	// A file whose last line has no newline gets one before the new line.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("# no newline at the end"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := guard.AppendTokenLine(path, secretA+" write name=second"); err != nil {
		t.Fatal(err)
	}
	tf, err := guard.OpenTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := tf.Tokens().Lookup(tok); !ok || a.Name != "first" || a.Scope != guard.ScopeRead {
		t.Fatalf("first: %+v %v", a, ok)
	}
	if b, ok := tf.Tokens().Lookup(secretA); !ok || b.Name != "second" || b.Scope != guard.ScopeWrite {
		t.Fatalf("second: %+v %v", b, ok)
	}

	// Lines that would break the file are refused; the file is unchanged.
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		secretA + " read",               // the same token again
		guard.HashToken(tok) + " write", // its hash again
		secretB + " root",               // bad scope
		"too-short read",                // short secret
		secretB + " read expires=soon",  // bad expiry
	} {
		err := guard.AppendTokenLine(path, line)
		if !errors.Is(err, guard.ErrBadTokens) {
			t.Errorf("AppendTokenLine(%q): %v, want ErrBadTokens", line, err)
		}
		after, _ := os.ReadFile(path)
		if string(after) != string(before) {
			t.Fatalf("AppendTokenLine(%q) changed the file", line)
		}
	}
	// An unreadable directory entry is an error, not a new file.
	if err := guard.AppendTokenLine(t.TempDir(), secretB+" read"); err == nil {
		t.Fatal("AppendTokenLine to a directory succeeded")
	}
}

func TestTokenNew(t *testing.T) {
	seen := map[string]bool{}
	for range 64 {
		tok, err := guard.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok, "tsf_") || len(tok) < guard.MinTokenLength || len(tok) != 4+43 {
			t.Fatalf("NewToken %q", tok)
		}
		if seen[tok] {
			t.Fatalf("NewToken repeated %q", tok)
		}
		seen[tok] = true
		// Every token it makes is one a tokens file accepts.
		set, err := guard.ParseTokens(strings.NewReader(tok+" read"), "new")
		if err != nil || set.Len() != 1 {
			t.Fatalf("a new token is refused: %v", err)
		}
	}
	h := guard.HashToken("tsf_example-token-000")
	if !strings.HasPrefix(h, "sha256:") || len(h) != 7+64 || h != guard.HashToken("tsf_example-token-000") || h == guard.HashToken("tsf_example-token-001") {
		t.Fatalf("HashToken %q", h)
	}
}
