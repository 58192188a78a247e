package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is set at link time: go build -ldflags "-X main.version=v0.1.0".
// Without it the module version from the build info is used.
var version = ""

var versionCmd = &command{
	Name:    "version",
	Group:   "other",
	Summary: "print the version of this binary",
	Usage:   "tsflight version",
	Help: `Prints the version, the commit it was built from (when known), the Go
version and the platform.

Example:
  $ tsflight version
  tsflight v0.1.0 (commit 1a2b3c4d5e6f, go1.26.8, linux/amd64)`,
}

func init() { register(versionCmd, runVersion) }

func runVersion(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(versionCmd)
	rest, err := fs.parse(e, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("unexpected argument %q", rest[0])
	}
	fmt.Fprintln(e.stdout, versionLine())
	return nil
}

// versionString is the version alone, as the server logs it.
func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "devel"
}

func versionLine() string {
	details := []string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if rev != "" {
			rev = rev[:min(len(rev), 12)]
			if modified == "true" {
				rev += ", modified"
			}
			details = append(details, "commit "+rev)
		}
	}
	details = append(details, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
	return fmt.Sprintf("tsflight %s (%s)", versionString(), strings.Join(details, ", "))
}
