package flightserver

import "github.com/tsflight/tsflight/tableformat/catalog"

// MaxTableNameLen is the longest table name accepted.
const MaxTableNameLen = catalog.MaxNameLen

// ValidateTableName checks a table name as the catalog does
// (catalog.ValidateName): [A-Za-z_][A-Za-z0-9_]*, at most 128 characters;
// a bad one is INVALID_ARGUMENT saying what is wrong.
func ValidateTableName(name string) error { return Status(catalog.ValidateName(name)) }
