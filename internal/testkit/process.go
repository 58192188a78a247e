package testkit

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StopProcess ends a started child process: SIGTERM, then SIGKILL if it has
// not exited within grace; it returns once the process has been waited
// for. A process already waited for is left alone.
func StopProcess(cmd *exec.Cmd, grace time.Duration) {
	if cmd.ProcessState != nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-done
	}
}

// StartChild starts cmd, a server that announces itself on its standard
// output (its standard error is the test's unless set), reads that output
// up to the first line beginning with prefix and returns the rest of the
// line, trimmed. The output after it is read and dropped in the background
// so that the child never blocks writing it. When the output ends first,
// the child is killed and t fails. Stopping it is the caller's
// (StopProcess).
func StartChild(t testing.TB, cmd *exec.Cmd, prefix string) string {
	t.Helper()
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(out)
	for {
		line, err := rd.ReadString('\n')
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			go io.Copy(io.Discard, rd)
			return strings.TrimSpace(rest)
		}
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("%s did not start (no %q line): %v", cmd.Path, prefix, err)
		}
	}
}
