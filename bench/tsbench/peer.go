package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
)

// pkgName names the Python package in the report.
const pkgName = "timeseries-table-format"

// The peer runner's answers (bench/peers/ttf_peer.py).
type peerIngest struct {
	Version string  `json:"package_version"`
	Rows    int64   `json:"rows"`
	TotalS  float64 `json:"total_s"`
}

type peerRun struct {
	TimesS []float64 `json:"times_s"`
	Rows   int64     `json:"rows"`
	Bytes  int64     `json:"bytes"`
	Result [][]any   `json:"result"`
}

type peerScan struct {
	Version string             `json:"package_version"`
	Ranges  map[string]peerRun `json:"ranges"`
}

type peerSQL struct {
	Version string             `json:"package_version"`
	Queries map[string]peerRun `json:"queries"`
}

// runPeer runs the Python peer in mode with args and decodes its JSON.
func (b *bench) runPeer(ctx context.Context, mode string, args any, out any) (int64, error) {
	return b.runPython(ctx, b.cfg.peer, "peer-"+mode+".json", mode, args, out)
}

// runPython runs a Python peer script in mode, its args written as JSON
// to the work directory's file argsName, and decodes the JSON it prints;
// the script's peak RSS is returned.
func (b *bench) runPython(ctx context.Context, script, argsName, mode string, args any, out any) (int64, error) {
	raw, err := json.Marshal(args)
	if err != nil {
		return 0, err
	}
	path := filepath.Join(b.cfg.work, argsName)
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return 0, err
	}
	return runJSON(ctx, out, b.cfg.python, script, mode, path)
}
