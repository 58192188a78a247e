package main

import "context"

// runCoveragePlot draws the coverage heat map (see plot.go).
func runCoveragePlot(ctx context.Context, e *env, rf *rangeFlags, table, path string, rows, cols int) error {
	return usagef("--plot is not available yet")
}
