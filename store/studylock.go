package store

import (
	"errors"
	"fmt"
	"time"
)

// ErrStudyLocked is matched (errors.Is) by every *StudyLockedError.
var ErrStudyLocked = errors.New("study is locked by another search")

// LockOwner is what a study lock file records about the search holding it.
type LockOwner struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"` // when the lock was taken
	Session string    `json:"session,omitempty"`
}

func (o LockOwner) String() string {
	return fmt.Sprintf("pid %d on host %s (since %s)", o.PID, orUnknown(o.Host), o.Started.UTC().Format(time.RFC3339))
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// StudyLockedError says that another search holds a study's lock.
type StudyLockedError struct {
	Study string
	Path  string    // the lock file
	Owner LockOwner // zero when the record could not be read
	// OtherHost is set when the owner ran on another host: its lock may be
	// stale, but this host cannot tell whether that process still runs.
	OtherHost bool
}

func (e *StudyLockedError) Error() string {
	if e.OtherHost {
		return fmt.Sprintf("study %s is locked by a search on another host, %s: this host cannot tell whether it still runs; if it has stopped, remove %s",
			e.Study, e.Owner, e.Path)
	}
	if e.Owner.PID == 0 {
		return fmt.Sprintf("study %s is being searched by another process (lock %s)", e.Study, e.Path)
	}
	return fmt.Sprintf("study %s is being searched by %s: wait for it to finish or stop it (kill %d) before resuming (lock %s)",
		e.Study, e.Owner, e.Owner.PID, e.Path)
}

func (e *StudyLockedError) Unwrap() error { return ErrStudyLocked }

// StudyLock is one search's exclusive right to run trials in a study
// (DB.LockStudy): a lock file for bbolt, an advisory lock for PostgreSQL.
type StudyLock struct {
	// Stale is the previous owner that died holding the lock (nil: none).
	Stale   *LockOwner
	release func() error
}

// NewStudyLock is a held lock that release gives up (a backend's).
func NewStudyLock(release func() error, stale *LockOwner) *StudyLock {
	return &StudyLock{Stale: stale, release: release}
}

// Unlock releases the lock; a second call does nothing.
func (l *StudyLock) Unlock() error {
	if l == nil || l.release == nil {
		return nil
	}
	r := l.release
	l.release = nil
	return r()
}
