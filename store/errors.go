package store

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrCorrupt is matched (errors.Is) by every *CorruptError.
	ErrCorrupt = errors.New("database corrupt")
	// ErrNotFound reports a missing study, trial, model or database file.
	ErrNotFound = errors.New("not found")
	// ErrBusy reports that the file lock was not obtained within Options.Timeout.
	ErrBusy = errors.New("database busy")
	// ErrReadOnly reports a write through a read-only Store.
	ErrReadOnly = errors.New("store is read-only")
	// ErrTooNew reports a file or record written by a newer tuner.
	ErrTooNew = errors.New("written by a newer version of tuner")
	// ErrNeedsMigration reports an old file opened read-only.
	ErrNeedsMigration = errors.New("database needs migration (open it for writing once)")
	// ErrState reports a trial that is not in the state an operation needs.
	ErrState = errors.New("wrong trial state")
	// ErrInvalidResult reports a trial result that cannot be stored (e.g. a
	// NaN or infinite metric, which JSON cannot carry); the trial stays
	// running, so the caller can finish it again with a repaired result.
	ErrInvalidResult = errors.New("invalid trial result")
	// ErrClosed reports use of a closed Store.
	ErrClosed = errors.New("store closed")
	// ErrDiskFull reports too little free space to begin a trial.
	ErrDiskFull = errors.New("database disk full")
	// ErrClaimed reports a config (and repeat index) that another worker
	// of the study runs or ran: the claim lost, nothing was written.
	ErrClaimed = errors.New("claimed by another worker")
	// ErrTrialBudget reports a search trial refused because the study's
	// trial budget is taken by trials running or finished.
	ErrTrialBudget = errors.New("the study's trial budget is taken")
	// ErrLeaseLost reports a trial whose lease expired and was taken back
	// (marked interrupted) before its worker renewed it.
	ErrLeaseLost = errors.New("trial lease lost")
	// ErrWorkerName reports a worker name that a live worker of the study
	// already uses.
	ErrWorkerName = errors.New("worker name in use")
	// ErrConnect reports a database server that cannot be reached or
	// refuses the credentials.
	ErrConnect = errors.New("cannot connect to PostgreSQL")
	// ErrNoAnswer reports a database server that accepted the connection
	// but did not answer within the deadline (it matches ErrConnect when
	// connecting).
	ErrNoAnswer = errors.New("the server did not answer")
)

// CorruptError says that the file at Path is damaged, and how.
type CorruptError struct {
	Path     string
	Problems []string // what Check found; empty when Err says it all
	Err      error    // the underlying error, if any
}

func (e *CorruptError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "database %s is corrupt", e.Path)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	switch len(e.Problems) {
	case 0:
	case 1:
		fmt.Fprintf(&b, ": %s", e.Problems[0])
	default:
		fmt.Fprintf(&b, ": %d problems, first: %s", len(e.Problems), e.Problems[0])
	}
	return b.String()
}

func (e *CorruptError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorrupt, e.Err}
	}
	return []error{ErrCorrupt}
}
