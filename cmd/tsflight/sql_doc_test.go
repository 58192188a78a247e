package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

// TestSQLDocComments: in both builds' files (sql.go with the duckdb_arrow
// tag, sql_off.go without), each declaration's doc comment is its own and
// starts with its name: withSQL's once sat on the sqlBuilt const.
func TestSQLDocComments(t *testing.T) {
	for _, file := range []string{"sql.go", "sql_off.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		docs := map[string]string{}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				docs[d.Name.Name] = d.Doc.Text()
			case *ast.GenDecl:
				for _, s := range d.Specs {
					doc := d.Doc
					if d.Lparen.IsValid() { // a group: each spec has its own
						doc = nil
						switch s := s.(type) {
						case *ast.ValueSpec:
							doc = s.Doc
						case *ast.TypeSpec:
							doc = s.Doc
						}
					}
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							docs[n.Name] = doc.Text()
						}
					case *ast.TypeSpec:
						docs[s.Name.Name] = doc.Text()
					}
				}
			}
		}
		for _, name := range []string{"withSQL", "sqlBuilt"} {
			if _, ok := docs[name]; !ok {
				t.Errorf("%s: no %s", file, name)
			}
		}
		for name, doc := range docs {
			if doc == "" {
				t.Errorf("%s: %s has no doc comment", file, name)
				continue
			}
			if !strings.HasPrefix(doc, name+" ") {
				t.Errorf("%s: the doc comment of %s is not about it: %q", file, name, doc)
			}
		}
	}
}
