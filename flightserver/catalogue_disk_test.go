package flightserver

// The on-disk rows of the bad-input catalogue (see catalogue_test.go):
// tables damaged or written by a newer writer, set up on a copy of the
// fixture table before the snapshot. The request that meets the damage
// must name it, with DATA_LOSS for corruption and FAILED_PRECONDITION for
// features this build lacks, and must not write (no repair, no commit).

import (
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tsflight/tsflight/tableformat"
)

// damage copies cpu to name and applies fix to the copy's directory.
func (e *catEnv) damage(name string, fix func(dir string)) {
	e.t.Helper()
	copyTable(e.t, e.root, "cpu", name)
	fix(filepath.Join(e.root, name))
}

// firstFile returns the path (relative to dir) of the one file under sub
// whose name ends in suffix.
func (e *catEnv) firstFile(dir, sub, suffix string) string {
	e.t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(sub)))
	if err != nil {
		e.t.Fatal(err)
	}
	for _, en := range entries {
		if strings.HasSuffix(en.Name(), suffix) {
			return sub + "/" + en.Name()
		}
	}
	e.t.Fatalf("no %s file in %s", suffix, sub)
	return ""
}

// rewrite replaces the bytes of dir/rel by edit's result.
func (e *catEnv) rewrite(dir, rel string, edit func([]byte) []byte) {
	e.t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	data, err := os.ReadFile(p)
	if err != nil {
		e.t.Fatal(err)
	}
	out := edit(data)
	if string(out) == string(data) {
		e.t.Fatalf("%s: the edit changed nothing", rel)
	}
	if err := os.WriteFile(p, out, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// futureFeature marks commit 1 of dir as needing a reader feature no
// build knows.
func (e *catEnv) futureFeature(dir string) {
	requireReaderFeature(e.t, dir, "vector_clock")
}

// garbleCommit2 cuts commit 2 of dir off in the middle of its JSON.
func (e *catEnv) garbleCommit2(dir string) {
	e.rewrite(dir, tableformat.CommitPath(2), func(b []byte) []byte { return b[:len(b)/2] })
}

// cutSidecars truncates both coverage files of dir: the table snapshot
// (which alone would be rebuilt in memory from the segment sidecars) and
// the segment's sidecar.
func (e *catEnv) cutSidecars(dir string) {
	half := func(b []byte) []byte { return b[:len(b)/2] }
	e.rewrite(dir, e.firstFile(dir, "_coverage/segments", ""), half)
	e.rewrite(dir, e.firstFile(dir, "_coverage/table", ""), half)
}

// segmentOf returns the relative path of dir's one Parquet segment.
func (e *catEnv) segmentOf(dir string) string {
	return e.firstFile(dir, "data/_managed/append", ".parquet")
}

// scanAll plans a scan of table and reads every endpoint.
func (e *catEnv) scanAll(table string) error {
	info, err := e.client.GetFlightInfo(e.ctx, pathDesc(table))
	if err != nil {
		return err
	}
	_, err = e.fetchAll(e.ctx, info)
	return err
}

func diskCatalogue() []badCase {
	const cat = "on disk"
	var seg string // set by setups that need the segment's name
	return []badCase{
		{name: "commit requires an unknown reader feature", category: cat, op: "GetFlightInfo PATH [future]", code: codes.FailedPrecondition, frags: []string{"unsupported table protocol", "vector_clock"},
			setup: func(e *catEnv) { e.damage("future", e.futureFeature) },
			run:   func(e *catEnv) error { return e.infoErr(pathDesc("future")) }},
		{name: "put into a table needing an unknown reader feature", category: cat, op: "DoPut PATH [future]", code: codes.FailedPrecondition, frags: []string{"unsupported table protocol", "vector_clock"},
			setup: func(e *catEnv) { e.damage("future", e.futureFeature) },
			run:   func(e *catEnv) error { return e.putTSBS(pathDesc("future"), newRows) }},
		{name: "commit file cut off in the middle of its JSON", category: cat, op: "DoAction describe-table", code: codes.DataLoss, frags: []string{tableformat.CommitPath(2)},
			setup: func(e *catEnv) { e.damage("broken", e.garbleCommit2) },
			run:   func(e *catEnv) error { return e.act(ActionDescribeTable, `{"table":"broken"}`) }},
		{name: "put into a table with a corrupt commit", category: cat, op: "DoPut PATH [broken]", code: codes.DataLoss, frags: []string{tableformat.CommitPath(2)},
			setup: func(e *catEnv) { e.damage("broken", e.garbleCommit2) },
			run:   func(e *catEnv) error { return e.putTSBS(pathDesc("broken"), newRows) }},
		{name: "CURRENT holds no version number", category: cat, op: "GetFlightInfo PATH [badcur]", code: codes.DataLoss, frags: []string{"CURRENT", `"two"`},
			setup: func(e *catEnv) {
				e.damage("badcur", func(dir string) {
					e.rewrite(dir, "_timeseries_log/CURRENT", func([]byte) []byte { return []byte("two\n") })
				})
			},
			run: func(e *catEnv) error { return e.infoErr(pathDesc("badcur")) }},
		{name: "segment file deleted, then a scan", category: cat, op: "GetFlightInfo + DoGet [lost]", code: codes.DataLoss, frags: []string{"data/_managed/append/", ".parquet"},
			setup: func(e *catEnv) {
				e.damage("lost", func(dir string) {
					seg = e.segmentOf(dir)
					if err := os.Remove(filepath.Join(dir, filepath.FromSlash(seg))); err != nil {
						e.t.Fatal(err)
					}
				})
			},
			run: func(e *catEnv) error { return e.scanAll("lost") }},
		{name: "segment file truncated, then a scan", category: cat, op: "GetFlightInfo + DoGet [cut]", code: codes.DataLoss, frags: []string{"data/_managed/append/", ".parquet"},
			setup: func(e *catEnv) {
				e.damage("cut", func(dir string) {
					e.rewrite(dir, e.segmentOf(dir), func(b []byte) []byte { return b[:len(b)/2] })
				})
			},
			run: func(e *catEnv) error { return e.scanAll("cut") }},
		{name: "segment file swapped for another valid segment of the table, then a scan", category: cat, op: "GetFlightInfo + DoGet [swapped]", code: codes.DataLoss, frags: []string{"data/_managed/append/", ".parquet", "the log records file_size", "tsflight check"},
			setup: func(e *catEnv) {
				// swapped: a copy of cpu with a second segment (version
				// 3), whose bytes then replace the first segment's.
				copyTable(e.t, e.root, "cpu", "swapped")
				dir := filepath.Join(e.root, "swapped")
				seg = e.segmentOf(dir)
				other := e.mustPut(e.ctx, pathDesc("swapped"), newRows, 100, 3).Segment
				data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(other)))
				if err != nil {
					e.t.Fatal(err)
				}
				e.rewrite(dir, seg, func([]byte) []byte { return data })
			},
			run: func(e *catEnv) error {
				err := e.scanAll("swapped")
				// The message names the segment that was swapped, not
				// the one it was swapped with.
				if msg := status.Convert(err).Message(); !strings.Contains(msg, seg) {
					e.t.Errorf("the error does not name the swapped segment %s: %s", seg, msg)
				}
				return err
			}},
		{name: "coverage sidecars truncated, then coverage", category: cat, op: "DoAction coverage [holes]", code: codes.DataLoss, frags: []string{"_coverage/segments/"},
			setup: func(e *catEnv) { e.damage("holes", e.cutSidecars) },
			run:   func(e *catEnv) error { return e.act(ActionCoverage, `{"table":"holes",`+day+`}`) }},
		{name: "coverage sidecars garbled, then gaps", category: cat, op: "DoAction gaps [holes]", code: codes.DataLoss, frags: []string{"_coverage/segments/"},
			setup: func(e *catEnv) {
				e.damage("holes", func(dir string) {
					garble := func(b []byte) []byte {
						out := append([]byte(nil), b...)
						for i := 8; i < len(out); i++ {
							out[i] ^= 0x5a
						}
						return out
					}
					e.rewrite(dir, e.firstFile(dir, "_coverage/segments", ""), garble)
					e.rewrite(dir, e.firstFile(dir, "_coverage/table", ""), garble)
				})
			},
			run: func(e *catEnv) error { return e.act(ActionGaps, `{"table":"holes",`+day+`}`) }},
		{name: "coverage sidecars truncated, then a put", category: cat, op: "DoPut PATH [holes]", code: codes.DataLoss, frags: []string{"_coverage/"},
			setup: func(e *catEnv) { e.damage("holes", e.cutSidecars) },
			run:   func(e *catEnv) error { return e.putTSBS(pathDesc("holes"), newRows) }},
	}
}
