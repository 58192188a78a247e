package guard

// Tokens: the secrets clients authenticate with, each with a scope, an
// optional name and an optional expiry, read from a tokens file (or text
// of the same form) and kept in memory only as SHA-256 hashes.

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
)

// Scope is what a credential allows.
type Scope int

const (
	// ScopeNone allows nothing; it is the zero value.
	ScopeNone Scope = iota
	// ScopeRead allows listing, describing and reading tables: ListFlights,
	// GetFlightInfo, GetSchema, DoGet, ListActions, SQL queries and
	// metadata, prepared queries, and the actions describe-table, coverage,
	// gaps, coverage-grid, last and vacuum without apply.
	ScopeRead
	// ScopeWrite allows everything ScopeRead does and every call that
	// changes a table: DoPut (append), bulk ingest, create-table,
	// add-columns and vacuum with apply.
	ScopeWrite
)

func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	}
	return "none"
}

// ParseScope reads "read" or "write".
func ParseScope(s string) (Scope, error) {
	switch s {
	case "read":
		return ScopeRead, nil
	case "write":
		return ScopeWrite, nil
	}
	return ScopeNone, fmt.Errorf("%w: scope %q: want read or write", ErrBadTokens, s)
}

// ErrBadTokens is the category of every error reading tokens.
var ErrBadTokens = errors.New("bad tokens")

// Token is one accepted credential. It never holds the secret.
type Token struct {
	// Name identifies the token in logs and error messages; when the
	// tokens file gives none, it is the first 12 hex digits of the hash
	// ("sha256:9f86d081884c").
	Name string
	// Scope is what the token allows.
	Scope Scope
	// Expires is when the token stops being accepted (zero: never).
	Expires time.Time
	// ID is "sha256:" and the first 12 hex digits of the token's hash: it
	// tells tokens apart without revealing anything usable.
	ID string
}

// Expired reports whether the token is no longer accepted at now.
func (t Token) Expired(now time.Time) bool {
	return !t.Expires.IsZero() && !now.Before(t.Expires)
}

// MinTokenLength is the shortest secret a tokens file may hold in clear:
// a token is the whole credential, so it must not be guessable.
const MinTokenLength = 16

// hashPrefix starts a hashed token in a tokens file.
const hashPrefix = "sha256:"

// tokenPrefix starts every token NewToken makes, so that a leaked one is
// recognisable (secret scanners, logs).
const tokenPrefix = "tsf_"

// NewToken returns a fresh random secret: "tsf_" and 43 characters of
// URL-safe base64 (256 random bits).
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generating a token: %w", err)
	}
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashToken returns the form a tokens file stores a secret in:
// "sha256:" and 64 hex digits. Secrets are random and long (NewToken), so
// one SHA-256 is enough to make the file useless to whoever reads it; a
// slow password hash would cost every call its time.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// TokenSet is an immutable set of tokens, looked up by secret.
type TokenSet struct {
	byHash map[[sha256.Size]byte]Token
}

// Len is the number of tokens in the set.
func (s *TokenSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.byHash)
}

// Lookup returns the token whose secret is secret. Expiry is not checked
// here (see Token.Expired).
func (s *TokenSet) Lookup(secret string) (Token, bool) {
	if s == nil || secret == "" {
		return Token{}, false
	}
	t, ok := s.byHash[sha256.Sum256([]byte(secret))]
	return t, ok
}

// ParseTokens reads tokens in the tokens-file form, one per line:
//
//	# comment
//	SECRET-OR-HASH SCOPE [name=NAME] [expires=TIME]
//
// SECRET-OR-HASH is the secret itself (at least MinTokenLength
// characters, no spaces) or "sha256:" and the 64 hex digits of its
// HashToken. SCOPE is read or write. TIME is an RFC 3339 time
// (2027-01-31T00:00:00Z) or a date (2027-01-31, midnight UTC). Blank
// lines and lines starting with # are skipped; ';' also ends an entry, so
// that a whole set fits in one environment variable. source names the
// input in errors. An error names the line and never quotes a secret.
func ParseTokens(r io.Reader, source string) (*TokenSet, error) {
	set := &TokenSet{byHash: map[[sha256.Size]byte]Token{}}
	lines := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		for entry := range strings.SplitSeq(sc.Text(), ";") {
			entry = strings.TrimSpace(entry)
			if entry == "" || strings.HasPrefix(entry, "#") {
				continue
			}
			hash, tok, err := parseTokenEntry(entry)
			if err != nil {
				return nil, fmt.Errorf("%s line %d: %w", source, n, err)
			}
			if prev, dup := lines[hash]; dup {
				return nil, fmt.Errorf("%w: %s line %d: the same token as line %d", ErrBadTokens, source, n, prev)
			}
			lines[hash] = n
			set.byHash[hash] = tok
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: reading %s: %v", ErrBadTokens, source, err)
	}
	return set, nil
}

func parseTokenEntry(entry string) ([sha256.Size]byte, Token, error) {
	var hash [sha256.Size]byte
	fields := strings.Fields(entry)
	if len(fields) < 2 {
		return hash, Token{}, fmt.Errorf("%w: want TOKEN SCOPE [name=NAME] [expires=TIME], got %d field(s)", ErrBadTokens, len(fields))
	}
	secret := fields[0]
	if hexDigits, ok := strings.CutPrefix(secret, hashPrefix); ok {
		b, err := hex.DecodeString(hexDigits)
		if err != nil || len(b) != sha256.Size {
			return hash, Token{}, fmt.Errorf("%w: a hashed token is sha256: and 64 hex digits", ErrBadTokens)
		}
		copy(hash[:], b)
	} else {
		if len(secret) < MinTokenLength {
			return hash, Token{}, fmt.Errorf("%w: a token must be at least %d characters (tsflight token new makes one)", ErrBadTokens, MinTokenLength)
		}
		if strings.IndexFunc(secret, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) }) >= 0 {
			return hash, Token{}, fmt.Errorf("%w: a token must be printable ASCII (it travels in a gRPC header)", ErrBadTokens)
		}
		hash = sha256.Sum256([]byte(secret))
	}
	scope, err := ParseScope(fields[1])
	if err != nil {
		return hash, Token{}, fmt.Errorf("%w: scope %s: want read or write", ErrBadTokens, quoteField(fields[1]))
	}
	tok := Token{Scope: scope}
	for _, kv := range fields[2:] {
		key, val, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return hash, Token{}, fmt.Errorf("%w: %s: want name=NAME or expires=TIME", ErrBadTokens, quoteField(kv))
		case key == "name" && val != "" && tok.Name == "":
			tok.Name = val
		case key == "expires" && tok.Expires.IsZero():
			t, err := parseExpiry(val)
			if err != nil {
				return hash, Token{}, err
			}
			tok.Expires = t
		case key == "name" || key == "expires":
			return hash, Token{}, fmt.Errorf("%w: %s= given twice or empty", ErrBadTokens, key)
		default:
			return hash, Token{}, fmt.Errorf("%w: unknown attribute %s (want name= or expires=)", ErrBadTokens, quoteField(key))
		}
	}
	tok.ID = hashPrefix + hex.EncodeToString(hash[:6])
	if tok.Name == "" {
		tok.Name = tok.ID
	}
	return hash, tok, nil
}

// quoteField quotes a field of a tokens line for an error message unless
// it could be a secret: a field as long as a token is not quoted (two
// tokens run together on one line put a secret where the scope or an
// attribute is expected).
func quoteField(s string) string {
	if len(s) >= MinTokenLength {
		return fmt.Sprintf("of %d characters (not quoted: it may be a token)", len(s))
	}
	return strconv.Quote(s)
}

func parseExpiry(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%w: expires=%q: want an RFC 3339 time (2027-01-31T00:00:00Z) or a date (2027-01-31)", ErrBadTokens, s)
}

// TokenFile is a tokens file kept loaded: Tokens is the set read last,
// Reload reads the file again when it changed. A reload that fails keeps
// the previous set (and says why), as a configuration reload should.
type TokenFile struct {
	path string
	set  atomic.Pointer[TokenSet]
	mu   sync.Mutex // serialises reloads
	sum  [sha256.Size]byte
}

// OpenTokenFile reads the tokens file at path (see ParseTokens). A file
// with no tokens is an error: it would lock every client out.
func OpenTokenFile(path string) (*TokenFile, error) {
	f := &TokenFile{path: path}
	if _, err := f.Reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// Path is the file's path.
func (f *TokenFile) Path() string { return f.path }

// Tokens returns the set read last.
func (f *TokenFile) Tokens() *TokenSet { return f.set.Load() }

// Reload reads the file again and reports whether its content changed. On
// an error (a line that does not parse, a file that cannot be read) the
// previous set stays in force. A file emptied of tokens, or deleted,
// applies: every token is revoked.
func (f *TokenFile) Reload() (changed bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	data, err := os.ReadFile(f.path)
	if errors.Is(err, os.ErrNotExist) && f.set.Load() != nil {
		// A tokens file deleted while serving revokes every token: a
		// server must not go on accepting what its file no longer lists.
		// (Editors and config tools replace files by renaming, so a
		// missing file is not a moment of an ordinary edit.)
		if f.set.Load().Len() == 0 && f.sum == ([sha256.Size]byte{}) {
			return false, nil
		}
		f.sum = [sha256.Size]byte{}
		f.set.Store(&TokenSet{byHash: map[[sha256.Size]byte]Token{}})
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("%w: tokens file: %v", ErrBadTokens, err)
	}
	sum := sha256.Sum256(data)
	if f.set.Load() != nil && sum == f.sum {
		return false, nil
	}
	set, err := ParseTokens(bytes.NewReader(data), f.path)
	if err != nil {
		return false, err
	}
	// A first load without tokens is a mistake (the server would refuse
	// everyone from the start); a reload without tokens is every token
	// revoked, and applies.
	if set.Len() == 0 && f.set.Load() == nil {
		return false, fmt.Errorf("%w: %s holds no tokens: every client would be refused", ErrBadTokens, f.path)
	}
	f.sum = sum
	f.set.Store(set)
	return true, nil
}

// AppendTokenLine adds one token line to the tokens file at path, creating
// it readable by its owner only. It refuses a line that would make the
// file unreadable (the whole file is parsed with the line added).
func AppendTokenLine(path, line string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var text []byte
	text = append(text, old...)
	if len(text) > 0 && text[len(text)-1] != '\n' {
		text = append(text, '\n')
	}
	text = append(text, line...)
	text = append(text, '\n')
	if _, err := ParseTokens(bytes.NewReader(text), path); err != nil {
		return err
	}
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	add := text[len(old):]
	if _, err := w.Write(add); err != nil {
		w.Close()
		return err
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// readValidTokens reads the tokens file at path and checks that it parses.
func readValidTokens(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: tokens file: %v", ErrBadTokens, err)
	}
	if _, err := ParseTokens(bytes.NewReader(data), path); err != nil {
		return nil, err
	}
	return data, nil
}

// ListTokens returns the tokens of the tokens file at path, in file order.
func ListTokens(path string) ([]Token, error) {
	data, err := readValidTokens(path)
	if err != nil {
		return nil, err
	}
	var out []Token
	for _, line := range strings.Split(string(data), "\n") {
		for entry := range strings.SplitSeq(line, ";") {
			if entry = strings.TrimSpace(entry); entry != "" && !strings.HasPrefix(entry, "#") {
				_, tok, _ := parseTokenEntry(entry) // parsed above
				out = append(out, tok)
			}
		}
	}
	return out, nil
}

// RemoveTokens rewrites the tokens file at path without the tokens match
// selects, keeping every other line (comments included) as it was, and
// returns the removed tokens. The new file replaces the old one whole
// (written aside, synced, renamed), so a running server never reads half
// of it. Nothing is written when nothing matches.
func RemoveTokens(path string, match func(Token) bool) ([]Token, error) {
	data, err := readValidTokens(path)
	if err != nil {
		return nil, err
	}
	var removed []Token
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		var kept []string
		dropped := false
		for entry := range strings.SplitSeq(line, ";") {
			e := strings.TrimSpace(entry)
			if e == "" || strings.HasPrefix(e, "#") {
				kept = append(kept, entry)
				continue
			}
			_, tok, _ := parseTokenEntry(e)
			if match(tok) {
				removed = append(removed, tok)
				dropped = true
				continue
			}
			kept = append(kept, entry)
		}
		switch {
		case !dropped:
			out = append(out, line)
		case strings.TrimSpace(strings.Join(kept, "")) != "":
			out = append(out, strings.TrimSpace(strings.Join(kept, ";")))
		}
	}
	if len(removed) == 0 {
		return nil, nil
	}
	if err := replaceFile(path, []byte(strings.Join(out, "\n"))); err != nil {
		return nil, fmt.Errorf("tokens file %s: %w", path, err)
	}
	return removed, nil
}

// replaceFile writes data to a new file beside path, syncs it and renames
// it over path, keeping path's permissions.
func replaceFile(path string, data []byte) error {
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
