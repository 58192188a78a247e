package main

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether w is a terminal (not merely a character
// device such as /dev/null).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
