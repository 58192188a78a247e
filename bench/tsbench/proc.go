package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is a process of the benchmark (a tsflight server, the Flight
// ceiling server) that listens on an address it prints.
type child struct {
	name string
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	log  *bytes.Buffer // its output, for failures (under mu)
	done chan struct{}
	err  error
}

// startChild runs argv and waits until a line of its output matches re,
// whose first group is the address.
func startChild(name string, re *regexp.Regexp, argv ...string) (*child, error) {
	c := &child{name: name, cmd: exec.Command(argv[0], argv[1:]...), log: &bytes.Buffer{}, done: make(chan struct{})}
	pr, pw := io.Pipe()
	c.cmd.Stdout, c.cmd.Stderr = pw, pw
	c.cmd.Stdin = nil
	// The child dies with us, whatever happens to us.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		c.err = c.cmd.Wait()
		pw.Close()
		close(c.done)
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			c.mu.Lock()
			c.log.WriteString(line + "\n")
			c.mu.Unlock()
			if m := re.FindStringSubmatch(line); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, pr)
	}()
	select {
	case c.addr = <-found:
		return c, nil
	case <-c.done:
		return nil, fmt.Errorf("%s exited before listening (%v):\n%s", name, c.err, c.output())
	case <-time.After(5 * time.Minute):
		c.cmd.Process.Kill()
		return nil, fmt.Errorf("%s did not listen within 5 minutes", name)
	}
}

// stop sends SIGTERM, waits, and returns the process's peak RSS in bytes
// (read just before the signal).
func (c *child) stop() (int64, error) {
	rss := vmHWM(c.cmd.Process.Pid)
	c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(60 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
		return 0, fmt.Errorf("%s did not stop within 60 s of SIGTERM", c.name)
	}
	if rss == 0 {
		rss = peakRSS(c.cmd.ProcessState)
	}
	if c.err != nil {
		return rss, fmt.Errorf("%s: %v\n%s", c.name, c.err, tail(c.output(), 40))
	}
	return rss, nil
}

// output is what the child has printed so far.
func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// vmHWM is a running process's peak RSS since its exec, in bytes, from
// /proc/PID/status (0 if unknown). The rusage figure is no good for our
// children: Go spawns them with vfork, and at exec the kernel carries the
// parent's high-water mark into the child's ru_maxrss.
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb int64
		if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &kb); err == nil {
			return kb * 1024
		}
	}
	return 0
}

// peakRSS is a finished process's maximum resident set, in bytes, from
// rusage: an upper bound (see vmHWM).
func peakRSS(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss * 1024 // KiB on Linux
	}
	return 0
}

// selfRSS is this process's peak RSS so far, in bytes.
func selfRSS() int64 {
	if n := vmHWM(os.Getpid()); n > 0 {
		return n
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss * 1024
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

var listeningRE = listenRE("tsflight")

// listenRE matches "NAME listening on ADDR".
func listenRE(name string) *regexp.Regexp {
	return regexp.MustCompile(regexp.QuoteMeta(name) + ` listening on ([^\s"]+)`)
}

// startServer runs "tsflight serve" on root, with extra flags.
func startServer(bin, root string, extra ...string) (*child, error) {
	argv := append([]string{bin, "serve", "--root", root, "--listen", "127.0.0.1:0"}, extra...)
	return startChild("tsflight serve", listeningRE, argv...)
}

// noMaintenance keeps the servers of the TSBS workloads from compacting
// while they are timed: their figures stay comparable with earlier runs
// and with the peers, which do no maintenance. The stream workload runs
// with it (streamMaintenance).
var noMaintenance = []string{"--maintenance-interval", "0"}

// streamMaintenance is the stream workload's maintenance: the server's
// policy, with a table counting as quiet 2 s after its last append (30 s
// by default) so that settling does not wait half a minute.
var streamMaintenance = []string{"--maintenance-interval", "1s", "--maintenance-quiet-after", "2s"}

// runJSON runs argv to completion and decodes its standard output (one
// JSON document) into out; its peak RSS is returned.
func runJSON(ctx context.Context, out any, argv ...string) (int64, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	rss := peakRSS(cmd.ProcessState)
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return rss, fmt.Errorf("%s exited %d:\n%s", strings.Join(argv[:min(len(argv), 3)], " "), ee.ExitCode(), tail(stderr.String(), 40))
		}
		return rss, err
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return rss, fmt.Errorf("%s: output is not JSON (%v):\n%s", argv[0], err, tail(stdout.String(), 20))
	}
	// The child's own figure (VmHWM) beats rusage's upper bound.
	var own struct {
		PeakRSS int64 `json:"peak_rss_bytes"`
	}
	if json.Unmarshal(stdout.Bytes(), &own) == nil && own.PeakRSS > 0 {
		rss = own.PeakRSS
	}
	return rss, nil
}
