package flightserver

// The Python rows of the bad-input catalogue: examples/python/test_bad_input.py
// runs them with pyarrow.flight and ADBC against a live server (.ci/test).
// They are listed here by hand, since no Go test runs them; checkPythonCases
// makes sure each listed test exists in that file.

import (
	"os"
	"regexp"
	"testing"
)

const pythonTests = "../examples/python/test_bad_input.py"

// pythonCatalogueSection is the doc's Python section.
const pythonCatalogueSection = `## Python (pyarrow.flight and ADBC): 24 cases

Run by ` + "`" + `examples/python/test_bad_input.py` + "`" + ` (pytest) against the live server of ` + "`" + `.ci/test` + "`" + `, from
` + "`" + `run_all.sh` + "`" + `; all pass. With ` + "`" + `TSFLIGHT_ROOT` + "`" + ` set (` + "`" + `.ci/test` + "`" + ` sets it) each test snapshots the root
(path, size, SHA-256 of every file) before and after; they write to a scratch table the module
creates first, so they can run again on the same server. The expected column is the exception
pyarrow raises (with the gRPC status it carries) or the ADBC ` + "`" + `status_code` + "`" + `.

| # | case | client call | test | expected | message fragments | writes |
|---|---|---|---|---|---|---|
| P1 | column of the wrong type (usage as utf8) | pyarrow.flight: DoPut PATH | ` + "`" + `test_put_wrong_column_type` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `"usage"` + "`" + ` · ` + "`" + `utf8` + "`" + ` | nothing |
| P2 | entity column missing | pyarrow.flight: DoPut PATH | ` + "`" + `test_put_missing_entity_column` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `"host"` + "`" + ` | nothing |
| P3 | null in the entity column | pyarrow.flight: DoPut PATH | ` + "`" + `test_put_null_in_entity_column` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `"host"` + "`" + ` · ` + "`" + `null` + "`" + ` | nothing |
| P4 | rows overlapping committed data | pyarrow.flight: DoPut PATH | ` + "`" + `test_put_overlap` + "`" + ` | ArrowInvalid (FAILED_PRECONDITION) | ` + "`" + `overlaps data already in the table` + "`" + ` · ` + "`" + `nothing was committed` + "`" + ` | nothing |
| P5 | two rows in one (entity, interval) in one stream | pyarrow.flight: DoPut PATH | ` + "`" + `test_put_duplicate_in_stream` + "`" + ` | ArrowInvalid (FAILED_PRECONDITION) | ` + "`" + `more than one row` + "`" + ` | nothing |
| P6 | unknown table | pyarrow.flight: DoPut PATH | ` + "`" + `test_put_unknown_table` + "`" + ` | ArrowKeyError (NOT_FOUND) | ` + "`" + `"nosuch_table"` + "`" + ` | nothing |
| P7 | stream without rows | pyarrow.flight: DoPut PATH | ` + "`" + `test_put_empty_stream` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `no rows` + "`" + ` | nothing |
| P8 | hostile table name ../escape | pyarrow.flight: DoAction create-table | ` + "`" + `test_create_table_hostile_name` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `"../escape"` + "`" + ` · ` + "`" + `is not allowed` + "`" + ` | nothing |
| P9 | table already exists | pyarrow.flight: DoAction create-table | ` + "`" + `test_create_existing_table` + "`" + ` | ArrowException (ALREADY_EXISTS) | ` + "`" + `already exists error` + "`" + ` | nothing |
| P10 | action body that is not JSON | pyarrow.flight: DoAction gaps | ` + "`" + `test_action_body_not_json` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `gaps: malformed JSON` + "`" + ` | nothing |
| P11 | forged ticket without a version | pyarrow.flight: DoGet | ` + "`" + `test_forged_ticket` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `ticket: no version` + "`" + ` | nothing |
| P12 | ticket for a version that does not exist | pyarrow.flight: DoGet | ` + "`" + `test_ticket_for_missing_version` + "`" + ` | ArrowKeyError (NOT_FOUND) | ` + "`" + `version 999` + "`" + ` | nothing |
| P13 | scan of an unknown column | pyarrow.flight: GetFlightInfo CMD | ` + "`" + `test_scan_unknown_column` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `"nope"` + "`" + ` | nothing |
| P14 | gaps with a negative limit | pyarrow.flight: DoAction gaps | ` + "`" + `test_gaps_negative_limit` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `gaps: limit -1 is negative` + "`" + ` | nothing |
| P15 | gaps with a limit above the maximum (500,000) | pyarrow.flight: DoAction gaps | ` + "`" + `test_gaps_limit_above_maximum` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `gaps: limit 500001 is above the maximum of 500000` + "`" + ` | nothing |
| P16 | check of an unknown table | pyarrow.flight: DoAction check | ` + "`" + `test_check_unknown_table` + "`" + ` | ArrowKeyError (NOT_FOUND) | ` + "`" + `"nosuch_table"` + "`" + ` | nothing |
| P17 | check naming both table and tables | pyarrow.flight: DoAction check | ` + "`" + `test_check_table_and_tables` + "`" + ` | ArrowInvalid (INVALID_ARGUMENT) | ` + "`" + `give "table" or "tables", not both` + "`" + ` | nothing |
| P18 | bulk ingest into an unknown table | ADBC: cursor.adbc_ingest append | ` + "`" + `test_adbc_ingest_unknown_table` + "`" + ` | NOT_FOUND | ` + "`" + `nosuch_table` + "`" + ` · ` + "`" + `does not exist` + "`" + ` | nothing |
| P19 | bulk ingest overlapping the table | ADBC: cursor.adbc_ingest append | ` + "`" + `test_adbc_ingest_overlap` + "`" + ` | UNKNOWN (the driver's status for FAILED_PRECONDITION) | ` + "`" + `overlaps data already in the table` + "`" + ` | nothing |
| P20 | bulk ingest (create) of an existing table | ADBC: cursor.adbc_ingest create | ` + "`" + `test_adbc_ingest_create_existing` + "`" + ` | ALREADY_EXISTS | ` + "`" + `already exists (mode create)` + "`" + ` · ` + "`" + `use mode append or create_append` + "`" + ` | nothing |
| P21 | SQL syntax error | ADBC: cursor.execute | ` + "`" + `test_adbc_syntax_error` + "`" + ` | INVALID_ARGUMENT | ` + "`" + `syntax error` + "`" + ` | nothing |
| P22 | query of an unknown table | ADBC: cursor.execute | ` + "`" + `test_adbc_unknown_table` + "`" + ` | NOT_FOUND | ` + "`" + `nosuch_table` + "`" + ` | nothing |
| P23 | INSERT | ADBC: cursor.execute | ` + "`" + `test_adbc_insert_refused` + "`" + ` | INVALID_ARGUMENT | ` + "`" + `read-only` + "`" + ` · ` + "`" + `INSERT` + "`" + ` | nothing |
| P24 | read_csv('/etc/passwd') | ADBC: cursor.execute | ` + "`" + `test_adbc_read_file_refused` + "`" + ` | INVALID_ARGUMENT | ` + "`" + `table function read_csv is not available` + "`" + ` | nothing |
`

// checkPythonCases fails when a test named in the Python section is not in
// test_bad_input.py or the file holds a test the section does not list.
func checkPythonCases(t *testing.T) {
	t.Helper()
	src, err := os.ReadFile(pythonTests)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`(test_[a-z0-9_]+)`").FindAllStringSubmatch(pythonCatalogueSection, -1) {
		listed[m[1]] = true
	}
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^def (test_[a-z0-9_]+)\(`).FindAllStringSubmatch(string(src), -1) {
		defined[m[1]] = true
	}
	for name := range listed {
		if !defined[name] {
			t.Errorf("the Python section lists %s, which %s does not define", name, pythonTests)
		}
	}
	for name := range defined {
		if !listed[name] {
			t.Errorf("%s defines %s, which the Python section does not list", pythonTests, name)
		}
	}
}
