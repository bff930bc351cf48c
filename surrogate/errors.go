package surrogate

import (
	"errors"
	"fmt"
)

// Errors callers branch on with errors.Is.
var (
	// ErrInvalidModel wraps every rejection of a model file (LightGBM text,
	// XGBoost JSON or a stored surrogate blob).
	ErrInvalidModel = errors.New("invalid model")
	// ErrInvalidSchema wraps every rejection of a feature schema.
	ErrInvalidSchema = errors.New("invalid feature schema")
	// ErrNoData is returned when there are too few samples to train on.
	ErrNoData = errors.New("not enough training data")
)

// ModelError locates a problem in a model file: the tree (-1 for the header)
// and the field.
type ModelError struct {
	Format string // "lightgbm", "xgboost-json", "surrogate"
	Tree   int
	Field  string
	Msg    string
}

func (e *ModelError) Error() string {
	where := e.Format
	if e.Tree >= 0 {
		where += fmt.Sprintf(" tree %d", e.Tree)
	}
	if e.Field != "" {
		where += " " + e.Field
	}
	return fmt.Sprintf("%s: %s", where, e.Msg)
}

func (e *ModelError) Unwrap() error { return ErrInvalidModel }

func modelErr(format string, tree int, field, f string, args ...any) error {
	return &ModelError{Format: format, Tree: tree, Field: field, Msg: fmt.Sprintf(f, args...)}
}
