package main

import (
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// TestSecondInterruptKills: the first Ctrl-C cancels a client command's
// calls; a command that cannot stop at once (here scan, blocked writing to
// a full pipe nobody reads) is killed by the second, as at any other
// program.
func TestSecondInterruptKills(t *testing.T) {
	if signal.Ignored(os.Interrupt) {
		t.Skip("SIGINT is ignored here, and would be in the command")
	}
	f := newLoadFixture(t)
	// ~1 MB of CSV: more than the command's buffer and the pipe's.
	f.mustLoad("cpu", f.writeParquet("a.parquet", loadFloatSchema, 0, 25_000, 25_000))
	cmd := exec.Command(binPath, "scan", "--server", "grpc://"+f.p.addr, "--format", "csv", "cpu")
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		// The output has begun; then nobody reads, and the command blocks
		// writing the rest.
		if _, err := io.ReadFull(stdout, make([]byte, 10)); err != nil {
			t.Errorf("reading the output's start: %v", err)
		}
		done <- cmd.Wait()
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("scan ended (%v) with its output unread; stderr %q", err, stderr.String())
	default:
	}
	cmd.Process.Signal(os.Interrupt)
	time.Sleep(300 * time.Millisecond) // the first is handled: the calls are cancelled
	cmd.Process.Signal(os.Interrupt)
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("scan still running 10 s after a second SIGINT; stderr %q", stderr.String())
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("scan ended with %v, want killed by SIGINT; stderr %q", err, stderr.String())
	}
}
