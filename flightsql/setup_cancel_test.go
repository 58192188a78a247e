//go:build duckdb_arrow

package flightsql

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
)

// lostInterrupt is a context whose cancel never reaches DuckDB: Err
// answers nil for its first okCalls calls and context.Canceled after,
// while Done (Background's) never closes, so the connection's guard never
// interrupts a statement. It stands for a cancel that lands between two
// setup statements, whose interrupt DuckDB forgets when it arrives before
// the next statement starts (a race a real cancel cannot win on purpose).
type lostInterrupt struct {
	context.Context
	okCalls, calls int
}

func (c *lostInterrupt) Err() error {
	c.calls++
	if c.calls > c.okCalls {
		return context.Canceled
	}
	return nil
}

// TestSetupStopsBetweenStatements: a plan's setup statements do not start
// once the query's context has ended, whether the cancel came before the
// first statement or between two, and the error is Canceled.
func TestSetupStopsBetweenStatements(t *testing.T) {
	s := startSQL(t)
	plan := &queryPlan{setup: []string{
		"CREATE TEMP TABLE setup_a AS SELECT 1 AS x",
		"CREATE TEMP TABLE setup_b AS SELECT 2 AS x",
		"CREATE TEMP TABLE setup_c AS SELECT 3 AS x",
	}}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name    string
		ctx     context.Context
		created string // the temporary tables the setup made
		code    codes.Code
	}{
		{"live", context.Background(), "setup_a,setup_b,setup_c", codes.OK},
		{"cancelled before the first", &lostInterrupt{Context: context.Background()}, "", codes.Canceled},
		{"cancelled after the first", &lostInterrupt{Context: context.Background(), okCalls: 1}, "setup_a", codes.Canceled},
		{"cancelled after the second", &lostInterrupt{Context: context.Background(), okCalls: 2}, "setup_a,setup_b", codes.Canceled},
		{"cancelled context", cancelled, "", codes.Canceled},
	} {
		sess, err := s.sql.engine.open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		err = s.sql.setup(c.ctx, sess, plan)
		if c.code == codes.OK {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
		} else if err == nil {
			t.Errorf("%s: setup succeeded, want %v", c.name, c.code)
		} else {
			wantCode(t, c.name, err, c.code, "cancelled")
		}
		got, err := sess.scalarString(context.Background(), `SELECT coalesce(string_agg(table_name, ',' ORDER BY table_name), '') FROM duckdb_tables() WHERE temporary`)
		sess.close()
		if err != nil {
			t.Fatal(err)
		}
		if got != c.created {
			t.Errorf("%s: the setup created %q, want %q", c.name, got, c.created)
		}
	}
}
