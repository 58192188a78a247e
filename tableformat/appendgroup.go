// Group commit: small appends that arrive together share one segment and
// one commit.

package tableformat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/google/uuid"
)

// A small append (at most AppendOptions.GroupRows rows and GroupBytes of
// input) is read into memory, normalized and checked on its own goroutine,
// and then queued on its table handle. One of the queued appends leads:
// it takes every append queued so far, checks each against the table's
// coverage and against the ones before it in the group, writes the rows
// of those that pass into one segment with one coverage sidecar, and
// commits them in one commit. Each append in the group returns once that
// commit is durable, as if it had committed alone: an acknowledged append
// is durable, and the group's appends become visible together.
//
// A single writer has a group of one and pays what it paid before. With
// many writers, each commit costs three fsyncs (segment, sidecar, commit)
// and the CURRENT publication whatever the number of appends in it, which
// is what lets eight writers of 100-row appends share a 2-core machine's
// disk; one segment instead of eight also keeps the table smaller for
// compaction.

// groupMember is one queued append.
type groupMember struct {
	ctx   context.Context
	opts  *AppendOptions
	recs  []arrow.RecordBatch // canonical batches; released by the group
	stats *streamStats
	ir    indexReader
	// schema is the table schema the batches were normalized to.
	schema *Schema
	arrow  *arrow.Schema

	// wake is signalled when the member's result is in, or when it must
	// lead the queue.
	wake chan struct{}
	res  *AppendResult
	err  error
	done bool
}

// appendGroups is a table handle's queue of small appends.
type appendGroups struct {
	mu      sync.Mutex
	queue   []*groupMember
	leading bool

	// What the previous group saw, for the next leader's wait: the
	// appends in flight when it committed (its own and those queued
	// behind it), how long its commit took, and when it ended.
	inFlight int
	took     time.Duration
	ended    time.Time
	// grew is signalled when the queue reaches want while a leader waits.
	grew chan struct{}
	want int
}

// enqueue queues m and reports whether it leads (no one else does).
func (g *appendGroups) enqueue(m *groupMember) (lead bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.queue = append(g.queue, m)
	lead = !g.leading
	if lead {
		g.leading = true
	}
	if g.want > 0 && len(g.queue) >= g.want {
		select {
		case g.grew <- struct{}{}:
		default:
		}
	}
	return lead
}

// gather waits, within the limits GroupWait and the previous commit set,
// until the queue holds as many appends as were in flight when the
// previous group committed, and returns the queue. The caller leads.
func (g *appendGroups) gather(limit time.Duration) []*groupMember {
	g.mu.Lock()
	defer g.mu.Unlock()
	want, wait := g.inFlight, min(limit, g.took/2)
	// A queue that went quiet for longer than a commit has no writers
	// about to come back: the estimate is stale.
	if time.Since(g.ended) > 2*g.took+wait {
		want = 0
	}
	if wait > 0 && len(g.queue) < want {
		if h := testHookGroupWait; h != nil {
			h(want, len(g.queue), wait)
		}
		if g.grew == nil {
			g.grew = make(chan struct{}, 1)
		}
		g.want = want
		g.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-g.grew:
		case <-timer.C:
		}
		timer.Stop()
		g.mu.Lock()
		g.want = 0
		select { // a signal sent as the timer fired
		case <-g.grew:
		default:
		}
	}
	batch := g.queue
	g.queue = nil
	return batch
}

// testHookGroupWait, when set, is told each time a leader waits: for how
// many appends, how many are queued, and for how long at most.
var testHookGroupWait func(want, queued int, wait time.Duration)

// committed records what the group of n appends that took d saw; the
// caller holds g.mu, and the queue holds the appends that came meanwhile.
func (g *appendGroups) committed(n int, d time.Duration) {
	g.inFlight, g.took, g.ended = n+len(g.queue), d, time.Now()
}

// groupable reports whether an append of rows rows and bytes bytes of
// input may join a group.
func (o *AppendOptions) groupable(rows, bytes int64) bool {
	return o.GroupRows > 0 && rows <= o.GroupRows && bytes <= o.GroupBytes
}

// bufferSmall reads rdr until it ends or holds more than the group limits.
// It returns the batches read (retained; the caller releases them) and
// whether the stream ended within the limits (the caller checks rdr.Err).
func bufferSmall(rdr array.RecordReader, opts *AppendOptions) (recs []arrow.RecordBatch, small bool) {
	var rows, bytes int64
	for rdr.Next() {
		rec := rdr.RecordBatch()
		if rec.NumRows() == 0 {
			continue
		}
		rec.Retain()
		recs = append(recs, rec)
		rows += rec.NumRows()
		for _, col := range rec.Columns() {
			bytes += int64(col.Data().SizeInBytes())
		}
		if !opts.groupable(rows, bytes) {
			return recs, false
		}
	}
	return recs, true
}

// replayReader returns held batches first, then the rest of rdr.
type replayReader struct {
	array.RecordReader
	held []arrow.RecordBatch
	cur  arrow.RecordBatch
}

func (r *replayReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	if len(r.held) > 0 {
		r.cur, r.held = r.held[0], r.held[1:]
		return true
	}
	return r.RecordReader.Next()
}

func (r *replayReader) RecordBatch() arrow.RecordBatch {
	if r.cur != nil {
		return r.cur
	}
	return r.RecordReader.RecordBatch()
}

func (r *replayReader) Record() arrow.RecordBatch { return r.RecordBatch() }

func (r *replayReader) release() {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	for _, rec := range r.held {
		rec.Release()
	}
	r.held = nil
}

// prepareMember normalizes the batches of a small append and computes its
// coverage, bounds and in-input duplicates (on the caller's goroutine, so
// that the appends of a group do this work in parallel).
func (t *Table) prepareMember(ctx context.Context, st *State, in *arrow.Schema, raw []arrow.RecordBatch, norm *normalizer, opts *AppendOptions) (*groupMember, error) {
	schema := st.Schema()
	ir, er := newIndexReader(st, schema), newEntityReader(st, schema)
	m := &groupMember{ctx: ctx, opts: opts, ir: ir, schema: schema, arrow: norm.canonical, wake: make(chan struct{}, 1),
		stats: &streamStats{cov: newSegmentCoverage(st.Index(), len(er.cols) > 0)}}
	mem := opts.Alloc
	if mem == nil {
		mem = scanPool
	}
	for _, rec := range raw {
		if !rec.Schema().Equal(in) {
			m.release()
			return nil, invalidf("a batch's schema differs from the stream's schema: %s", rec.Schema())
		}
		canon := norm.apply(mem, rec)
		m.recs = append(m.recs, canon)
		if err := m.stats.observe(ctx, ir, er, canon); err != nil {
			m.release()
			return nil, err
		}
	}
	if m.stats.rows == 0 {
		m.release()
		return nil, invalidf("the input stream has no rows")
	}
	if m.stats.dups > 0 {
		m.release()
		return nil, &OverlapError{Within: true, Count: m.stats.dups, Example: m.stats.firstDup}
	}
	return m, nil
}

func (m *groupMember) release() {
	for _, r := range m.recs {
		r.Release()
	}
	m.recs = nil
}

// appendGrouped queues m and returns its outcome. The first member to find
// no leader leads; a leader hands the lead to the next queued member when
// it is done, so no append waits for more than the group in progress and
// its own.
func (t *Table) appendGrouped(m *groupMember) (*AppendResult, error) {
	g := &t.groups
	lead := g.enqueue(m)
	for !lead {
		select {
		case <-m.wake:
		case <-m.ctx.Done():
			if g.leave(m) {
				m.release()
				return nil, m.ctx.Err()
			}
			<-m.wake // taken: the commit is under way; wait for its outcome
		}
		g.mu.Lock()
		done := m.done
		g.mu.Unlock()
		if done {
			return m.res, m.err
		}
		lead = true // the previous leader handed over
	}
	batch := g.gather(m.opts.GroupWait)
	start := time.Now()
	t.commitGroup(batch)
	g.mu.Lock()
	g.committed(len(batch), time.Since(start))
	g.handOver()
	g.mu.Unlock()
	return m.res, m.err
}

// handOver passes the lead to the first queued member, or ends it. The
// caller holds g.mu.
func (g *appendGroups) handOver() {
	if len(g.queue) > 0 {
		g.queue[0].wake <- struct{}{} // the next one leads
	} else {
		g.leading = false
	}
}

// leave takes m, whose context ended, out of the queue if no leader took
// it yet, and reports whether it did. If the lead was just handed to m, it
// is handed on.
func (g *appendGroups) leave(m *groupMember) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, q := range g.queue {
		if q == m {
			g.queue = append(g.queue[:i], g.queue[i+1:]...)
			select {
			case <-m.wake:
				g.handOver()
			default:
			}
			return true
		}
	}
	return false
}

// finish records a member's outcome and wakes it.
func (t *Table) finishMember(m *groupMember, res *AppendResult, err error) {
	m.release()
	t.groups.mu.Lock()
	m.res, m.err, m.done = res, err, true
	t.groups.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// commitGroup commits the members of one group (the caller's among them)
// and finishes every one of them. The work runs under the first member's
// context stripped of its cancellation: the commit serves every member,
// and a member that gives up still gets (and ignores) its outcome.
func (t *Table) commitGroup(members []*groupMember) {
	ctx := context.WithoutCancel(members[0].ctx)
	opts := members[0].opts
	attempt := uuid.New()
	var parts []*groupSegment
	var early *earlyCommit // the commit's files, started before the segments are encoded
	removeFiles := func() {
		for _, p := range parts {
			_ = p.settle()
			if p.w != nil {
				_ = p.w.file.Close()
				p.w = nil
			}
			for _, f := range p.files {
				t.log.removeQuietly(f)
			}
			p.files = nil
		}
		if early != nil {
			early.abandon(&t.log)
			early = nil
		}
	}
	failAll := func(err error) {
		removeFiles()
		for _, p := range parts {
			for _, m := range p.members {
				t.finishMember(m, nil, err)
			}
		}
	}
	live := members
	for retry := 0; ; retry++ {
		st, err := t.Refresh(ctx)
		if err == nil {
			err = st.Meta.CheckWrite()
		}
		if err != nil {
			removeFiles()
			for _, m := range live {
				t.finishMember(m, nil, err)
			}
			return
		}
		table, err := t.loadCoverage(ctx, st)
		if err != nil {
			removeFiles()
			for _, m := range live {
				t.finishMember(m, nil, err)
			}
			return
		}
		// Judge each member against the table and the members before it.
		accepted, rewrite := t.judgeMembers(st, table, live, parts)
		live = accepted
		if len(live) == 0 {
			removeFiles()
			return
		}
		var union *segmentCoverage
		if rewrite {
			removeFiles()
			parts = partition(live)
			early = t.log.startCommit(st.versionOrZero() + 1)
			if err := coverGroupSegments(st, parts); err != nil {
				failAll(err)
				return
			}
			// The table's coverage with the group's is computed on the
			// other core while the segments are encoded.
			extending := goJob(func() (err error) {
				union, err = extendWithParts(st, table, parts)
				return err
			})
			err := t.encodeGroupSegments(ctx, st, parts, attempt)
			if uerr := extending.wait(); err == nil {
				err = uerr
			}
			if err != nil {
				failAll(err)
				return
			}
		} else if union, err = extendWithParts(st, table, parts); err != nil {
			failAll(err)
			return
		}
		actions := make([]Action, 0, len(parts)+1)
		for _, p := range parts {
			actions = append(actions, AddSegment{Segment: p.seg})
		}
		if opts.TableSnapshot {
			name, data := union.encodeTable(attempt)
			p, err := writeDurableSidecar(t, tableCoverageDir, fmt.Sprintf("%d-%s", st.Version+1, name), data)
			if err != nil {
				failAll(err)
				return
			}
			parts[0].files = append(parts[0].files, p)
			actions = append(actions, UpdateTableCoverage{Coverage: CoveragePointer{IndexKind: st.Index().Kind, Path: p}})
		} else {
			if err := t.union.ensure(t); err != nil {
				failAll(err)
				return
			}
			if !st.coverageIsUnion() {
				actions = append(actions, UpdateTableCoverage{Coverage: unionPointer(st.Index().Kind)})
			}
		}
		prep, err := t.prepareCommit(st, actions)
		if err != nil {
			failAll(err)
			return
		}
		// The commit's own files are written while the segments and
		// sidecars it names become durable; it is linked only after.
		stage := func() error {
			if early == nil || early.v != prep.next.Version {
				return t.stage(prep)
			}
			s, err := early.stage(&t.log, prep.data)
			early = nil
			prep.staged = s
			return err
		}
		if parts[0].w != nil {
			err = t.syncGroupSegments(st, parts, stage)
		} else {
			err = stage() // a retry: the segments are durable already
		}
		if err == nil {
			if h := testHookBeforeCommit; h != nil && retry == 0 {
				h()
			}
			err = t.checkGroupFiles(parts)
		}
		if err != nil {
			prep.discard(t)
			failAll(err)
			return
		}
		next, err := t.commitPrepared(ctx, prep)
		prep.discard(t)
		if err == nil {
			t.covCache.put(next, union)
			if early != nil { // staged without it (a version it was not made for)
				early.abandon(&t.log)
				early = nil
			}
			for _, p := range parts {
				for _, m := range p.members {
					t.finishMember(m, &AppendResult{Version: next.Version, Segment: p.seg, Rows: m.stats.rows, Retries: retry, Grouped: len(live)}, nil)
				}
			}
			return
		}
		if errors.Is(err, ErrAmbiguousOutcome) {
			var paths []string
			for _, p := range parts {
				paths = append(paths, p.seg.Path)
				p.files = nil // keep every file: the commit may exist
			}
			failAll(fmt.Errorf("%w (segment %v was kept; reopen the table to see whether it was committed)", err, paths))
			return
		}
		if !errors.Is(err, ErrConflict) {
			failAll(err)
			return
		}
		if retry >= opts.MaxRetries {
			failAll(fmt.Errorf("%w (the append gave up after %d retries: other writers kept committing first; nothing was committed)", err, retry))
			return
		}
		if err := retryBackoff(ctx, retry); err != nil {
			failAll(err)
			return
		}
		if opts.TableSnapshot {
			// The snapshot was for the version just lost.
			p := parts[0]
			t.log.removeQuietly(p.files[len(p.files)-1])
			p.files = p.files[:len(p.files)-1]
		}
	}
}

// judgeMembers finishes the members that cannot be committed on st (an
// overlap with the table or with an earlier member, a schema that no
// longer fits) and returns the others, and whether the segments must be
// written (again): when none are written yet, or when a member they hold
// was refused.
func (t *Table) judgeMembers(st *State, table *segmentCoverage, members []*groupMember, parts []*groupSegment) ([]*groupMember, bool) {
	var accepted []*groupMember
	var group *segmentCoverage
	refused := false
	for _, m := range members {
		err := t.memberFits(st, m)
		if err == nil {
			if n, example := table.overlap(m.stats.cov); n > 0 {
				err = &OverlapError{Count: n, Example: example, Version: st.Version}
			} else if group != nil {
				if n, example := group.overlap(m.stats.cov); n > 0 {
					err = &OverlapError{Count: n, Example: example, Version: st.Version + 1}
				}
			}
		}
		if err != nil {
			refused = true
			t.finishMember(m, nil, err)
			continue
		}
		if group == nil {
			group = newSegmentCoverage(st.Index(), m.stats.cov.set.IsEntity())
		}
		if err := group.set.Absorb(m.stats.cov.set); err != nil {
			refused = true
			t.finishMember(m, nil, corruptf("", st.Version, err, "append coverage does not match the table's entity columns"))
			continue
		}
		accepted = append(accepted, m)
	}
	return accepted, parts == nil || refused
}

// memberFits checks that a member's batches, normalized to the schema of
// an earlier version, can still be committed on st: the schema is the
// same, or st's adds nullable columns at the end (they read as null).
func (t *Table) memberFits(st *State, m *groupMember) error {
	if st.Schema() == nil {
		return fmt.Errorf("%w: the table lost its schema while appending", ErrConflict)
	}
	if !st.Schema().Equal(m.schema) && !schemaExtends(st.Schema(), m.schema) {
		return fmt.Errorf("%w: the table schema changed while appending", ErrConflict)
	}
	return nil
}
