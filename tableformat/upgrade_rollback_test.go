package tableformat

import (
	"context"
	"slices"
	"testing"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// TestUpgradeThenRollback: after an upgrade that compacted, a rollback to
// the last format-6 version gives back the old content (the same live
// segments as before the upgrade, the same rows) as a protocol-7 commit,
// which the 0.9.0 package reads.
func TestUpgradeThenRollback(t *testing.T) {
	py := crashPython(t)
	ctx := context.Background()
	rolled := 0
	for _, c := range format6Cases() {
		if c.set != format6Dir {
			continue // the committed fixtures
		}
		t.Run(c.String(), func(t *testing.T) {
			dir, want := copyFormat6From(t, c.set, c.name)
			tb := mustOpen(t, storage.Local(dir), nil)
			var segsBefore []string
			for _, s := range tb.State().Segments {
				segsBefore = append(segsBefore, s.Path)
			}
			rep, err := tb.Upgrade(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.CommittedVersion == want.Version {
				return // nothing to compact: the upgrade left the content as it was
			}
			rolled++
			rb, err := tb.Rollback(ctx, want.Version, nil)
			if err != nil {
				t.Fatalf("rollback to the pre-upgrade version %d: %v", want.Version, err)
			}
			if rb.CommittedVersion != rep.CommittedVersion+1 {
				t.Fatalf("rollback report %+v after upgrade %+v", rb, rep)
			}
			st := tb.State()
			var segsAfter []string
			for _, s := range st.Segments {
				segsAfter = append(segsAfter, s.Path)
			}
			slices.Sort(segsBefore)
			slices.Sort(segsAfter)
			if !slices.Equal(segsAfter, segsBefore) || st.Meta.NeedsUpgrade() {
				t.Fatalf("after the rollback: segments %v, want %v; needs upgrade %v", segsAfter, segsBefore, st.Meta.NeedsUpgrade())
			}
			wantFixtureRows(t, "rows after the rollback", tb, want, py, dir, st.Version)
		})
	}
	if rolled == 0 {
		t.Fatal("no fixture's upgrade compacted anything: the rollback was never tried")
	}
}
