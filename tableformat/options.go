package tableformat

import (
	"time"

	"github.com/hashicorp/go-hclog"
)

// Options tune how a table is opened and written. Use [DefaultOptions] and
// change fields; the zero value of each field is documented.
type Options struct {
	// Logger receives repairs (CURRENT rolled forward, orphan commit files
	// set aside) and best-effort cleanup failures. nil discards them.
	Logger hclog.Logger

	// Now is the clock for commit timestamps. nil means time.Now.
	Now func() time.Time

	// OrphanGrace is how old an unreadable commit file directly above the
	// newest commit must be before a writer moves it aside into
	// _timeseries_log/_orphaned/ (such a file is a torn write by a process
	// that crashed, typically the reference implementation, which writes
	// commit files in place). Younger files are left alone, because their
	// writer may still be finishing them; the writer gets a conflict.
	// Zero means no grace: set aside at once.
	OrphanGrace time.Duration

	// ReadOnly makes Open and Refresh never write: CURRENT is not repaired
	// when commits above it are found (they are still read).
	ReadOnly bool

	// CheckpointInterval makes a committer write a checkpoint (the
	// replayed state, in _timeseries_log/_checkpoints/, see
	// docs/format/checkpoint.md) after every commit whose version is a
	// multiple of it, and after a commit that finds the newest checkpoint
	// that many versions behind. Open and Refresh then read the newest
	// valid checkpoint and only the commits after it, whatever this is
	// set to. Writing a checkpoint never fails a commit. Zero (and any
	// negative value) means never write one; DefaultOptions uses 100.
	CheckpointInterval int
}

// DefaultCheckpointInterval is the CheckpointInterval of DefaultOptions:
// at most 99 commits are replayed after the newest checkpoint, and a
// checkpoint (one file of about 200 bytes per live segment) is written
// once every 100 commits.
const DefaultCheckpointInterval = 100

// DefaultOptions returns a fresh Options with the defaults: no logging,
// the wall clock, a 30-second orphan grace, repairs allowed, a checkpoint
// every 100 commits.
func DefaultOptions() *Options {
	return &Options{OrphanGrace: 30 * time.Second, CheckpointInterval: DefaultCheckpointInterval}
}

func (o *Options) logger() hclog.Logger {
	if o.Logger == nil {
		return hclog.NewNullLogger()
	}
	return o.Logger
}

func (o *Options) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}
