package tuner

import "fmt"

// UsageError marks errors caused by bad options (flags, a job request's
// fields) or input files: the CLI exits 2 on one, the service answers 400.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a usage error.
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// AsUsage wraps err as a usage error, keeping nil as nil.
func AsUsage(err error) error {
	if err == nil {
		return nil
	}
	return UsageError{err}
}
