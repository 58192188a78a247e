package testkit

import (
	"runtime"
	"testing"
	"time"
)

// SettledGoroutines waits (up to a second) until the number of
// goroutines stops changing and returns it: the baseline before a call
// whose goroutines must all end.
func SettledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 50 {
		time.Sleep(20 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

// WaitGoroutines polls until at most base goroutines run, and fails t
// with every goroutine's stack if more still do after d.
func WaitGoroutines(t testing.TB, base int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("%d goroutines %s after the cancel, baseline %d:\n%s", n, d, base, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
