package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/grpclog"
)

var logLevels = []string{"trace", "debug", "info", "warn", "error"}

// newLogger returns the process logger: text lines ("2006-01-02T15:04:05Z
// [INFO]  message: key=value") or one JSON object per line, on w.
func newLogger(w io.Writer, level, format string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Level:           hclog.LevelFromString(level),
		Output:          w,
		JSONFormat:      format == "json",
		Color:           hclog.ColorOff,
		TimeFormat:      "2006-01-02T15:04:05.000Z07:00",
		IncludeLocation: false,
	})
}

// grpcLogger sends gRPC's own log lines to hclog, one level quieter than
// gRPC rates them (its warnings are mostly clients going away), so that
// --log-format json output stays JSON.
type grpcLogger struct{ l hclog.Logger }

var _ grpclog.LoggerV2 = grpcLogger{}

func (g grpcLogger) Info(args ...any)                 { g.l.Trace(strings.TrimSpace(fmt.Sprint(args...))) }
func (g grpcLogger) Infoln(args ...any)               { g.l.Trace(strings.TrimSpace(fmt.Sprintln(args...))) }
func (g grpcLogger) Infof(format string, args ...any) { g.l.Trace(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Warning(args ...any)              { g.l.Debug(strings.TrimSpace(fmt.Sprint(args...))) }
func (g grpcLogger) Warningln(args ...any)            { g.l.Debug(strings.TrimSpace(fmt.Sprintln(args...))) }
func (g grpcLogger) Warningf(format string, args ...any) {
	g.l.Debug(fmt.Sprintf(format, args...))
}
func (g grpcLogger) Error(args ...any)   { g.l.Error(strings.TrimSpace(fmt.Sprint(args...))) }
func (g grpcLogger) Errorln(args ...any) { g.l.Error(strings.TrimSpace(fmt.Sprintln(args...))) }
func (g grpcLogger) Errorf(format string, args ...any) {
	g.l.Error(fmt.Sprintf(format, args...))
}
func (g grpcLogger) Fatal(args ...any)   { g.l.Error(fmt.Sprint(args...)); os.Exit(exitFail) }
func (g grpcLogger) Fatalln(args ...any) { g.l.Error(fmt.Sprintln(args...)); os.Exit(exitFail) }
func (g grpcLogger) Fatalf(format string, args ...any) {
	g.l.Error(fmt.Sprintf(format, args...))
	os.Exit(exitFail)
}
func (g grpcLogger) V(l int) bool { return l <= 0 && g.l.IsTrace() }
