package storage

import (
	"errors"
	"fmt"
	"io/fs"
)

// Errors shared by the implementations for conditions that io/fs has no
// sentinel for. They are wrapped in an *fs.PathError naming the path.
var (
	errIsDir    = errors.New("is a directory")
	errNotDir   = errors.New("not a directory")
	errNotEmpty = errors.New("directory not empty")
	errRoot     = errors.New("is the root directory")
	errIntoSelf = errors.New("cannot move a directory inside itself")
)

// checkPath returns an error wrapping ErrInvalidPath if name is not a valid
// path for an FS. The path is quoted, so that "" and "a//b" stay readable.
func checkPath(op, name string) error {
	if fs.ValidPath(name) {
		return nil
	}
	return fmt.Errorf("%s %q: %w", op, name, ErrInvalidPath)
}

// pathErr builds the error for op on name.
func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}
