package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/util"
	"google.golang.org/grpc/codes"
)

// Sending: one DoPut per file, streamed in batches, and the report of
// each file's result.

// loadPutAnswer is the PutResult's app_metadata.
type loadPutAnswer struct {
	Version uint64 `json:"version"`
	Rows    int64  `json:"rows"`
	Segment string `json:"segment"`
}

// send streams one file as one DoPut and reports it.
func (l *loadJob) send(ctx context.Context, f *loadFile) (*loadResult, error) {
	start := time.Now()
	res := &loadResult{File: f.path, Table: l.table.name, Bytes: f.size}
	if f.rows == 0 {
		return l.report(res, start, nil)
	}
	var read atomic.Int64
	src, err := loadOpen(ctx, f.path, f.format, f.csvSchema, l.mem, l.batchRows, &read)
	if err != nil {
		return nil, fmt.Errorf("%s: %v; nothing was sent", f.path, loadPathError(err))
	}
	defer src.close()

	// The stream is cancelled by a signal only until the last batch is
	// sent: once the server has everything, its answer is awaited.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	unhook := context.AfterFunc(ctx, cancel)
	defer unhook()

	prog := newLoadProgress(l.e.stderr, l.progress, f.path, f.size)
	defer prog.clear()
	notCommitted := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while sending %s: nothing of it was committed", f.path)
		}
		return loadNotCommitted(f.path, err)
	}

	stream, err := l.c.fl.DoPut(sctx)
	if err != nil {
		return nil, notCommitted(l.c.wrap(err))
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(f.send), ipc.WithAllocator(l.mem))
	w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{l.table.name}})
	// serverErr is the server's reason when a write finds the stream ended.
	serverErr := func(err error) error {
		if errors.Is(err, io.EOF) {
			if _, rerr := stream.Recv(); rerr != nil && !errors.Is(rerr, io.EOF) {
				err = rerr
			}
		}
		return l.c.wrap(err)
	}

	for {
		if ctx.Err() != nil {
			return nil, notCommitted(ctx.Err())
		}
		rec, err := loadNext(src)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if f.format != loadCSV { // CSV errors name the line
				err = fmt.Errorf("reading the file failed: %w", err)
			}
			return nil, notCommitted(err)
		}
		out, err := f.convert(rec, res.Rows)
		if err != nil {
			return nil, notCommitted(err)
		}
		err = l.write(w, out)
		out.Release()
		if err != nil {
			return nil, notCommitted(serverErr(err))
		}
		res.Rows += out.NumRows()
		prog.update(res.Rows, read.Load())
	}
	if res.Rows == 0 {
		return l.report(res, start, nil) // the deferred cancel drops the stream
	}
	if err := w.Close(); err != nil {
		return nil, notCommitted(serverErr(err))
	}
	if !unhook() {
		return nil, notCommitted(context.Canceled)
	}
	if err := stream.CloseSend(); err != nil {
		return nil, notCommitted(serverErr(err))
	}
	prog.waiting(res.Rows, read.Load())
	put, err := stream.Recv()
	if err != nil {
		err = l.c.wrap(err)
		var se *serverError
		if errors.As(err, &se) && se.code != codes.Unknown {
			return nil, loadNotCommitted(f.path, err)
		}
		// Not %w: whatever the cause, this is not "nothing was done".
		return nil, fmt.Errorf("%s: %v; %w: check with tsflight describe %s", f.path, err, errMaybeCommitted, l.table.name)
	}
	for { // the stream ends after the one result
		if _, err := stream.Recv(); err != nil {
			break
		}
	}
	var ans loadPutAnswer
	if err := json.Unmarshal(put.AppMetadata, &ans); err != nil {
		return nil, fmt.Errorf("%s: the server committed it but its answer %q is unreadable: %v", f.path, put.AppMetadata, err)
	}
	prog.clear()
	return l.report(res, start, &ans)
}

// errMaybeCommitted is in the error of a file that the server had whole
// when the connection failed: it may have committed it.
var errMaybeCommitted = errors.New("the server had the whole file and may have committed it")

// loadNotCommitted is the error of a file the server did not commit.
func loadNotCommitted(path string, err error) error {
	if strings.Contains(err.Error(), "nothing was committed") { // the server said so
		return fmt.Errorf("%s: %w", path, err)
	}
	return fmt.Errorf("%s: %w; nothing of it was committed", path, err)
}

// write sends rec, split so that no batch has more than batchRows rows or
// about loadMaxBatchBytes bytes.
func (l *loadJob) write(w *flight.Writer, rec arrow.RecordBatch) error {
	n := rec.NumRows()
	if n == 0 {
		return nil
	}
	per := int64(l.batchRows)
	if size := util.TotalRecordSize(rec); size > loadMaxBatchBytes {
		pieces := (size + loadMaxBatchBytes - 1) / loadMaxBatchBytes
		per = min(per, max(1, (n+pieces-1)/pieces))
	}
	if n <= per {
		return w.Write(rec)
	}
	for off := int64(0); off < n; off += per {
		part := rec.NewSlice(off, min(off+per, n))
		err := w.Write(part)
		part.Release()
		if err != nil {
			return err
		}
	}
	return nil
}

// report prints the summary line of a file (and its JSON object).
func (l *loadJob) report(res *loadResult, start time.Time, ans *loadPutAnswer) (*loadResult, error) {
	res.Seconds = time.Since(start).Seconds()
	if ans == nil {
		fmt.Fprintf(l.e.stderr, "skipped %s: no rows, nothing to load\n", res.File)
	} else {
		v := ans.Version
		res.Version = &v
		res.Segment = ans.Segment
		if ans.Rows > 0 {
			res.Rows = ans.Rows
		}
		fmt.Fprintf(l.e.stderr, "loaded %s: %d rows, %s in %.1f s; table %s version %d, segment %s\n",
			res.File, res.Rows, humanBytes(res.Bytes), res.Seconds, res.Table, ans.Version, ans.Segment)
	}
	if l.json {
		b, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		if _, err := l.e.stdout.Write(append(b, '\n')); err != nil {
			return nil, err
		}
	}
	return res, nil
}
