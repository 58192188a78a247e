// Command tsflight runs the tsflight server and the client commands that
// talk to it over Arrow Flight and Flight SQL.
//
//	tsflight serve --root ./data [--demo] [--listen 127.0.0.1:8815]
//	tsflight tables | describe | create | load | scan | sql | coverage | gaps | add-columns …
//	tsflight version
//	tsflight help [command]
//
// Each command lives in its own file and registers itself in init (see
// commands.go). Client commands connect to --server (TSFLIGHT_SERVER,
// default grpc://127.0.0.1:8815; client.go) and print through output.go
// (--format table|csv|json|parquet, --output). Exit codes: 0 success,
// 1 failure, 2 bad usage, 3 server unreachable. docs/cli.md is the
// reference.
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
