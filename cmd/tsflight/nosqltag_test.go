//go:build !duckdb_arrow

package main

const sqlEnabled = false
