package s3store_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tsflight/tsflight/tableformat/storage"
	"github.com/tsflight/tsflight/tableformat/storage/s3store"
)

// What faultTransport does to a request that a rule matches.
type fault int

const (
	// lostAfter sends the request, lets the server act on it, and then
	// loses the response: the client sees a connection error.
	lostAfter fault = iota + 1
	// lostBefore fails the request before it reaches the server.
	lostBefore
	// error500After sends the request and then answers 500 in place of
	// the server's answer.
	error500After
	// slowDown answers 503 SlowDown without sending the request.
	slowDown
)

// rule injects f into the next n requests with method whose path ends in
// suffix. If run is set, it is called before such a request is sent.
type rule struct {
	method, suffix string
	f              fault
	n              int
	run            func()
}

// faultTransport is an http.RoundTripper between the S3 client and the
// server that injects faults and counts what reaches the server.
type faultTransport struct {
	mu      sync.Mutex
	rules   []*rule
	reached map[string]int // "METHOD suffix-of-path" → requests the server got
}

func newFaultTransport(rules ...*rule) *faultTransport {
	return &faultTransport{rules: rules, reached: map[string]int{}}
}

var errInjected = errors.New("injected: connection reset by peer")

func (ft *faultTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ft.mu.Lock()
	var (
		f   fault
		run func()
	)
	for _, r := range ft.rules {
		if r.n > 0 && req.Method == r.method && strings.HasSuffix(req.URL.Path, r.suffix) {
			r.n--
			f, run = r.f, r.run
			break
		}
	}
	ft.mu.Unlock()
	if run != nil {
		run()
	}
	switch f {
	case lostBefore:
		drain(req)
		return nil, errInjected
	case slowDown:
		drain(req)
		return synthetic(req, http.StatusServiceUnavailable, "SlowDown"), nil
	}
	ft.mu.Lock()
	ft.reached[req.Method+" "+req.URL.Path]++
	ft.mu.Unlock()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || f == 0 {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if f == error500After {
		return synthetic(req, http.StatusInternalServerError, "InternalError"), nil
	}
	return nil, errInjected
}

// count is how many requests with method and a path ending in suffix
// reached the server.
func (ft *faultTransport) count(method, suffix string) int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	n := 0
	for k, v := range ft.reached {
		if strings.HasPrefix(k, method+" ") && strings.HasSuffix(k, suffix) {
			n += v
		}
	}
	return n
}

// byMethod is how many requests of each method reached the server.
func (ft *faultTransport) byMethod() map[string]int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	m := map[string]int{}
	for k, v := range ft.reached {
		m[strings.SplitN(k, " ", 2)[0]] += v
	}
	return m
}

func drain(req *http.Request) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
}

func synthetic(req *http.Request, status int, code string) *http.Response {
	body := "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>" + code + "</Code><Message>injected</Message></Error>"
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/xml"}},
		Body:    io.NopCloser(strings.NewReader(body)),
		Request: req, ContentLength: int64(len(body)),
	}
}

var fastRetries = &s3store.Options{Attempts: 4, BaseBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}

// TestUnknownOutcome: a conditional create whose answer is lost is
// resolved by reading the key back, never by guessing or by blindly
// sending it again.
func TestUnknownOutcome(t *testing.T) {
	g := startGateway(t)
	const target = "_timeseries_log/0000000002.json"

	setup := func(t *testing.T, rules ...*rule) (*faultTransport, *s3store.FS) {
		ft := newFaultTransport(rules...)
		fsys := g.newFS(t, ft, fastRetries)
		store(t, fsys, "tmp", "our commit")
		return ft, fsys
	}

	// Each fault leaves the key holding our commit, reached by exactly
	// one PUT: when the store took the first one, the outcome is read
	// back instead of resent.
	for _, c := range []struct {
		name  string
		rules []*rule
	}{
		{"StoredButAnswerLost", []*rule{{method: "PUT", suffix: target, f: lostAfter, n: 1}}},
		{"StoredThen500", []*rule{{method: "PUT", suffix: target, f: error500After, n: 1}}},
		{"LostBeforeTheServer", []*rule{{method: "PUT", suffix: target, f: lostBefore, n: 1}}},
		{"Throttled", []*rule{
			{method: "PUT", suffix: target, f: slowDown, n: 2},
			{method: "GET", suffix: "/tmp", f: slowDown, n: 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ft, fsys := setup(t, c.rules...)
			if err := fsys.Link("tmp", target); err != nil {
				t.Fatalf("Link = %v, want success (the key holds our write)", err)
			}
			expect(t, fsys, target, "our commit")
			if n := ft.count("PUT", target); n != 1 {
				t.Fatalf("%d PUTs of the target reached the server, want 1", n)
			}
		})
	}

	t.Run("LostRaceAnswerLost", func(t *testing.T) {
		// Another writer already holds the key, with the very same bytes.
		// Our PUT gets 412, and that answer is lost. The read-back finds
		// equal bytes but not our token: it is not ours.
		ft, fsys := setup(t, &rule{method: "PUT", suffix: target, f: lostAfter, n: 1})
		other := g.newFSOnSame(t, fsys, nil)
		store(t, other, "other-tmp", "our commit")
		if err := other.Link("other-tmp", target); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Link("tmp", target); !storage.IsExist(err) {
			t.Fatalf("Link that lost the race, answer lost = %v, want fs.ErrExist", err)
		}
		if n := ft.count("PUT", target); n != 1 {
			t.Fatalf("%d PUTs of the target reached the server, want 1", n)
		}
	})

	t.Run("Unresolvable", func(t *testing.T) {
		// The answer is lost and the key cannot be read back either: the
		// error says the outcome is unknown; it is neither success nor
		// fs.ErrExist.
		_, fsys := setup(t,
			&rule{method: "PUT", suffix: target, f: lostAfter, n: 1},
			&rule{method: "GET", suffix: target, f: lostBefore, n: 1000})
		err := fsys.Link("tmp", target)
		if err == nil || storage.IsExist(err) || storage.IsNotExist(err) || !strings.Contains(err.Error(), "unknown") {
			t.Fatalf("Link with the outcome unknowable = %v, want an error saying the outcome is unknown", err)
		}
	})

	t.Run("GiveUp", func(t *testing.T) {
		_, fsys := setup(t, &rule{method: "GET", suffix: "/tmp", f: slowDown, n: 1000})
		if _, err := fsys.ReadFile("tmp"); err == nil {
			t.Fatal("ReadFile throttled forever succeeded")
		}
	})

	t.Run("CreateExclusiveAnswerLost", func(t *testing.T) {
		_, fsys := setup(t, &rule{method: "PUT", suffix: "/seg", f: lostAfter, n: 2})
		w, err := fsys.CreateExclusive("seg")
		if err != nil {
			t.Fatalf("CreateExclusive whose answer was lost = %v", err)
		}
		io.WriteString(w, "segment")
		// The second lost answer is the If-Match PUT of Close.
		if err := w.Close(); err != nil {
			t.Fatalf("Close whose answer was lost = %v", err)
		}
		expect(t, fsys, "seg", "segment")
		if _, err := fsys.CreateExclusive("seg"); !storage.IsExist(err) {
			t.Fatalf("CreateExclusive of the existing key = %v", err)
		}
	})
}

// newFSOnSame returns a second FS on the bucket and prefix of fsys, as a
// second process would have, whose requests go through rt (nil: straight).
func (g *gateway) newFSOnSame(t *testing.T, fsys *s3store.FS, rt http.RoundTripper) *s3store.FS {
	t.Helper()
	bucket, prefix := fsys.Location()
	other, err := s3store.New(g.client(rt), bucket, prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	return other
}
