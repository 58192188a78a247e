package tableformat

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// createSpillFile opens a new spill file in dir that has no name at all
// (O_TMPFILE): a process killed at any moment leaves nothing behind. name
// is "" then. Where the file system cannot (EOPNOTSUPP; EISDIR or EINVAL
// from kernels before 3.11), it falls back to a named file removed at
// once (createNamedSpillFile).
func createSpillFile(dir string) (f *os.File, name string, err error) {
	f, err = os.OpenFile(dir, os.O_RDWR|unix.O_TMPFILE, 0o600)
	if err == nil {
		return f, "", nil
	}
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
		return createNamedSpillFile(dir)
	}
	return nil, "", err
}
