package testkit

import (
	"errors"
	"io"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// TestStartChildAndStop: StartChild skips the lines before the announced
// one and returns the rest of it; StopProcess ends the child at once with
// SIGTERM and is a no-op on a child already waited for.
func TestStartChildAndStop(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo starting; echo 'ADDR  127.0.0.1:7 '; echo more; exec sleep 60")
	if got := StartChild(t, cmd, "ADDR "); got != "127.0.0.1:7" {
		t.Fatalf("StartChild = %q, want 127.0.0.1:7", got)
	}
	start := time.Now()
	StopProcess(cmd, 30*time.Second)
	if cmd.ProcessState == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("not stopped promptly: %v after %v", cmd.ProcessState, time.Since(start))
	}
	StopProcess(cmd, time.Second)
}

// TestCollectAndDrain: both read to io.EOF, which is no error, and hand
// back any other error with what came before it.
func TestCollectAndDrain(t *testing.T) {
	feed := func(vals []int, end error) func() (int, error) {
		return func() (int, error) {
			if len(vals) == 0 {
				return 0, end
			}
			v := vals[0]
			vals = vals[1:]
			return v, nil
		}
	}
	if got, err := Collect(feed([]int{1, 2, 3}, io.EOF)); err != nil || !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("Collect = %v, %v", got, err)
	}
	boom := errors.New("boom")
	if got, err := Collect(feed([]int{1}, boom)); err != boom || !slices.Equal(got, []int{1}) {
		t.Fatalf("Collect with an error = %v, %v", got, err)
	}
	if err := Drain(feed([]int{1, 2}, io.EOF)); err != nil {
		t.Fatalf("Drain = %v", err)
	}
	if err := Drain(feed(nil, boom)); err != boom {
		t.Fatalf("Drain with an error = %v", err)
	}
}
