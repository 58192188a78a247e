package main

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// TestMain lets the test binary stand in for tsbench as its own DuckDB
// child ("duck ..."), as startDuckServe runs it.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "duck" {
		if err := runDuck(context.Background(), os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "tsbench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
