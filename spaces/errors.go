package spaces

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/vllm-tuner/tuner/bounded"
)

// FileError is a problem in a user-supplied file, located as precisely as the
// parser allows: file, line (0 when unknown) and the dotted field path.
type FileError struct {
	File  string
	Line  int
	Col   int // 0 when unknown
	Field string
	Msg   string
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
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

// YAMLError turns an error from decoding the YAML file b into a FileError
// that locates the problem (line, column, and the field when it is a plain
// name) and never quotes the file: a path given by mistake (/etc/shadow)
// must not print a line of it. A key that is not an identifier is content,
// not a field name; the parser's message loses its quoted parts and what
// follows a colon, and falls back to a generic text if it still repeats
// the file.
// A document refused by a limit (bounded.LimitError) is returned as it is.
func YAMLError(file string, b []byte, err error) error {
	if errors.Is(err, bounded.ErrLimit) {
		return err
	}
	e := &FileError{File: file, Msg: "not a valid YAML document of this kind"}
	var se yaml.Error
	if !errors.As(err, &se) {
		return e
	}
	if tk := se.GetToken(); tk != nil && tk.Position != nil {
		e.Line, e.Col = tk.Position.Line, tk.Position.Column
	}
	msg := se.GetMessage()
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		e.Msg = "unknown field"
		if identRE.MatchString(m[1]) {
			e.Field = m[1]
		}
		return e
	}
	msg, _, _ = strings.Cut(msg, ": ")
	msg = strings.TrimSpace(quotedRE.ReplaceAllString(msg, ""))
	if msg != "" && !repeats(msg, b) {
		e.Msg = msg
	}
	return e
}

// repeats reports whether msg contains 8 bytes of b in a row other than
// plain lower-case words (the parser's own vocabulary).
func repeats(msg string, b []byte) bool {
	const n = 8
	for i := 0; i+n <= len(msg); i++ {
		w := msg[i : i+n]
		if !plainWordsRE.MatchString(w) && bytes.Contains(b, []byte(w)) {
			return true
		}
	}
	return false
}

var (
	unknownFieldRE = regexp.MustCompile(`^unknown field "(.*)"$`)
	identRE        = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)
	plainWordsRE   = regexp.MustCompile(`^[a-z ]*$`)
	quotedRE       = regexp.MustCompile("\"[^\"]*\"|'[^']*'|`[^`]*`")
)
