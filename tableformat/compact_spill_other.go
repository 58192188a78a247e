//go:build !linux

package tableformat

import "os"

// createSpillFile creates a new spill file in dir and removes its name at
// once (createNamedSpillFile).
func createSpillFile(dir string) (*os.File, string, error) { return createNamedSpillFile(dir) }
