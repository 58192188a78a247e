package main

import (
	"strings"
	"testing"

	"github.com/tsflight/tsflight/flightserver"
)

// --scan-cache-bytes: 256 MiB by default, a quarter of --memory-limit when
// that is smaller and the flag is not given, what it says when given (0 =
// no cache); a negative size is refused.
func TestScanCacheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, flightserver.DefaultScanCacheBytes},
		{[]string{"--memory-limit", "512MiB"}, 128 << 20},
		{[]string{"--memory-limit", "4GiB"}, flightserver.DefaultScanCacheBytes},
		{[]string{"--memory-limit", "512MiB", "--scan-cache-bytes", "300MiB"}, 300 << 20},
		{[]string{"--scan-cache-bytes", "0"}, 0},
		{[]string{"--scan-cache-bytes", "1GiB"}, 1 << 30},
	} {
		cfg, err := parseServeFlags(testEnv(map[string]string{"TSFLIGHT_ROOT": "/r"}), tc.args)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if int64(cfg.scanCache) != tc.want {
			t.Errorf("%q: scan cache %d bytes, want %d", tc.args, int64(cfg.scanCache), tc.want)
		}
	}
	_, err := parseServeFlags(testEnv(map[string]string{"TSFLIGHT_ROOT": "/r"}), []string{"--scan-cache-bytes", "-1"})
	if err == nil || !strings.Contains(err.Error(), "--scan-cache-bytes") {
		t.Fatalf("a negative --scan-cache-bytes: %v", err)
	}
	stdout, _, code := runCLI(t, nil, "serve", "--help")
	if code != 0 || !strings.Contains(stdout, "--scan-cache-bytes SIZE") || !strings.Contains(stdout, "(default 256MiB)") {
		t.Fatalf("serve --help: exit %d, no --scan-cache-bytes SIZE with its default:\n%s", code, stdout)
	}
}
