//go:build !linux

package storage

import (
	"fmt"
	"os"
)

// Exchange implements [FS]. Only Linux (renameat2) can exchange two names
// atomically; elsewhere it always fails with ErrExchangeUnsupported.
func (l *LocalFS) Exchange(a, b string) error {
	if _, err := l.path("exchange", a); err != nil {
		return err
	}
	if _, err := l.path("exchange", b); err != nil {
		return err
	}
	return &os.LinkError{Op: "exchange", Old: a, New: b, Err: fmt.Errorf("%w on this system", ErrExchangeUnsupported)}
}
