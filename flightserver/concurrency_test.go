package flightserver

import (
	"sort"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestConcurrentPuts appends disjoint windows from many clients at once:
// every put commits, each at its own version, and no row is lost.
func TestConcurrentPuts(t *testing.T) {
	ts, ctx := startWithCPU(t)
	const writers = 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		versions []int
		segOf    = map[uint64][]string{}
		model    []row
	)
	for i := range writers {
		rows := genRows(t0.Add(timeOfStep(i*1000)), 300, 3)
		model = append(model, rows...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			batches := buildBatches(ts.cliMem, rows, 128)
			defer releaseAll(batches)
			res, err := ts.put(ctx, pathDesc("cpu"), tsbsSchema, batches...)
			if err != nil || len(res) != 1 {
				t.Errorf("writer %d: %v %v", i, res, err)
				return
			}
			if res[0].Rows != uint64(len(rows)) {
				t.Errorf("writer %d: PutResult %+v, want %d rows", i, res[0], len(rows))
			}
			mu.Lock()
			versions = append(versions, int(res[0].Version))
			segOf[res[0].Version] = append(segOf[res[0].Version], res[0].Segment)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Puts that commit together (group commit) share a version and name
	// its one segment; the versions run from 2 without a hole.
	sort.Ints(versions)
	for v, segs := range segOf {
		for _, s := range segs {
			if s != segs[0] {
				t.Fatalf("version %d acknowledged with segments %v", v, segs)
			}
		}
	}
	if versions[0] != 2 || versions[len(versions)-1] != 1+len(segOf) {
		t.Fatalf("versions %v, want 2..%d with every commit in between", versions, 1+len(segOf))
	}
	got := ts.readAll(t, ctx, "cpu")
	sameRows(t, "concurrent puts", got.rows, model)
}

// TestConcurrentOverlappingPuts sends the same rows from several clients:
// exactly one commits, the others are refused as overlaps.
func TestConcurrentOverlappingPuts(t *testing.T) {
	ts, ctx := startWithCPU(t)
	rows := genRows(t0, 200, 2)
	var wg sync.WaitGroup
	codesSeen := make([]codes.Code, 6)
	for i := range codesSeen {
		wg.Add(1)
		go func() {
			defer wg.Done()
			batches := buildBatches(ts.cliMem, rows, 100)
			defer releaseAll(batches)
			_, err := ts.put(ctx, pathDesc("cpu"), tsbsSchema, batches...)
			codesSeen[i] = status.Code(err)
		}()
	}
	wg.Wait()
	var ok, overlap int
	for _, c := range codesSeen {
		switch c {
		case codes.OK:
			ok++
		case codes.FailedPrecondition:
			overlap++
		default:
			t.Fatalf("codes %v: unexpected %v", codesSeen, c)
		}
	}
	if ok != 1 || overlap != len(codesSeen)-1 {
		t.Fatalf("codes %v: want one OK, the rest FailedPrecondition", codesSeen)
	}
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	if d["version"] != 2.0 || d["rows"] != float64(len(rows)) || d["segments"] != 1.0 {
		t.Fatalf("after overlapping puts: %v", d)
	}
}

// TestConcurrentCreates races create-table and create-on-put for one name:
// one create wins, the other create-tables see AlreadyExists, and every
// put lands.
func TestConcurrentCreates(t *testing.T) {
	ts := startServer(t, nil)
	ctx := ctxT(t)
	const n = 6
	var wg sync.WaitGroup
	createCodes := make([]codes.Code, n)
	putErrs := make([]error, n)
	create := map[string]any{"index_column": "ts", "index_type": "timestamp", "granularity": "10s", "entity_columns": []string{"hostname"}}
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			body := map[string]any{"table": "cpu"}
			for k, v := range create {
				body[k] = v
			}
			_, err := ts.action(ctx, ActionCreateTable, body)
			createCodes[i] = status.Code(err)
		}()
		go func() {
			defer wg.Done()
			batches := buildBatches(ts.cliMem, genRows(t0.Add(timeOfStep(i*100)), 50, 2), 40)
			defer releaseAll(batches)
			_, putErrs[i] = ts.put(ctx, cmdDesc(t, map[string]any{"table": "cpu", "create": create}), tsbsSchema, batches...)
		}()
	}
	wg.Wait()
	for i, err := range putErrs {
		if err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	var created int
	for _, c := range createCodes {
		switch c {
		case codes.OK:
			created++
		case codes.AlreadyExists:
		default:
			t.Fatalf("create-table codes %v", createCodes)
		}
	}
	if created > 1 {
		t.Fatalf("create-table codes %v: more than one create won", createCodes)
	}
	d := ts.mustAction(ctx, ActionDescribeTable, map[string]any{"table": "cpu"})
	// Puts may commit together (group commit), so there are 1 to n
	// segments, one per commit after the create.
	if segs := d["segments"].(float64); d["rows"] != float64(n*100) || segs < 1 || segs > float64(n) || d["version"] != segs+1 {
		t.Fatalf("after racing creates: %v", d)
	}
}
