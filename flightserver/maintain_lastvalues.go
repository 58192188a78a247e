package flightserver

import (
	"context"
	"errors"
	"time"

	"github.com/tsflight/tsflight/tableformat"
)

// keepLastValues persists the table's last-value index
// (docs/format/last-values.md) when the table moved since the index the
// loop last persisted, at most once per maintenance interval: a server
// restarted after a stream of appends then starts its `last` answers and
// lastpoint queries from an index at most one interval old. Tables
// without entity columns or rows have none. Failures are logged; the index
// is a cache, built on demand anyway.
func (s *Service) keepLastValues(ctx context.Context, name string) {
	m := s.maint
	if ctx.Err() != nil || m.isPaused(name) {
		return
	}
	tb, err := s.Table(ctx, name)
	if err != nil {
		return // damaged or gone: check and describe say why
	}
	st := tb.State()
	if st == nil || st.Meta.CheckWrite() != nil || len(st.Index().EntityColumns) == 0 || len(st.Segments) == 0 {
		return
	}
	m.mu.Lock()
	e := m.entry(name)
	due := e.lastValues != st.Version && time.Since(e.lastValuesAt) >= m.opts.Interval
	if due {
		e.lastValuesAt = time.Now()
	}
	m.mu.Unlock()
	if !due {
		return
	}
	p, rows, err := tb.LastValuesFile(ctx, st)
	switch {
	case err != nil && (errors.Is(err, tableformat.ErrUnsupported) || ctx.Err() != nil):
		s.log.Debug("maintenance: no last-value index", "table", name, "error", err)
		return
	case err != nil:
		s.log.Warn("maintenance: could not persist the last-value index", "table", name, "version", st.Version, "error", err)
		return
	}
	m.mu.Lock()
	e.lastValues = st.Version
	m.mu.Unlock()
	s.log.Debug("maintenance: last-value index persisted", "table", name, "version", st.Version, "path", p, "rows", rows)
}
