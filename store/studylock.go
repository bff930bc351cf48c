package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// StudyLock is the exclusive right of one search to run trials in a study:
// two searches on one study would kill each other's engines, run more
// trials than asked and measure configs twice. It is an flock on
// <db>.sessions/study-<id>.lock (released by the kernel when the process
// dies, however it dies) whose content names the owner, for the error a
// second search gets.
type StudyLock struct {
	path string
	l    *fileLock
	// Stale is the record of a previous owner that died without releasing
	// the lock (nil when the lock was free and clean).
	Stale *LockOwner
}

const studyLockPrefix = "study-"

func (s *Store) studyLockPath(studyID string) string {
	return filepath.Join(s.sessionDir(), studyLockPrefix+studyID+".lock")
}

// LockStudy takes the study's lock without waiting: a *StudyLockedError
// naming the owner when a live search holds it, or when the record names
// another host (whose process this host cannot see). A lock left by a dead
// process on this host is taken over and reported in StudyLock.Stale.
func (s *Store) LockStudy(ctx context.Context, studyID string) (*StudyLock, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	if !validStudyID(studyID) {
		return nil, fmt.Errorf("lock study %q: %w", studyID, ErrNotFound)
	}
	host, _ := os.Hostname()
	p := s.studyLockPath(studyID)
	if err := os.MkdirAll(s.sessionDir(), 0o700); err != nil {
		return nil, fmt.Errorf("lock study %s: %w", studyID, err)
	}
	for range 5 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, fmt.Errorf("lock study %s: %w", studyID, err)
		}
		prev, readErr := readOwner(f)
		ok, err := tryFlock(f, true)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock study %s: %w", studyID, err)
		}
		if !ok {
			f.Close()
			e := &StudyLockedError{Study: studyID, Path: p}
			if readErr == nil {
				e.Owner = prev
			}
			return nil, e
		}
		l := &fileLock{f: f}
		if !sameFile(l, p) { // the previous owner removed it meanwhile: retry
			_ = l.unlock()
			continue
		}
		// Read again under the lock: the record is the last owner's.
		prev, readErr = readOwner(f)
		sl := &StudyLock{path: p, l: l}
		if readErr == nil && prev.PID != 0 {
			if prev.Host != host {
				_ = l.unlock()
				return nil, &StudyLockedError{Study: studyID, Path: p, Owner: prev, OtherHost: true}
			}
			sl.Stale = &prev
			s.log.Warn("taking over the lock of a dead search", "study", studyID, "owner", prev.String())
		}
		own := LockOwner{PID: os.Getpid(), Host: host, Started: s.opts.Now().UTC(), Session: s.session}
		if err := writeOwner(f, own); err != nil {
			_ = l.unlock()
			return nil, fmt.Errorf("lock study %s: write %s: %w", studyID, p, err)
		}
		return sl, nil
	}
	return nil, fmt.Errorf("lock study %s: lock file %s keeps disappearing", studyID, p)
}

// Unlock removes the record and releases the lock (removed first, so that a
// process that opened the old file sees it gone and retries).
func (l *StudyLock) Unlock() error {
	if l == nil || l.l == nil {
		return nil
	}
	_ = os.Remove(l.path)
	err := l.l.unlock()
	l.l = nil
	return err
}

// maxOwnerRecord bounds what is read of a lock file (a record is ~150 bytes).
const maxOwnerRecord = 4096

func readOwner(f *os.File) (LockOwner, error) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxOwnerRecord))
	if err != nil {
		return LockOwner{}, err
	}
	var o LockOwner
	if len(strings.TrimSpace(string(b))) == 0 {
		return o, nil
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return LockOwner{}, fmt.Errorf("lock record: %w", err)
	}
	return o, nil
}

func writeOwner(f *os.File, o LockOwner) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		return err
	}
	return f.Sync()
}
