// Command tsflight runs the tsflight Arrow Flight server and, in time, the
// client commands that talk to it.
//
//	tsflight serve --root ./data --listen 127.0.0.1:8815
//	tsflight version
//	tsflight help [command]
//
// Each command lives in its own file and registers itself in init (see
// commands.go). Exit codes: 0 success, 1 failure, 2 bad usage.
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], &env{
		stdout: os.Stdout,
		stderr: os.Stderr,
		getenv: os.Getenv,
	}))
}
