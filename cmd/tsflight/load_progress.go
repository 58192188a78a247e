package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// Progress modes of tsflight load.
const (
	loadProgressOff    = iota
	loadProgressRedraw // a terminal: one line redrawn in place
	loadProgressLines  // not a terminal: plain lines, now and then
)

const (
	loadRedrawEvery = 100 * time.Millisecond // at most 10 redraws a second
	loadLinesEvery  = time.Second            // at most one plain line a second
)

// loadProgress draws the progress of one file on standard error.
type loadProgress struct {
	w     io.Writer
	mode  int
	name  string // the file's base name
	total int64  // file size in bytes
	start time.Time
	last  time.Time // of the last draw; zero before the first
	shown bool      // a redrawn line is on the screen
	width int       // of the redrawn line, to blank a shorter one
}

func newLoadProgress(w io.Writer, mode int, path string, total int64) *loadProgress {
	return &loadProgress{w: w, mode: mode, name: filepath.Base(path), total: total, start: time.Now()}
}

// update draws rows sent and bytes read when the last draw is old enough.
func (p *loadProgress) update(rows, bytes int64) {
	if p.mode == loadProgressOff {
		return
	}
	now := time.Now()
	every := loadRedrawEvery
	if p.mode == loadProgressLines {
		every = loadLinesEvery
	}
	if !p.last.IsZero() && now.Sub(p.last) < every {
		return
	}
	p.last = now
	p.draw(p.line(rows, bytes, now, ""))
}

// waiting shows that everything was sent and the server is committing.
func (p *loadProgress) waiting(rows, bytes int64) {
	if p.mode != loadProgressRedraw {
		return
	}
	p.draw(p.line(rows, bytes, time.Now(), ", committing"))
}

func (p *loadProgress) line(rows, bytes int64, now time.Time, suffix string) string {
	secs := now.Sub(p.start).Seconds()
	s := fmt.Sprintf("%s: %d rows, %s", p.name, rows, humanBytes(bytes))
	if p.total > 0 {
		pct := min(100, float64(bytes)*100/float64(p.total))
		s += fmt.Sprintf(" of %s (%.0f%%)", humanBytes(p.total), pct)
	}
	if secs > 0 {
		s += fmt.Sprintf(", %s/s, %s rows/s", humanBytes(int64(float64(bytes)/secs)), loadRate(float64(rows)/secs))
	}
	return s + fmt.Sprintf(", %.1f s", secs) + suffix
}

func (p *loadProgress) draw(s string) {
	if p.mode == loadProgressLines {
		fmt.Fprintln(p.w, s)
		return
	}
	pad := ""
	if n := len(s); n < p.width {
		pad = fmt.Sprintf("%*s", p.width-n, "")
	}
	p.width = len(s)
	fmt.Fprint(p.w, "\r"+s+pad)
	p.shown = true
}

// clear removes a redrawn line so the summary starts on a clean line.
func (p *loadProgress) clear() {
	if p.shown {
		fmt.Fprintf(p.w, "\r%*s\r", p.width, "")
		p.shown = false
	}
}

// loadRate renders a count per second compactly: 950, 12.3k, 1.25M.
func loadRate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// loadCountingFile counts the bytes read from a file, for the progress
// line. The count is atomic: readers may read columns in parallel.
type loadCountingFile struct {
	f *os.File
	n *atomic.Int64
}

func (c *loadCountingFile) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func (c *loadCountingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.f.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

func (c *loadCountingFile) Seek(offset int64, whence int) (int64, error) {
	return c.f.Seek(offset, whence)
}
