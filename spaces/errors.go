package spaces

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml"
)

// FileError is a problem in a user-supplied file, located as precisely as the
// parser allows: file, line (0 when unknown) and the dotted field path.
type FileError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %s", e.Msg)
	return b.String()
}

// ConstraintError says which constraint a config violates and why.
type ConstraintError struct {
	Constraint string // name of the constraint
	Expr       string
	Message    string
}

func (e *ConstraintError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("constraint %s violated: %s", e.Constraint, e.Message)
	}
	return fmt.Sprintf("constraint %s violated: %s is false", e.Constraint, e.Expr)
}

// ErrInvalidConfig is wrapped by every error that rejects a config (unknown
// param, wrong kind, out of range, constraint violated).
var ErrInvalidConfig = errors.New("invalid config")

func yamlErrLine(err error) int {
	var se yaml.Error
	if errors.As(err, &se) {
		if tk := se.GetToken(); tk != nil && tk.Position != nil {
			return tk.Position.Line
		}
	}
	return 0
}

func yamlErrMsg(err error) string {
	var se yaml.Error
	if errors.As(err, &se) {
		return se.GetMessage()
	}
	return err.Error()
}
