//go:build duckdb_arrow

package flightsql

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bindings "github.com/duckdb/duckdb-go-bindings"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEachServerScrubsItsOwnRoot: two servers over different roots in one
// process. DuckDB's error reading a damaged segment of either (produced
// by the same engine reading the file, as in
// TestDuckDBFileErrorsAreDataLoss) becomes, at the server it belongs to,
// DATA_LOSS naming the table and segment, with exactly the message a lone
// server gives and neither root; the other server claims no segment in it
// and rewrites nothing. Through the listeners, a statement quoting a path
// under one server's root has it scrubbed there and kept verbatim by the
// other.
func TestEachServerScrubsItsOwnRoot(t *testing.T) {
	ctx := ctxT(t)
	servers := []*sqlServer{startSQL(t), startSQL(t)}
	if servers[0].root == servers[1].root {
		t.Fatal("the two servers share a root")
	}
	segs := make([]string, len(servers))
	files := make([]string, len(servers))
	for i, s := range servers {
		s.makeCPU(ctx, 1)
		if got := s.scalar(ctx, "SELECT count(*) FROM cpu"); got != "7200" { // plans over the root
			t.Fatalf("server %d: count %s, want 7200", i, got)
		}
		tb, err := s.svc.Table(ctx, "cpu")
		if err != nil {
			t.Fatal(err)
		}
		segs[i] = tb.State().Segments[0].Path
		files[i] = filepath.Join(s.root, "cpu", filepath.FromSlash(segs[i]))
	}
	showsRoot := func(msg string) bool {
		return strings.Contains(msg, servers[0].root) || strings.Contains(msg, servers[1].root)
	}
	for i, s := range servers {
		other := servers[1-i]
		fi, err := os.Stat(files[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(files[i], fi.Size()/2); err != nil {
			t.Fatal(err)
		}
		d, err := OpenDirect(ctx, s.root, nil)
		if err != nil {
			t.Fatal(err)
		}
		rdr, err := d.Query(ctx, "SELECT count(*) FROM read_parquet("+sqlString(files[i])+")")
		if err == nil {
			for rdr.Next() {
			}
			err = rdr.Err()
			rdr.Release()
		}
		d.Close()
		if err == nil || !strings.Contains(err.Error(), files[i]) {
			t.Fatalf("server %d: DuckDB read the truncated segment or did not name it: %v", i, err)
		}
		// What a lone server says: DuckDB's first lines, the root cut
		// from the path.
		first, _, _ := strings.Cut(err.Error(), "\nLINE ")
		want := fmt.Sprintf("table cpu: segment %s cannot be read: %s", segs[i],
			strings.ReplaceAll(strings.TrimRight(first, "\n "), s.root+string(filepath.Separator), ""))

		got := s.sql.sqlStatus(err)
		wantCode(t, fmt.Sprintf("server %d, its own segment", i), got, codes.DataLoss, "table cpu", "segment "+segs[i])
		if msg := status.Convert(got).Message(); msg != want || showsRoot(msg) {
			t.Errorf("server %d, its own segment: %q, want %q", i, msg, want)
		}
		// The other server: not its segment, not its root.
		got = other.sql.sqlStatus(err)
		if code := status.Code(got); code == codes.DataLoss {
			t.Errorf("server %d claimed server %d's segment: %v", 1-i, i, got)
		}
		if msg := status.Convert(got).Message(); !strings.Contains(msg, files[i]) {
			t.Errorf("server %d rewrote server %d's path: %q", 1-i, i, msg)
		}
	}
	// Through the listeners: each scrubs its own root from a statement's
	// own error, and only its own.
	for i, s := range servers {
		for j, path := range files {
			_, err := s.query(ctx, "SELECT CAST("+sqlString(path)+" AS INTEGER)")
			own := "cpu/" + segs[j]
			if i != j {
				own = path
			}
			wantCode(t, fmt.Sprintf("server %d quoting server %d's segment", i, j), err, codes.InvalidArgument, "Conversion Error", "'"+own+"'")
			if msg := status.Convert(err).Message(); i == j && showsRoot(msg) {
				t.Errorf("server %d shows its root: %s", i, msg)
			}
		}
	}
	// No root, nothing to scrub or claim.
	raw := &duckError{typ: bindings.ErrorTypeErrorIO, msg: "IO Error: Cannot open file \"" + files[0] + "\""}
	if got := sqlStatusIn("", raw); status.Code(got) != codes.Internal || status.Convert(got).Message() != raw.msg {
		t.Errorf("no root: %v, want Internal with DuckDB's message", got)
	}
}
