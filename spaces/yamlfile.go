package spaces

import (
	"fmt"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Locator maps YAML paths ($.a.b[2]) of one parsed document to line
// numbers, so semantic errors found after decoding name the line too.
type Locator struct {
	file string
	ast  *ast.File
}

// NewLocator parses b (already decoded successfully) for positions.
func NewLocator(file string, b []byte) Locator {
	f, _ := parser.ParseBytes(b, 0)
	return Locator{file: file, ast: f}
}

// File is the file the locator names in its errors.
func (l Locator) File() string { return l.file }

// Line is the line of the node at path (0 when unknown).
func (l Locator) Line(path string) int {
	if l.ast == nil || path == "" {
		return 0
	}
	p, err := yaml.PathString(path)
	if err != nil {
		return 0
	}
	n, err := p.FilterFile(l.ast)
	if err != nil || n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

// Errf is a FileError at path's line about field.
func (l Locator) Errf(path, field, format string, args ...any) *FileError {
	return &FileError{File: l.file, Line: l.Line(path), Field: field, Msg: fmt.Sprintf(format, args...)}
}
