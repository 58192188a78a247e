package flightserver

import (
	"net/url"
	"regexp"
	"strings"
)

// urlRoot matches a root written as a URL: a scheme (RFC 3986: a letter,
// then letters, digits, '+', '-', '.') and "://". A Windows drive path
// (C:\data) has no "//" after its colon.
var urlRoot = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*)://`)

// CheckLocalRoot refuses a root that looks like a URL (s3://bucket/x,
// gs://…, file:///srv/data): this build serves tables in a local
// directory only, and without the check such a root becomes a local
// directory named "s3:". The message names the scheme, never the rest of
// the URL (its query may hold credentials), and says what to do instead.
func CheckLocalRoot(root string) error {
	m := urlRoot.FindStringSubmatch(root)
	if m == nil {
		return nil
	}
	scheme := m[1]
	if strings.EqualFold(scheme, "file") {
		hint := "give the directory's path instead"
		if u, err := url.Parse(root); err == nil && u.Path != "" && (u.Host == "" || u.Host == "localhost") && u.RawQuery == "" {
			hint = "give the path itself: " + u.Path
		}
		return Status(invalidf("root %s://… is a URL (scheme %q): this build takes a local directory as a plain path; %s", scheme, scheme, hint))
	}
	return Status(invalidf("root %s://… is a URL (scheme %q): this build serves tables in a local directory only (object storage is planned, not built); "+
		"for now, mount the bucket as a directory (for example with rclone mount, s3fs or gcsfuse) and give the mount point, or give a local path", scheme, scheme))
}
