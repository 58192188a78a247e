package s3store_test

import (
	"context"
	"errors"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tsflight/tsflight/tableformat/storage/s3store"
)

// gateway is a versitygw process serving a posix directory in a test's
// temporary directory.
type gateway struct {
	endpoint string
	access   string
	secret   string

	bin, data, meta string
	stop            func() // kills the running process and waits for it
}

// versitygwBinary finds the versitygw binary: $TSFLIGHT_VERSITYGW, else
// versitygw on PATH, else in $GOPATH/bin where .ci/install_versitygw.sh
// puts it.
func versitygwBinary() (string, error) {
	if p := os.Getenv("TSFLIGHT_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("TSFLIGHT_VERSITYGW=%s: %w", p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p, nil
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "versitygw")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", errors.New("versitygw is not on PATH, not in $GOPATH/bin, and TSFLIGHT_VERSITYGW is not set (install it with .ci/install_versitygw.sh)")
}

// startGateway starts versitygw on a free port of 127.0.0.1 and stops it
// when the test ends. Without the binary the test is skipped, except
// under CI=true, where it fails: CI must not skip the S3 tests silently.
func startGateway(t testing.TB) *gateway {
	t.Helper()
	bin, err := versitygwBinary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no S3 server to test against: %v", err)
		}
		t.Skipf("skipping the S3 tests: %v", err)
	}
	dir := t.TempDir()
	// The sidecar directory must not share a string prefix with the data
	// directory (versitygw refuses it as "inside the gateway root").
	data, meta := filepath.Join(dir, "data"), filepath.Join(dir, "meta")
	for _, d := range []string{data, meta} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	g := &gateway{access: "tsflight-test", secret: "tsflight-test-secret", bin: bin, data: data, meta: meta}
	for try := 0; ; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		out, ok := g.start(t, addr)
		if ok {
			g.endpoint = "http://" + addr
			return g
		}
		if try == 2 {
			t.Fatalf("versitygw did not start on %s:\n%s", addr, out)
		}
	}
}

// start runs versitygw on addr; it returns the process's output and
// whether it listens. The process is killed when the test ends.
func (g *gateway) start(t testing.TB, addr string) (string, bool) {
	t.Helper()
	cmd := exec.Command(g.bin, "--port", addr, "posix", "--sidecar", g.meta, g.data)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+g.access, "ROOT_SECRET_KEY="+g.secret)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", g.bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	g.stop = sync.OnceFunc(func() {
		cmd.Process.Kill()
		<-exited
	})
	t.Cleanup(g.stop)
	if waitListening(addr, exited, 20*time.Second) {
		return "", true
	}
	g.stop()
	return out.String(), false
}

// restart kills versitygw (SIGKILL: no chance to flush anything) and
// starts it again on the same address and directories.
func (g *gateway) restart(t testing.TB) {
	t.Helper()
	g.stop()
	addr := strings.TrimPrefix(g.endpoint, "http://")
	if out, ok := g.start(t, addr); !ok {
		t.Fatalf("versitygw did not restart on %s:\n%s", addr, out)
	}
}

// waitListening waits until addr accepts connections; false if the
// process exited or the time ran out.
func waitListening(addr string, exited chan error, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err
			return false
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// client returns an S3 client of g whose requests go through rt (the
// default transport when nil).
func (g *gateway) client(rt http.RoundTripper) *s3.Client {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(g.endpoint),
		UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: g.access, SecretAccessKey: g.secret}, nil
		}),
		HTTPClient: &http.Client{Transport: rt},
	})
}

var bucketSeq atomic.Int64

// newBucket creates a fresh bucket and returns its name.
func (g *gateway) newBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("tsflight-%d", bucketSeq.Add(1))
	if _, err := g.client(nil).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

// newFS returns an FS on a fresh bucket of g, under prefix "tables/t1",
// with requests going through rt (nil: straight).
func (g *gateway) newFS(t testing.TB, rt http.RoundTripper, opts *s3store.Options) *s3store.FS {
	t.Helper()
	fsys, err := s3store.New(g.client(rt), g.newBucket(t), "tables/t1", opts)
	if err != nil {
		t.Fatal(err)
	}
	return fsys
}
