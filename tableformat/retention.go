// Retention: which versions stay readable, and which files only expired
// versions need.
//
// Version v (not the newest) is superseded by commit v+1. It is retained
// while that commit is younger than the keep window (its timestamp is at
// or after now minus the window) and expired after. The window is the
// table property tsflight.keep-snapshots (DefaultKeepSnapshots when
// absent). StateAt refuses expired versions, and Vacuum deletes the files
// that no retained version and not the newest one holds.

package tableformat

import (
	"fmt"
	"sync"
	"time"

	"github.com/tsflight/tsflight/tableformat/storage"
)

// checkRetained returns an ErrNotFound error when version v, older than
// cur, is expired under cur's keep window.
func (t *Table) checkRetained(cur *State, v uint64) error {
	keep := cur.KeepSnapshots()
	at, ok := t.stamps.get(v + 1)
	if !ok {
		c, err := t.log.readCommit(v + 1)
		if storage.IsNotExist(err) {
			return corruptf(CommitPath(v+1), v+1, nil, "commit %d is missing", v+1)
		}
		if err != nil {
			return err
		}
		at = c.Timestamp
		t.stamps.put(v+1, at)
	}
	if !at.Before(t.opts.now().Add(-keep)) {
		return nil
	}
	where := "table property " + PropertyKeepSnapshots
	if _, set := cur.Properties[PropertyKeepSnapshots]; !set {
		where = "the default of table property " + PropertyKeepSnapshots
	}
	return fmt.Errorf("%w: version %d was superseded at %s; versions superseded more than %s ago are not kept (%s)",
		ErrNotFound, v, formatTime(at), keep, where)
}

// commitStamps remembers the timestamps of commits a handle made or read
// for the keep window, so that StateAt of a version the handle just held
// reads no file.
type commitStamps struct {
	mu sync.Mutex
	m  map[uint64]time.Time
}

func (c *commitStamps) get(v uint64) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.m[v]
	return at, ok
}

func (c *commitStamps) put(v uint64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= 4096 {
		c.m = map[uint64]time.Time{}
	}
	c.m[v] = at
}

func (c *commitStamps) clear() {
	c.mu.Lock()
	c.m = nil
	c.mu.Unlock()
}

// fileLives follows the log commit by commit and records, for every path
// a commit names, the runs of versions whose state holds it: a segment
// and its coverage sidecar from the AddSegment to the RemoveSegment of
// the segment, a table coverage snapshot from the UpdateTableCoverage
// pointing at it to the next one. With the commit timestamps it then
// tells which paths only expired versions hold.
type fileLives struct {
	version uint64
	// named holds every path any commit named (the orphan rule: a file
	// none names is unreferenced).
	named map[string]bool
	// pinned paths are never expired: named by an action this build does
	// not know, by commit files the replay did not reach, or held by the
	// newest state.
	pinned map[string]bool
	paths  map[string]*pathLife
	// segCov maps each live segment to its coverage path ("" for none).
	segCov map[string]string
	// coverage is the coverage pointer's path ("" before the first).
	coverage string
	// stamps[v-1] is commit v's timestamp.
	stamps []time.Time
	// props are the table properties at version.
	props map[string]string
}

// pathLife is the runs of versions whose state holds one path.
type pathLife struct {
	open  int    // references in the state at fileLives.version
	since uint64 // first version of the open run
	// spans are the closed runs, [first, last] version.
	spans [][2]uint64
}

func newFileLives() *fileLives {
	return &fileLives{named: map[string]bool{}, pinned: map[string]bool{}, paths: map[string]*pathLife{}, segCov: map[string]string{}}
}

func (f *fileLives) life(p string) *pathLife {
	l := f.paths[p]
	if l == nil {
		l = &pathLife{}
		f.paths[p] = l
	}
	return l
}

// enter records that the state of version v holds p (one more time).
func (f *fileLives) enter(p string, v uint64) {
	f.named[p] = true
	l := f.life(p)
	if l.open == 0 {
		l.since = v
	}
	l.open++
}

// leave records that commit v drops one reference to p: its last version
// is v-1 when no other holds it. A run that ends where it began (added
// and dropped by one commit) held p in no state and is not recorded.
func (f *fileLives) leave(p string, v uint64) {
	l := f.paths[p]
	if l == nil || l.open == 0 {
		return
	}
	if l.open--; l.open == 0 && v > l.since {
		l.spans = append(l.spans, [2]uint64{l.since, v - 1})
	}
}

// add follows commit c, which must be the next one (replayed before by
// the handle, so valid).
func (f *fileLives) add(c *Commit) error {
	if c.Version != f.version+1 {
		return corruptf(CommitPath(c.Version), c.Version, nil, "commit %d does not follow %d", c.Version, f.version)
	}
	v := c.Version
	f.version = v
	f.stamps = append(f.stamps, c.Timestamp)
	for _, a := range c.Actions {
		switch a := a.(type) {
		case AddSegment:
			s := a.Segment
			if _, live := f.segCov[s.Path]; live {
				continue // a replayed log never does this
			}
			f.enter(s.Path, v)
			if s.CoveragePath != "" {
				f.enter(s.CoveragePath, v)
			}
			f.segCov[s.Path] = s.CoveragePath
		case RemoveSegment:
			f.named[a.Path] = true
			cov, live := f.segCov[a.Path]
			if !live {
				continue // removing a path that is not live changes nothing
			}
			delete(f.segCov, a.Path)
			f.leave(a.Path, v)
			if cov != "" {
				f.leave(cov, v)
			}
		case UpdateTableCoverage:
			if f.coverage != "" {
				f.leave(f.coverage, v)
			}
			f.coverage = a.Coverage.Path
			f.enter(a.Coverage.Path, v)
		case SetTableProperties:
			props, err := applyProperties(f.props, a)
			if err != nil {
				return corruptf(CommitPath(v), v, nil, "SetTableProperties: %v", err)
			}
			f.props = props
		}
	}
	return nil
}

// keep is the keep window of the properties at the newest version.
func (f *fileLives) keep() time.Duration {
	return (&State{Properties: f.props}).KeepSnapshots()
}

// expired returns the paths that some version's state held but no
// retained version's and not the newest one's, when versions superseded
// before cutoff are expired, leaving out pinned paths and the
// segment-union marker (a fixed name appends point at again and again).
func (f *fileLives) expired(cutoff time.Time) map[string]bool {
	// kept[k]: how many of commits 2..k are at or after the cutoff; commit
	// j at or after it retains version j-1.
	kept := make([]uint64, f.version+1)
	for j := uint64(1); j <= f.version; j++ {
		kept[j] = kept[j-1]
		if j >= 2 && !f.stamps[j-1].Before(cutoff) {
			kept[j]++
		}
	}
	out := map[string]bool{}
	for p, l := range f.paths {
		if l.open > 0 || len(l.spans) == 0 || f.pinned[p] || p == unionCoveragePath {
			continue
		}
		needed := false
		for _, s := range l.spans {
			// Versions s[0]..s[1] are superseded by commits s[0]+1..s[1]+1.
			if kept[s[1]+1] > kept[s[0]] {
				needed = true
				break
			}
		}
		if !needed {
			out[p] = true
		}
	}
	return out
}

// pinState pins every file st holds, whatever the walk found.
func (f *fileLives) pinState(st *State) {
	for i := range st.Segments {
		f.pinned[st.Segments[i].Path] = true
		if p := st.Segments[i].CoveragePath; p != "" {
			f.pinned[p] = true
		}
	}
	if st.Coverage != nil {
		f.pinned[st.Coverage.Path] = true
	}
}
