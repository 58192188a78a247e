// Upgrade: a format-6 table (timeseries-table-format 0.5 and older) becomes
// a protocol-7 one. The 0.9.0 package replays every commit from 1 and
// cannot read a format-6 commit, so the upgrade cannot be one more commit
// on top: the log itself is converted. Every commit 1..N is rewritten by
// the reference's v6 → v7 rules (upgrade_convert.go) into a staging
// directory beside the log, made durable, and the two directories are
// exchanged atomically; the old log stays as the backup
// _timeseries_log.format6-<UTC time>. Data files and coverage sidecars are
// not touched. Compaction of small segments then runs as an ordinary commit
// on top (Table.Compact). See docs/design.md, "Upgrade", and
// docs/format/upgrade-logs.md.

package tableformat

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// Names of the directories an upgrade leaves beside the log. NB: on-disk
// names (docs/format/upgrade-logs.md).
const (
	// UpgradeStagingPrefix starts the staging directory of a running
	// upgrade, _timeseries_log.upgrade-<16 hex digits>.
	UpgradeStagingPrefix = LogDir + ".upgrade-"
	// UpgradeBackupPrefix starts the backup of a converted format-6 log,
	// _timeseries_log.format6-<UTC time, 20060102T150405Z>.
	UpgradeBackupPrefix = LogDir + ".format6-"
)

// UpgradeOptions configure [Table.Upgrade].
type UpgradeOptions struct {
	// DryRun reports the steps and writes nothing.
	DryRun bool
	// Compact configures the compaction step; nil means
	// DefaultCompactOptions(). Its DryRun is replaced by DryRun.
	Compact *CompactOptions
}

// UpgradeStep is one step of an upgrade in the report.
type UpgradeStep struct {
	// Step is "convert-log", "compact" or "last-values".
	Step string `json:"step"`
	// State is "done", "planned" (a dry run), "not-needed" or, for
	// "last-values" only (a cache: the upgrade stands without it),
	// "failed".
	State string `json:"state"`
	// Detail says what the step does or did.
	Detail string `json:"detail"`
}

// UpgradeReport says what [Table.Upgrade] did (or, in a dry run, would do).
type UpgradeReport struct {
	DryRun bool `json:"dry_run"`
	// StartingVersion is the table's version before the upgrade;
	// CommittedVersion after it (the compaction commit, if any).
	StartingVersion  uint64 `json:"starting_version"`
	CommittedVersion uint64 `json:"committed_version"`
	// LegacyFormat is 6 when the table was a format-6 table, 0 otherwise.
	LegacyFormat uint32 `json:"legacy_format,omitempty"`
	// ConvertedCommits is how many commits were (or would be) converted.
	ConvertedCommits uint64 `json:"converted_commits"`
	// Backup is the table-relative directory holding the format-6 log.
	Backup string `json:"backup,omitempty"`
	// Swap is how the logs were swapped: "exchange" (atomic) or "rename"
	// (two renames, on file systems without an atomic exchange).
	Swap string `json:"swap,omitempty"`
	// Leftovers are staging directories of interrupted upgrades that were
	// (or, in a dry run, would be) removed; LeftoverBackups those that
	// held a swapped-out format-6 log and were renamed to a backup name.
	Leftovers       []string `json:"leftovers,omitempty"`
	LeftoverBackups []string `json:"leftover_backups,omitempty"`
	// Steps lists the steps in order.
	Steps []UpgradeStep `json:"steps"`
	// Compact is the compaction step's report.
	Compact *CompactReport `json:"compact,omitempty"`
}

// Upgrade makes the table a protocol-7 table that timeseries-table-format
// 0.9.0 reads and tsflight writes: a format-6 log is converted and swapped
// in (see the file comment), then small segments are compacted. On a
// protocol-7 table it converts nothing and only compacts, if there is
// anything to compact. Staging directories that an interrupted upgrade
// left are removed first (or, if one holds the swapped-out format-6 log,
// renamed to a backup name).
//
// A crash at any point leaves either the old format-6 table or the new
// protocol-7 one. Other writers of the table (older versions of the Python
// package) must be stopped: a commit they add while the log is converted
// makes the upgrade fail with ErrConflict, and one added after the swap
// lands in the backup.
//
// Errors: ErrInvalidInput for bad compact options (nothing written),
// ErrConflict when the log moved during the conversion, the categories of
// Table.Compact, and storage errors.
func (t *Table) Upgrade(ctx context.Context, opts *UpgradeOptions) (*UpgradeReport, error) {
	if opts == nil {
		opts = &UpgradeOptions{}
	}
	co := DefaultCompactOptions()
	if opts.Compact != nil {
		c := *opts.Compact
		co = &c
	}
	co.DryRun = opts.DryRun
	co.planLegacy = true
	if _, err := co.resolve(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.upgradeMu.Lock() // one upgrade at a time on this handle
	defer t.upgradeMu.Unlock()
	st, err := t.Refresh(ctx)
	if err != nil {
		return nil, err
	}
	rep := &UpgradeReport{DryRun: opts.DryRun, StartingVersion: st.Version, CommittedVersion: st.Version, Steps: []UpgradeStep{}}
	if err := t.clearUpgradeLeftovers(rep); err != nil {
		return nil, err
	}
	if st.Meta.NeedsUpgrade() {
		rep.LegacyFormat = st.Meta.LegacyFormat
		if err := t.convertLog(ctx, st, rep); err != nil {
			return nil, err
		}
	} else {
		rep.Steps = append(rep.Steps, UpgradeStep{Step: "convert-log", State: "not-needed", Detail: fmt.Sprintf("the log is protocol %d already", st.Meta.Protocol)})
	}
	crep, err := t.Compact(ctx, co)
	if err != nil {
		return nil, fmt.Errorf("upgrade: compact (the log conversion, if any, is done): %w", err)
	}
	rep.Compact = crep
	step := UpgradeStep{Step: "compact", State: "done"}
	switch {
	case crep.NoOp:
		step.State, step.Detail = "not-needed", "no small segments to merge"
	case opts.DryRun:
		step.State = "planned"
		groups := "groups"
		if len(crep.Groups) == 1 {
			groups = "group"
		}
		step.Detail = fmt.Sprintf("merge %d small segments in %d %s", crep.SourceSegments, len(crep.Groups), groups)
	default:
		step.Detail = fmt.Sprintf("merged %d segments into %d at version %d", crep.SourceSegments, crep.OutputSegments, crep.CommittedVersion)
		rep.CommittedVersion = crep.CommittedVersion
	}
	rep.Steps = append(rep.Steps, step)
	rep.Steps = append(rep.Steps, t.upgradeLastValues(ctx, opts.DryRun))
	return rep, nil
}

// upgradeLastValues is the upgrade's last step: the table's last-value
// index, written for the upgraded version (lastvalues_store.go). It is a
// file beside the log, not a commit: timeseries-table-format 0.9.0 refuses
// a commit with an action it does not know. A failure is reported in the
// step and does not fail the upgrade: the index is a cache, built on
// demand.
func (t *Table) upgradeLastValues(ctx context.Context, dryRun bool) UpgradeStep {
	step := UpgradeStep{Step: "last-values"}
	st := t.State()
	switch {
	case st == nil || len(st.Index().EntityColumns) == 0:
		step.State, step.Detail = "not-needed", "the table has no entity columns"
		return step
	case st.Schema() == nil || len(st.Segments) == 0:
		step.State, step.Detail = "not-needed", "the table has no rows"
		return step
	case dryRun:
		step.State = "planned"
		step.Detail = "write the last-value index (the newest row per entity) as " + LastValuesPath(st.Version) + " once the table is upgraded"
		if choose, err := t.lastChoose(ctx, st); err == nil {
			step.Detail += fmt.Sprintf(" (%d entities)", len(choose))
		}
		return step
	}
	p, rows, err := t.LastValuesFile(ctx, st)
	if err != nil {
		step.State, step.Detail = "failed", "the last-value index was not written (it is built when first asked for): "+err.Error()
		return step
	}
	step.State, step.Detail = "done", fmt.Sprintf("wrote %s: the newest row of %d entities at version %d", p, rows, st.Version)
	return step
}

// convertLog converts commits 1..st.Version into a staging directory and
// swaps it in (unless a dry run), then checks that the handle reads the
// converted log at the same version.
func (t *Table) convertLog(ctx context.Context, st *State, rep *UpgradeReport) error {
	n := st.Version
	rep.ConvertedCommits = n
	if rep.DryRun {
		rep.Steps = append(rep.Steps, UpgradeStep{Step: "convert-log", State: "planned",
			Detail: fmt.Sprintf("convert %d format-6 commits to protocol %d and keep the old log as %s<time>", n, ProtocolVersion, UpgradeBackupPrefix)})
		return nil
	}
	conv := make([][]byte, 0, n)
	// The commit files above n the log holds now (torn or unreadable
	// ones that the replay ignored): any change to them before the swap
	// is another writer's commit.
	tail, err := t.logTail(LogDir, n)
	if err != nil {
		return err
	}
	if again, err := t.Refresh(ctx); err != nil {
		return err
	} else if again.Version != n {
		return fmt.Errorf("%w: upgrade: the table moved from version %d to %d (stop other writers)", ErrConflict, n, again.Version)
	}
	for v := uint64(1); v <= n; v++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := t.fs.ReadFile(CommitPath(v))
		if err != nil {
			return storageErr("upgrade: read "+CommitPath(v), err)
		}
		if v == n && digestOf(data) != st.digest {
			return fmt.Errorf("%w: upgrade: commit %d changed while the upgrade read the log (stop other writers)", ErrConflict, n)
		}
		c, err := convertCommitV6(data)
		if err != nil {
			return corruptf(CommitPath(v), v, err, "upgrade: cannot convert the commit")
		}
		conv = append(conv, c)
	}
	staging := UpgradeStagingPrefix + randomHex()
	if err := t.writeStaging(staging, conv); err != nil {
		t.removeTreeQuietly(staging)
		return err
	}
	backup, swap, err := t.swapLogs(staging, n, tail)
	if err != nil {
		return err
	}
	rep.Backup, rep.Swap = backup, swap
	rep.Steps = append(rep.Steps, UpgradeStep{Step: "convert-log", State: "done",
		Detail: fmt.Sprintf("converted %d format-6 commits to protocol %d; the old log is %s", n, ProtocolVersion, backup)})
	next, err := t.Refresh(ctx)
	if err != nil {
		return fmt.Errorf("upgrade: reopen the converted log: %w", err)
	}
	if next.Meta.NeedsUpgrade() || next.Version != n {
		return fmt.Errorf("upgrade: the converted log reads as version %d (format %d), want version %d protocol %d", next.Version, legacyOr7(next.Meta), n, ProtocolVersion)
	}
	return nil
}

// writeStaging writes the converted commits and CURRENT into dir, each
// created exclusively and fsynced, then fsyncs dir and the table root.
func (t *Table) writeStaging(dir string, commits [][]byte) error {
	if err := t.fs.MkdirAll(dir); err != nil {
		return storageErr("upgrade: create "+dir, err)
	}
	for i, c := range commits {
		if err := t.log.writeDurable(dir+"/"+path.Base(CommitPath(uint64(i+1))), c); err != nil {
			return err
		}
	}
	if err := t.log.writeDurable(dir+"/CURRENT", []byte(strconv.Itoa(len(commits))+"\n")); err != nil {
		return err
	}
	if err := t.fs.SyncDir(dir); err != nil {
		return storageErr("upgrade: sync "+dir, err)
	}
	if err := t.fs.SyncDir("."); err != nil {
		return storageErr("upgrade: sync the table root", err)
	}
	return nil
}

// swapLogs puts the staging directory in place of the log and the old log
// under a backup name, then fsyncs the root. It prefers one atomic
// exchange; on a file system without one it falls back to two renames
// (the log is missing between them: docs/format/upgrade-logs.md). If a
// commit above n appears in the old log, the swap is undone and the
// upgrade fails with ErrConflict: tail is what the old log held above n
// when the conversion began (see logTail).
func (t *Table) swapLogs(staging string, n uint64, tail string) (backup, how string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now, err := t.logTail(LogDir, n); err != nil || now != tail {
		t.removeTreeQuietly(staging)
		if err != nil {
			return "", "", err
		}
		return "", "", fmt.Errorf("%w: upgrade: another writer committed above version %d while the log was converted (stop other writers)", ErrConflict, n)
	}
	if !t.holdsLegacyLog(LogDir) {
		t.removeTreeQuietly(staging)
		return "", "", fmt.Errorf("%w: upgrade: the log is no longer format 6 (another upgrade finished first)", ErrConflict)
	}
	backup, err = t.backupName()
	if err != nil {
		return "", "", err
	}
	how = "exchange"
	err = t.fs.Exchange(LogDir, staging)
	switch {
	case errors.Is(err, storage.ErrExchangeUnsupported):
		how = "rename"
		if err := t.fs.Rename(LogDir, backup); err != nil {
			t.removeTreeQuietly(staging)
			return "", "", storageErr("upgrade: rename the log to "+backup, err)
		}
		if err := t.fs.Rename(staging, LogDir); err != nil {
			return "", "", storageErr("upgrade: rename "+staging+" to the log (the old log is "+backup+"; rename it back to restore the table)", err)
		}
	case err != nil:
		t.removeTreeQuietly(staging)
		return "", "", storageErr("upgrade: exchange the log with "+staging, err)
	default:
		// The old log is now at the staging name.
		if now, err := t.logTail(staging, n); err != nil || now != tail || !t.holdsLegacyLog(staging) {
			if err := t.fs.Exchange(LogDir, staging); err != nil {
				return "", "", storageErr("upgrade: undo the exchange after a concurrent commit", err)
			}
			t.removeTreeQuietly(staging)
			return "", "", fmt.Errorf("%w: upgrade: another writer committed above version %d while the log was swapped; the swap was undone (stop other writers)", ErrConflict, n)
		}
		if err := t.fs.Rename(staging, backup); err != nil {
			return "", "", storageErr("upgrade: rename the old log to "+backup, err)
		}
	}
	if err := t.fs.SyncDir("."); err != nil {
		return "", "", storageErr("upgrade: sync the table root after the swap", err)
	}
	return backup, how, nil
}

// logTail fingerprints the commit files above version n in dir (a log
// directory): their names and the digests of their contents, in order.
func (t *Table) logTail(dir string, n uint64) (string, error) {
	names, err := t.fs.List(dir)
	if err != nil {
		return "", storageErr("upgrade: list "+dir, err)
	}
	var b strings.Builder
	for _, name := range names {
		v, err := strconv.ParseUint(strings.TrimSuffix(name, ".json"), 10, 64)
		if err != nil || v <= n || path.Base(CommitPath(v)) != name {
			continue
		}
		data, err := t.fs.ReadFile(dir + "/" + name)
		if err != nil {
			return "", storageErr("upgrade: read "+dir+"/"+name, err)
		}
		d := digestOf(data)
		fmt.Fprintf(&b, "%s:%x;", name, d[:])
	}
	return b.String(), nil
}

// backupName is UpgradeBackupPrefix plus the time, with a random suffix if
// that name is taken.
func (t *Table) backupName() (string, error) {
	name := UpgradeBackupPrefix + t.opts.now().UTC().Format("20060102T150405Z")
	if _, err := t.fs.Stat(name); storage.IsNotExist(err) {
		return name, nil
	} else if err != nil {
		return "", storageErr("upgrade: stat "+name, err)
	}
	return name + "-" + randomHex()[:8], nil
}

// clearUpgradeLeftovers deals with the staging directories of interrupted
// upgrades: one whose commit 1 is format 6 is a swapped-out log whose
// rename to a backup name was interrupted, and gets that name; any other
// is an unfinished staging directory and is removed. A dry run only
// reports them.
func (t *Table) clearUpgradeLeftovers(rep *UpgradeReport) error {
	names, err := t.fs.List(".")
	if err != nil {
		return storageErr("upgrade: list the table root", err)
	}
	for _, n := range names {
		if !strings.HasPrefix(n, UpgradeStagingPrefix) {
			continue
		}
		if t.holdsLegacyLog(n) {
			rep.LeftoverBackups = append(rep.LeftoverBackups, n)
			if rep.DryRun {
				continue
			}
			b, err := t.backupName()
			if err != nil {
				return err
			}
			if err := t.fs.Rename(n, b); err != nil {
				return storageErr("upgrade: rename "+n+" to "+b, err)
			}
			continue
		}
		rep.Leftovers = append(rep.Leftovers, n)
		if !rep.DryRun {
			if err := t.removeTree(n); err != nil {
				return err
			}
		}
	}
	if !rep.DryRun && len(rep.Leftovers)+len(rep.LeftoverBackups) > 0 {
		if err := t.fs.SyncDir("."); err != nil {
			return storageErr("upgrade: sync the table root", err)
		}
	}
	return nil
}

// holdsLegacyLog reports whether dir/0000000001.json is a format-6 commit.
func (t *Table) holdsLegacyLog(dir string) bool {
	data, err := t.fs.ReadFile(dir + "/" + path.Base(CommitPath(1)))
	if err != nil {
		return false
	}
	c, err := decodeCommit(data)
	if err != nil {
		return false
	}
	for _, a := range c.Actions {
		if m, ok := a.(UpdateTableMeta); ok && m.Meta.NeedsUpgrade() {
			return true
		}
	}
	return false
}

// removeTree removes dir and everything under it (links themselves, never
// what they point at).
func (t *Table) removeTree(dir string) error {
	names, err := t.fs.List(dir)
	if err != nil && !storage.IsNotExist(err) {
		return storageErr("upgrade: list "+dir, err)
	}
	for _, n := range names {
		p := dir + "/" + n
		info, err := t.fs.Stat(p)
		if err == nil && info.IsDir && !info.Symlink {
			if err := t.removeTree(p); err != nil {
				return err
			}
			continue
		}
		if err := t.fs.Remove(p); err != nil && !storage.IsNotExist(err) {
			return storageErr("upgrade: remove "+p, err)
		}
	}
	if err := t.fs.Remove(dir); err != nil && !storage.IsNotExist(err) {
		return storageErr("upgrade: remove "+dir, err)
	}
	return nil
}

func (t *Table) removeTreeQuietly(dir string) { _ = t.removeTree(dir) }
