//go:build linux

package storage

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Exchange implements [FS] with renameat2(RENAME_EXCHANGE). A file system
// or kernel that refuses the flag (EINVAL, ENOSYS, ENOTSUP) yields an error
// wrapping ErrExchangeUnsupported.
func (l *LocalFS) Exchange(a, b string) error {
	pa, err := l.path("exchange", a)
	if err != nil {
		return err
	}
	pb, err := l.path("exchange", b)
	if err != nil {
		return err
	}
	if a == "." || b == "." {
		return &os.LinkError{Op: "exchange", Old: a, New: b, Err: errRoot}
	}
	err = unix.Renameat2(unix.AT_FDCWD, pa, unix.AT_FDCWD, pb, unix.RENAME_EXCHANGE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.ENOTSUP), errors.Is(err, unix.EOPNOTSUPP):
		return &os.LinkError{Op: "exchange", Old: a, New: b, Err: fmt.Errorf("%w (%v)", ErrExchangeUnsupported, err)}
	}
	return l.fix(&os.LinkError{Op: "exchange", Old: pa, New: pb, Err: err})
}
