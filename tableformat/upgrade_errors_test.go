// Upgrade's failures: storage errors at each step, the rename fallback's
// failures, other writers and other upgrades racing it, and a torn commit
// file above the newest commit.

package tableformat

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// hookFS runs before ahead of every Exchange, every MkdirAll of a staging
// directory, or every List of the log, as op says.
type hookFS struct {
	storage.FS
	op     string
	before func()
}

func (h hookFS) Exchange(a, b string) error {
	if h.op == "Exchange" {
		h.before()
	}
	return h.FS.Exchange(a, b)
}

func (h hookFS) List(dir string) ([]string, error) {
	if h.op == "List" && dir == LogDir {
		h.before()
	}
	return h.FS.List(dir)
}

func (h hookFS) MkdirAll(dir string) error {
	if h.op == "MkdirAll" && strings.HasPrefix(dir, UpgradeStagingPrefix) {
		h.before()
	}
	return h.FS.MkdirAll(dir)
}

// A commit that another writer adds while the log is converted (before
// the staging directory is made) or swapped (just before the exchange)
// fails the upgrade with ErrConflict and leaves the format-6 table as it
// was (an exchange is undone; no staging directory remains).
func TestUpgradeConcurrentCommit(t *testing.T) {
	for op, msg := range map[string]string{"List": "moved from version 3 to 4", "MkdirAll": "while the log was converted", "Exchange": "the swap was undone"} {
		t.Run(op, func(t *testing.T) {
			dir, want := copyFormat6(t, "int64")
			ctx := context.Background()
			next := filepath.Join(dir, CommitPath(want.Version+1))
			// A valid format-6 commit (no actions) for the List case, which
			// the refresh rolls forward over; any bytes for the others.
			commit := fmt.Sprintf(`{"version":%d,"base_version":%d,"timestamp":"2026-12-02T13:00:00Z","actions":[]}`, want.Version+1, want.Version)
			fsys := hookFS{FS: storage.Local(dir), op: op, before: func() {
				if _, err := os.Stat(next); err == nil {
					return
				}
				if err := os.WriteFile(next, []byte(commit), 0o644); err != nil {
					t.Error(err)
				}
			}}
			tb := mustOpen(t, fsys, nil)
			_, err := tb.Upgrade(ctx, nil)
			if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), msg) {
				t.Fatalf("upgrade: %v, want ErrConflict saying %q", err, msg)
			}
			if err := os.Remove(next); err != nil {
				t.Fatal(err)
			}
			names, _ := os.ReadDir(dir)
			for _, n := range names {
				if strings.HasPrefix(n.Name(), LogDir+".") {
					t.Errorf("failed upgrade left %s", n.Name())
				}
			}
			fresh := mustOpen(t, storage.Local(dir), &Options{ReadOnly: true})
			if !fresh.State().Meta.NeedsUpgrade() {
				t.Fatal("the table is not format 6 after the failed upgrade")
			}
		})
	}
}

// A torn commit file above the newest commit (which the replay ignores)
// does not stop the upgrade: it stays in the backup, and the new log
// ends at the newest valid commit.
func TestUpgradeTornTail(t *testing.T) {
	dir, want := copyFormat6(t, "int64")
	ctx := context.Background()
	torn := filepath.Base(CommitPath(want.Version + 1))
	if err := os.WriteFile(filepath.Join(dir, LogDir, torn), []byte(`{"version":4,"base_vers`), 0o644); err != nil {
		t.Fatal(err)
	}
	tb := mustOpen(t, storage.Local(dir), nil)
	rep, err := tb.Upgrade(ctx, &UpgradeOptions{Compact: &CompactOptions{MinSegments: 2, SmallBytes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, rep.Backup, torn)); err != nil {
		t.Errorf("the torn file is not in the backup: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, LogDir, torn)); !os.IsNotExist(err) {
		t.Errorf("the torn file is in the new log: %v", err)
	}
	if st := tb.State(); st.Version != want.Version || st.Meta.NeedsUpgrade() {
		t.Fatalf("after the upgrade: version %d legacy %d", st.Version, st.Meta.LegacyFormat)
	}
}

// Two upgrades of one table through two handles: the one that finishes
// while the other converts wins; the other fails with ErrConflict before
// its swap and leaves nothing behind, so there is one backup, the old log.
func TestUpgradeRacingUpgrades(t *testing.T) {
	dir, want := copyFormat6(t, "ts_entity")
	ctx := context.Background()
	first := mustOpen(t, storage.Local(dir), nil)
	noCompact := &CompactOptions{MinSegments: 2, SmallBytes: 1}
	fsys := hookFS{FS: storage.Local(dir), op: "MkdirAll", before: func() {
		if _, err := first.Upgrade(ctx, &UpgradeOptions{Compact: noCompact}); err != nil {
			t.Errorf("the first upgrade: %v", err)
		}
	}}
	second := mustOpen(t, fsys, nil)
	_, err := second.Upgrade(ctx, &UpgradeOptions{Compact: noCompact})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "no longer format 6") {
		t.Fatalf("the second upgrade: %v, want ErrConflict", err)
	}
	staging, _ := filepath.Glob(filepath.Join(dir, UpgradeStagingPrefix+"*"))
	backups, _ := filepath.Glob(filepath.Join(dir, UpgradeBackupPrefix+"*"))
	if len(staging) != 0 || len(backups) != 1 {
		t.Fatalf("staging %v, backups %v; want none and one", staging, backups)
	}
	if c, err := os.ReadFile(filepath.Join(backups[0], "0000000001.json")); err != nil || !bytes.Contains(c, []byte(`"format_version":6`)) {
		t.Fatalf("the backup is not the format-6 log: %v\n%s", err, c)
	}
	st, err := second.Refresh(ctx)
	if err != nil || st.Meta.NeedsUpgrade() || st.Version != want.Version {
		t.Fatalf("after both: %v, version %d", err, st.Version)
	}
}

// Storage errors at each step of the conversion fail the upgrade with the
// step named; before the swap the format-6 table is left as it was with no
// staging directory, and after it the next upgrade finishes the job.
func TestUpgradeStorageErrors(t *testing.T) {
	boom := errors.New("injected failure")
	staging := func(name string) bool { return strings.HasPrefix(name, UpgradeStagingPrefix) }
	for _, c := range []struct {
		name    string
		fault   storage.Fault
		msg     string
		swapped bool // the new log is in place after the failure
	}{
		{"create a converted commit", storage.Fault{Op: storage.OpCreateExclusive, Match: staging, Nth: 2, Err: boom}, "create " + UpgradeStagingPrefix, false},
		{"sync the staging directory", storage.Fault{Op: storage.OpSyncDir, Match: staging, Err: boom}, "upgrade: sync " + UpgradeStagingPrefix, false},
		{"exchange", storage.Fault{Op: storage.OpExchange, Err: boom}, "exchange the log", false},
		{"rename the old log to the backup name", storage.Fault{Op: storage.OpRename, Match: staging, Err: boom}, "rename the old log", true},
		{"sync the root after the swap", storage.Fault{Op: storage.OpSyncDir, Match: func(n string) bool { return n == "." }, Nth: 2, Err: boom}, "after the swap", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, want := copyFormat6(t, "int64")
			ctx := context.Background()
			ffs, tb := openFaulty(t, storage.Local(dir), nil)
			ffs.Inject(c.fault)
			_, err := tb.Upgrade(ctx, nil)
			if !errors.Is(err, boom) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("upgrade: %v, want the injected failure and %q", err, c.msg)
			}
			fresh := mustOpen(t, storage.Local(dir), &Options{ReadOnly: true})
			if fresh.State().Meta.NeedsUpgrade() == c.swapped {
				t.Fatalf("after the failure: legacy %d, want the new log in place: %v", fresh.State().Meta.LegacyFormat, c.swapped)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, UpgradeStagingPrefix+"*")); !c.swapped && len(left) != 0 {
				t.Fatalf("a failure before the swap left %v", left)
			}
			again := mustOpen(t, storage.Local(dir), nil)
			if _, err := again.Upgrade(ctx, nil); err != nil {
				t.Fatalf("the next upgrade: %v", err)
			}
			staged, _ := filepath.Glob(filepath.Join(dir, UpgradeStagingPrefix+"*"))
			backups, _ := filepath.Glob(filepath.Join(dir, UpgradeBackupPrefix+"*"))
			if len(staged) != 0 || len(backups) != 1 || again.State().Meta.NeedsUpgrade() || again.State().Version < want.Version {
				t.Fatalf("after the next upgrade: staging %v, backups %v, version %d", staged, backups, again.State().Version)
			}
		})
	}
}

// The rename fallback's failures: the first rename failing leaves the
// format-6 table as it was; the second leaves no log, the error names the
// backup, and renaming the backup back (docs/format/upgrade-logs.md)
// restores the format-6 table.
func TestUpgradeRenameFallbackErrors(t *testing.T) {
	boom := errors.New("injected failure")
	for _, second := range []bool{false, true} {
		t.Run(fmt.Sprint("second rename ", second), func(t *testing.T) {
			dir, want := copyFormat6(t, "int64")
			ctx := context.Background()
			ffs, tb := openFaulty(t, storage.Local(dir), nil)
			match := func(n string) bool { return n == LogDir }
			nth := 1
			if second {
				nth = 2 // the staging directory renamed to the log
			}
			ffs.Inject(storage.Fault{Op: storage.OpExchange, Err: storage.ErrExchangeUnsupported},
				storage.Fault{Op: storage.OpRename, Match: match, Nth: nth, Err: boom})
			_, err := tb.Upgrade(ctx, nil)
			if !errors.Is(err, boom) {
				t.Fatalf("upgrade: %v, want the injected failure", err)
			}
			if second {
				backups, _ := filepath.Glob(filepath.Join(dir, UpgradeBackupPrefix+"*"))
				if len(backups) != 1 || !strings.Contains(err.Error(), filepath.Base(backups[0])) || !strings.Contains(err.Error(), "rename it back") {
					t.Fatalf("error %v does not name the backup %v", err, backups)
				}
				if _, err := Open(ctx, storage.Local(dir), &Options{ReadOnly: true}); err == nil {
					t.Fatal("the table opens without a log")
				}
				if err := os.Rename(backups[0], filepath.Join(dir, LogDir)); err != nil {
					t.Fatal(err)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(dir, UpgradeStagingPrefix+"*")); !second && len(left) != 0 {
				t.Fatalf("a failed first rename left %v", left)
			}
			fresh := mustOpen(t, storage.Local(dir), &Options{ReadOnly: true})
			if !fresh.State().Meta.NeedsUpgrade() || fresh.State().Version != want.Version {
				t.Fatalf("after the failure: legacy %d version %d", fresh.State().Meta.LegacyFormat, fresh.State().Version)
			}
		})
	}
}
