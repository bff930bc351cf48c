package bounded

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/goccy/go-yaml"
)

// Limits bound one document. A zero field is no limit.
type Limits struct {
	Bytes   int64 // size of the document
	Depth   int   // nesting of collections
	Nodes   int   // scalars and collections, aliases expanded
	Aliases int   // alias references (*name)
}

// Default is the limit of every configuration document: workloads, spaces,
// profiles, matrices, scenarios, config files, job bodies. The largest
// shipped one (spaces/vllm_space.yaml) is under 10 KB, depth 5, 1,500 nodes.
func Default() Limits {
	return Limits{Bytes: 512 << 10, Depth: 64, Nodes: 20000, Aliases: 1000}
}

// ImportBytes bounds a benchmark result file (`tuner bench import`): its
// per-request arrays make it large, so only its size is bounded.
const ImportBytes = 64 << 20

// ErrLimit is matched by every *LimitError.
var ErrLimit = errors.New("input over a limit")

// LimitError is a document refused by a limit before it was parsed.
type LimitError struct {
	Source string // the file or the request field
	Line   int    // 0 when the limit is on the whole document (size)
	What   string // "size", "nesting depth", "node count", "aliases", "node count with aliases expanded"
	Limit  int64
}

func (e *LimitError) Error() string {
	where := e.Source
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.Source, e.Line)
	}
	if e.What == "size" {
		return fmt.Sprintf("%s: size over the limit of %d bytes", where, e.Limit)
	}
	return fmt.Sprintf("%s: %s over the limit of %d", where, e.What, e.Limit)
}

// Is makes errors.Is(err, ErrLimit) hold.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// ReadFile reads a file of at most max bytes, refusing a larger one by its
// size before reading it (and, for a file that grows or has no size, after
// reading max+1 bytes).
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		if st.IsDir() {
			return nil, fmt.Errorf("%s is a directory", path)
		}
		if st.Mode().IsRegular() && st.Size() > max {
			return nil, &LimitError{Source: path, What: "size", Limit: max}
		}
	}
	return ReadAll(path, f, max)
}

// ReadAll reads r to its end, refusing more than max bytes; source names r
// in the error.
func ReadAll(source string, r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", source, err)
	}
	if int64(len(b)) > max {
		return nil, &LimitError{Source: source, What: "size", Limit: max}
	}
	return b, nil
}

// DecodeYAML checks b under the default limits, then decodes its first
// document into v with opts. A panic of the decoder (goccy/go-yaml v1.19.2
// dereferences nil on some malformed sequences) is returned as an error.
func DecodeYAML(source string, b []byte, v any, opts ...yaml.DecodeOption) (err error) {
	if err := CheckYAML(source, b, Default()); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: YAML parser failure: %v", source, r)
		}
	}()
	return yaml.NewDecoder(bytes.NewReader(b), opts...).Decode(v)
}

// DecodeJSON checks b under the default limits, then decodes it into v,
// refusing unknown fields when strict and anything after the first value.
func DecodeJSON(source string, b []byte, v any, strict bool) error {
	if err := CheckJSON(source, b, Default()); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}
