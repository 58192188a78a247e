package s3store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// Options tunes an [FS]. The zero value of a field takes its default.
type Options struct {
	// Attempts is how many times a request is sent before a transient
	// error is returned (default 6).
	Attempts int
	// BaseBackoff is the wait before the first retry; it doubles with
	// every retry, up to MaxBackoff, with jitter (defaults 50 ms and 2 s).
	BaseBackoff, MaxBackoff time.Duration
	// AttemptTimeout bounds one request, including reading its answer
	// (default 60 s). A request that times out after it was sent has an
	// unknown outcome and is treated as described in the package doc.
	AttemptTimeout time.Duration
	// ListPageSize is the most keys one LIST request asks for (0: the
	// store's default, 1000 on S3). Tests set it small to exercise paging.
	ListPageSize int32
}

// FS is a [storage.FS] on the keys under a prefix of one S3 bucket. It is
// safe for concurrent use; see the package doc for what each method does.
type FS struct {
	client *s3.Client
	bucket string
	prefix string // "" or ending in "/"
	r      retrier
	page   *int32 // MaxKeys of a LIST; nil for the store's default
}

var _ storage.FS = (*FS)(nil)

// metaToken is the user-metadata key that carries the random token of a
// conditional create, so that an unknown outcome can be resolved by
// reading the object back. S3 returns metadata keys in lower case.
const metaToken = "tsflight-put"

// New returns the FS of the keys under prefix in bucket, reached through
// client. prefix is a slash-separated path valid for [io/fs.ValidPath]
// ("" or "." for the whole bucket). The bucket must exist. The client's
// own retries are turned off for every call: the FS retries itself, so
// that it can tell a conditional create that failed from one whose outcome
// is unknown.
func New(client *s3.Client, bucket, prefix string, opts *Options) (*FS, error) {
	if client == nil {
		return nil, errors.New("s3store: no S3 client")
	}
	if bucket == "" {
		return nil, errors.New("s3store: empty bucket name")
	}
	if prefix == "" {
		prefix = "."
	}
	if !fs.ValidPath(prefix) {
		return nil, fmt.Errorf("s3store: prefix %q: %w", prefix, storage.ErrInvalidPath)
	}
	p := ""
	if prefix != "." {
		p = prefix + "/"
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	r := retrier{attempts: o.Attempts, base: o.BaseBackoff, max: o.MaxBackoff, attemptTimeout: o.AttemptTimeout}
	if r.attempts <= 0 {
		r.attempts = 6
	}
	if r.base <= 0 {
		r.base = 50 * time.Millisecond
	}
	if r.max <= 0 {
		r.max = 2 * time.Second
	}
	if r.attemptTimeout <= 0 {
		r.attemptTimeout = 60 * time.Second
	}
	f := &FS{client: client, bucket: bucket, prefix: p, r: r}
	if o.ListPageSize > 0 {
		f.page = aws.Int32(o.ListPageSize)
	}
	return f, nil
}

// Location returns the bucket and the prefix of f ("." for the whole
// bucket).
func (f *FS) Location() (bucket, prefix string) {
	if f.prefix == "" {
		return f.bucket, "."
	}
	return f.bucket, strings.TrimSuffix(f.prefix, "/")
}

// noRetry turns off the client's retryer for one call.
func noRetry(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

// check rejects a path that is not valid, as the other implementations do.
func check(op, name string) error {
	if fs.ValidPath(name) {
		return nil
	}
	return fmt.Errorf("%s %q: %w", op, name, storage.ErrInvalidPath)
}

// check2 checks the two paths of a Link, Rename or Exchange.
func check2(op, a, b string) error {
	if err := check(op, a); err != nil {
		return err
	}
	return check(op, b)
}

// existErr is the error of a conditional create of name that lost:
// fs.ErrExist when errLost says so.
func existErr(op, name string, err error) error {
	if errors.Is(err, errLost) {
		return pathErr(op, name, fmt.Errorf("%w (%v)", fs.ErrExist, err))
	}
	return s3Err(op, name, err)
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// A name that is a directory, or is not one, fails with the errno
// LocalFS would give (syscall.EISDIR, ENOTDIR, ENOTEMPTY).
var (
	errRoot      = errors.New("is the root directory")
	errReplaced  = errors.New("the object was replaced or removed since it was created or opened")
	errAmbiguous = errors.New("the outcome of a conditional create is unknown: the store did not answer, and reading the key back failed")
)

// s3Err turns an error of an S3 call on name into one the callers of a
// storage.FS understand: a 404 wraps fs.ErrNotExist.
func s3Err(op, name string, err error) error {
	if classify(err) == missing {
		return pathErr(op, name, fmt.Errorf("%w (%v)", fs.ErrNotExist, err))
	}
	return pathErr(op, name, err)
}

// key is the object key of a valid name other than ".".
func (f *FS) key(name string) string { return f.prefix + name }

// dirPrefix is the key prefix under which the entries of directory dir
// live.
func (f *FS) dirPrefix(dir string) string {
	if dir == "." {
		return f.prefix
	}
	return f.prefix + dir + "/"
}

// object is what a GET returned.
type object struct {
	data  []byte
	etag  string
	token string
}

// get reads the whole object key.
func (f *FS) get(key string) (object, error) {
	var obj object
	err := f.r.do(func(ctx context.Context) (err error) {
		obj, err = f.getOnce(ctx, key)
		return err
	})
	return obj, err
}

// getOnce is one GET of key, without retries.
func (f *FS) getOnce(ctx context.Context, key string) (object, error) {
	out, err := f.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &f.bucket, Key: &key}, noRetry)
	if err != nil {
		return object{}, err
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return object{}, err
	}
	return object{data: data, etag: aws.ToString(out.ETag), token: out.Metadata[metaToken]}, nil
}

// head describes the object key.
func (f *FS) head(key string) (*s3.HeadObjectOutput, error) {
	var out *s3.HeadObjectOutput
	err := f.r.do(func(ctx context.Context) error {
		var err error
		out, err = f.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &f.bucket, Key: &key}, noRetry)
		return err
	})
	return out, err
}

// hasKeysUnder reports whether some key starts with prefix: a "directory"
// exists exactly then.
func (f *FS) hasKeysUnder(prefix string) (bool, error) {
	var found bool
	err := f.r.do(func(ctx context.Context) error {
		out, err := f.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &f.bucket, Prefix: &prefix, MaxKeys: aws.Int32(1)}, noRetry)
		if err != nil {
			return err
		}
		found = len(out.Contents) > 0
		return nil
	})
	return found, err
}

// putUnconditional stores data at key, replacing what is there.
func (f *FS) putUnconditional(key string, data []byte) (string, error) {
	var etag string
	err := f.r.do(func(ctx context.Context) error {
		out, err := f.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &f.bucket, Key: &key, Body: bytes.NewReader(data)}, noRetry)
		if err != nil {
			return err
		}
		etag = aws.ToString(out.ETag)
		return nil
	})
	return etag, err
}

// newToken returns a random token that identifies one conditional create.
func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// putCond stores data at key on a condition: with ifMatch empty the key must
// not exist (If-None-Match: *), else its ETag must be ifMatch. It returns
// the new ETag, or an error wrapping errLost when the condition failed
// (HTTP 412, or 409 for a concurrent conditional write: a lost race).
//
// A request that fails transiently (no answer, a timeout, a 5xx) may still
// have stored the object. Before it is sent again, and whenever the
// condition fails after such a request, the key is read back: when it holds
// this call's token and bytes, the earlier request did store it and putCond
// succeeds; when it holds something else, the condition failed; when it is
// absent (for If-None-Match), the request is sent again. No outcome is
// guessed: if the key cannot be read back either, the error wraps
// errAmbiguous.
func (f *FS) putCond(key string, data []byte, ifMatch string) (string, error) {
	token := newToken()
	in := &s3.PutObjectInput{Bucket: &f.bucket, Key: &key, Metadata: map[string]string{metaToken: token}}
	if ifMatch == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(ifMatch)
	}
	// readBack tells whether the key now holds this call's write
	// (mine), holds nothing (absent), or holds something else, with its
	// ETag. With once it makes one GET (the loop below retries it);
	// otherwise the GET is retried like any other.
	readBack := func(once bool) (etag string, mine, absent bool, err error) {
		var obj object
		if once {
			ctx, cancel := f.r.ctx()
			obj, err = f.getOnce(ctx, key)
			cancel()
		} else {
			obj, err = f.get(key)
		}
		if classify(err) == missing {
			return "", false, true, nil
		}
		if err != nil {
			return "", false, false, err
		}
		return obj.etag, obj.token == token && bytes.Equal(obj.data, data), false, nil
	}
	unknown := false // an earlier attempt may have stored the object
	var lastErr error
	for n := range f.r.attempts {
		if n > 0 {
			f.r.wait(n)
		}
		if unknown {
			etag, mine, absent, err := readBack(true)
			switch {
			case err != nil && classify(err) != transient:
				return "", fmt.Errorf("%w: %w", errAmbiguous, err)
			case err != nil:
				lastErr = err
				continue
			case mine:
				return etag, nil
			case ifMatch == "" && !absent:
				return "", errLost // another writer created the key
			case ifMatch != "" && etag != ifMatch:
				return "", errLost // the key was replaced or removed
			}
			// Otherwise the earlier attempt did nothing: send it again.
		}
		in.Body = bytes.NewReader(data)
		ctx, cancel := f.r.ctx()
		out, err := f.client.PutObject(ctx, in, noRetry)
		cancel()
		if err == nil {
			return aws.ToString(out.ETag), nil
		}
		lastErr = err
		switch classify(err) {
		case precondition, conflict:
			if !unknown {
				return "", fmt.Errorf("%w (%v)", errLost, err)
			}
			// The condition may have failed on our own earlier attempt:
			// only reading the key back can tell.
			etag, mine, _, rerr := readBack(false)
			switch {
			case rerr != nil:
				return "", fmt.Errorf("%w: %w", errAmbiguous, rerr)
			case mine:
				return etag, nil
			}
			return "", fmt.Errorf("%w (%v)", errLost, err)
		case transient:
			unknown = true
		default:
			return "", err
		}
	}
	if unknown {
		return "", fmt.Errorf("%w: %w", errAmbiguous, lastErr)
	}
	return "", lastErr
}

// errLost is wrapped by putCond when its condition did not hold.
var errLost = errors.New("the precondition failed: another writer holds the key")

// ReadFile is one GET of the whole object. A name that is only a
// "directory" (a prefix of other keys) is reported as not existing.
func (f *FS) ReadFile(name string) ([]byte, error) {
	if err := check("read", name); err != nil {
		return nil, err
	}
	if name == "." {
		return nil, pathErr("read", name, syscall.EISDIR)
	}
	obj, err := f.get(f.key(name))
	if err != nil {
		return nil, s3Err("read", name, err)
	}
	return obj.data, nil
}

// Open is a HEAD for the size and ETag; the Reader then reads with ranged
// GETs (If-Match on that ETag, so it reads one version of the object or
// fails). It reads nothing ahead and caches nothing.
func (f *FS) Open(name string) (storage.Reader, error) {
	if err := check("open", name); err != nil {
		return nil, err
	}
	if name == "." {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	out, err := f.head(f.key(name))
	if err != nil {
		return nil, s3Err("open", name, err)
	}
	return &reader{f: f, name: name, key: f.key(name), size: aws.ToInt64(out.ContentLength), etag: aws.ToString(out.ETag)}, nil
}

// Stat is a HEAD; when there is no such object, a LIST of one key under
// name + "/" tells whether name is a directory. ModTime is the object's
// Last-Modified (whole seconds on most stores); a directory has none.
func (f *FS) Stat(name string) (storage.FileInfo, error) {
	if err := check("stat", name); err != nil {
		return storage.FileInfo{}, err
	}
	if name == "." {
		return storage.FileInfo{IsDir: true}, nil
	}
	out, err := f.head(f.key(name))
	if err == nil {
		return storage.FileInfo{Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified)}, nil
	}
	if classify(err) != missing {
		return storage.FileInfo{}, s3Err("stat", name, err)
	}
	dir, lerr := f.hasKeysUnder(f.dirPrefix(name))
	if lerr != nil {
		return storage.FileInfo{}, s3Err("stat", name, lerr)
	}
	if !dir {
		return storage.FileInfo{}, s3Err("stat", name, err)
	}
	return storage.FileInfo{IsDir: true}, nil
}

// Create returns a File that buffers what is written in memory. No request
// is made yet: the object is stored (one unconditional PUT of the whole
// content) by Sync and by Close, so an existing object keeps its old content
// until then.
func (f *FS) Create(name string) (storage.File, error) {
	if err := check("create", name); err != nil {
		return nil, err
	}
	if name == "." {
		return nil, pathErr("create", name, syscall.EISDIR)
	}
	return &file{f: f, name: name, key: f.key(name)}, nil
}

// CreateExclusive claims name at once with a conditional PUT of an empty
// object (If-None-Match: *), so it fails with fs.ErrExist exactly when the
// object exists, as O_CREAT|O_EXCL does. The File then buffers, and Sync
// and Close store the whole content with If-Match on the ETag of the
// previous PUT, so a File never overwrites an object someone else put at
// its name in between.
func (f *FS) CreateExclusive(name string) (storage.File, error) {
	if err := check("create", name); err != nil {
		return nil, err
	}
	if name == "." {
		return nil, pathErr("create", name, fs.ErrExist)
	}
	etag, err := f.putCond(f.key(name), nil, "")
	if err != nil {
		return nil, existErr("create", name, err)
	}
	return &file{f: f, name: name, key: f.key(name), etag: etag, exclusive: true, stored: true}, nil
}

// Link reads oldname (one GET) and creates newname with the same bytes by a
// conditional PUT (If-None-Match: *): a 412, or a 409, is fs.ErrExist, so
// exactly one of several writers linking the same new name wins. Unlike a
// hard link the two names are two objects from then on. (A server-side
// CopyObject would save moving the bytes, but most stores ignore
// If-None-Match on a copy; see the package doc.)
func (f *FS) Link(oldname, newname string) error {
	if err := check2("link", oldname, newname); err != nil {
		return err
	}
	if oldname == "." {
		return pathErr("link", oldname, syscall.EISDIR)
	}
	obj, err := f.get(f.key(oldname))
	if err != nil {
		return s3Err("link", oldname, err)
	}
	if newname == "." {
		return pathErr("link", newname, fs.ErrExist)
	}
	if _, err := f.putCond(f.key(newname), obj.data, ""); err != nil {
		return existErr("link", newname, err)
	}
	return nil
}

// copyObject copies the object src to dst on the server, replacing dst.
func (f *FS) copyObject(src, dst string) error {
	source := f.bucket + "/" + escapeKey(src)
	return f.r.do(func(ctx context.Context) error {
		_, err := f.client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &f.bucket, Key: &dst, CopySource: &source}, noRetry)
		return err
	})
}

// escapeKey escapes a key for the x-amz-copy-source header: every byte but
// the unreserved ones and "/" is percent-encoded.
func escapeKey(key string) string {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~/", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// deleteKey deletes key; S3 answers a DELETE of a missing key with success.
func (f *FS) deleteKey(key string) error {
	return f.r.do(func(ctx context.Context) error {
		_, err := f.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &f.bucket, Key: &key}, noRetry)
		return err
	})
}

// Rename of a file is a server-side CopyObject onto newname followed by a
// DELETE of oldname. It is not atomic as a whole: for a moment both names
// exist, and a crash between the two leaves both. The replacement of
// newname itself is atomic (a reader sees its old or its new content, never
// a mix), which is what publishing CURRENT, the only rename on a table's
// hot path, needs. A directory (a prefix) is renamed key by key, copy then
// delete, with no atomicity at all; only the format-6 upgrade renames
// directories, and it should be run on a local copy.
func (f *FS) Rename(oldname, newname string) error {
	if err := check2("rename", oldname, newname); err != nil {
		return err
	}
	if oldname == "." || newname == "." {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errRoot}
	}
	if oldname == newname {
		return nil
	}
	err := f.copyObject(f.key(oldname), f.key(newname))
	if err == nil {
		if err := f.deleteKey(f.key(oldname)); err != nil {
			return s3Err("rename", oldname, err)
		}
		return nil
	}
	if classify(err) != missing {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	if strings.HasPrefix(newname, oldname+"/") {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: errors.New("cannot move a directory inside itself")}
	}
	keys, lerr := f.listAll(f.dirPrefix(oldname))
	if lerr != nil {
		return s3Err("rename", oldname, lerr)
	}
	if len(keys) == 0 {
		return s3Err("rename", oldname, err)
	}
	from, to := f.dirPrefix(oldname), f.dirPrefix(newname)
	for _, k := range keys {
		if err := f.copyObject(k, to+strings.TrimPrefix(k, from)); err != nil {
			return s3Err("rename", oldname, err)
		}
	}
	for _, k := range keys {
		if err := f.deleteKey(k); err != nil {
			return s3Err("rename", oldname, err)
		}
	}
	return nil
}

// listAll returns every key under prefix, at any depth.
func (f *FS) listAll(prefix string) ([]string, error) {
	var keys []string
	var token *string
	for {
		var out *s3.ListObjectsV2Output
		err := f.r.do(func(ctx context.Context) error {
			var err error
			out, err = f.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &f.bucket, Prefix: &prefix, ContinuationToken: token, MaxKeys: f.page}, noRetry)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
		if !aws.ToBool(out.IsTruncated) {
			return keys, nil
		}
		token = out.NextContinuationToken
	}
}

// Exchange is not possible on S3: it changes nothing and returns an error
// wrapping [storage.ErrExchangeUnsupported].
func (f *FS) Exchange(a, b string) error {
	if err := check2("exchange", a, b); err != nil {
		return err
	}
	return &os.LinkError{Op: "exchange", Old: a, New: b, Err: storage.ErrExchangeUnsupported}
}

// Remove is a HEAD, then a DELETE. The HEAD is there because S3 answers a
// DELETE of a missing key with success, and callers of a storage.FS are
// told about a missing file with fs.ErrNotExist. A name that is a
// directory with keys under it fails with "directory not empty"; since
// empty directories do not exist on S3 (see MkdirAll), removing one reports
// fs.ErrNotExist, which every caller in tableformat accepts.
func (f *FS) Remove(name string) error {
	if err := check("remove", name); err != nil {
		return err
	}
	if name == "." {
		return pathErr("remove", name, errRoot)
	}
	_, err := f.head(f.key(name))
	if err == nil {
		if err := f.deleteKey(f.key(name)); err != nil {
			return s3Err("remove", name, err)
		}
		return nil
	}
	if classify(err) != missing {
		return s3Err("remove", name, err)
	}
	dir, lerr := f.hasKeysUnder(f.dirPrefix(name))
	if lerr != nil {
		return s3Err("remove", name, lerr)
	}
	if dir {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	return s3Err("remove", name, err)
}

// List is ListObjectsV2 of the directory's prefix with delimiter "/",
// page by page: objects are files, common prefixes directories. The names
// are sorted and unique. A directory with nothing under it does not exist
// (fs.ErrNotExist), except the root; when the listing is empty, a HEAD
// tells a file (not a directory) from a missing name.
func (f *FS) List(dir string) ([]string, error) {
	if err := check("list", dir); err != nil {
		return nil, err
	}
	prefix := f.dirPrefix(dir)
	var names []string
	var token *string
	for {
		var out *s3.ListObjectsV2Output
		err := f.r.do(func(ctx context.Context) error {
			var err error
			out, err = f.client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &f.bucket, Prefix: &prefix, Delimiter: aws.String("/"), ContinuationToken: token, MaxKeys: f.page}, noRetry)
			return err
		})
		if err != nil {
			return nil, s3Err("list", dir, err)
		}
		for _, o := range out.Contents {
			names = appendName(names, aws.ToString(o.Key), prefix)
		}
		for _, p := range out.CommonPrefixes {
			names = appendName(names, strings.TrimSuffix(aws.ToString(p.Prefix), "/"), prefix)
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		token = out.NextContinuationToken
	}
	if len(names) == 0 && dir != "." {
		if _, err := f.head(f.key(dir)); err == nil {
			return nil, pathErr("list", dir, syscall.ENOTDIR)
		} else {
			return nil, s3Err("list", dir, err)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// appendName appends the entry name of key under prefix, skipping a
// "directory marker" (the key prefix itself, which some tools create).
func appendName(names []string, key, prefix string) []string {
	name := strings.TrimPrefix(key, prefix)
	if name == "" {
		return names
	}
	return append(names, name)
}

// MkdirAll only checks the path. S3 has no directories: a directory
// exists while some key lies under it, and a PUT of a key needs no parent.
// Creating marker objects would cost a request per level and would still
// not make a directory outlive its last file.
func (f *FS) MkdirAll(dir string) error {
	return check("mkdir", dir)
}

// SyncDir only checks the path. An object is durable, and visible to GET
// and LIST, as soon as the PUT (or COPY, or DELETE) that made it was
// answered: there is no directory entry to sync apart from the object.
func (f *FS) SyncDir(dir string) error {
	return check("syncdir", dir)
}
