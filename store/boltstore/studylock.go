package boltstore

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/vllm-tuner/tuner/store"
	"io"
	"os"
	"path/filepath"
	"strings"
)

const studyLockPrefix = "study-"

func (s *Store) studyLockPath(studyID string) string {
	return filepath.Join(s.sessionDir(), studyLockPrefix+studyID+".lock")
}

// LockStudy takes the study's lock without waiting: a *StudyLockedError
// naming the owner when a live search holds it, or when the record names
// another host (whose process this host cannot see). A lock left by a dead
// process on this host is taken over and reported in StudyLock.Stale.
func (s *Store) LockStudy(ctx context.Context, studyID string) (*store.StudyLock, error) {
	if s.opts.ReadOnly {
		return nil, store.ErrReadOnly
	}
	if !store.ValidStudyID(studyID) {
		return nil, fmt.Errorf("lock study %q: %w", studyID, store.ErrNotFound)
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
			e := &store.StudyLockedError{Study: studyID, Path: p}
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
		var stale *store.LockOwner
		if readErr == nil && prev.PID != 0 {
			if prev.Host != host {
				_ = l.unlock()
				return nil, &store.StudyLockedError{Study: studyID, Path: p, Owner: prev, OtherHost: true}
			}
			stale = &prev
			s.log.Warn("taking over the lock of a dead search", "study", studyID, "owner", prev.String())
		}
		own := store.LockOwner{PID: os.Getpid(), Host: host, Started: s.opts.Now().UTC(), Session: s.session}
		if err := writeOwner(f, own); err != nil {
			_ = l.unlock()
			return nil, fmt.Errorf("lock study %s: write %s: %w", studyID, p, err)
		}
		// Unlock removes the record, then releases the lock (removed first, so
		// that a process that opened the old file sees it gone and retries).
		return store.NewStudyLock(func() error {
			_ = os.Remove(p)
			return l.unlock()
		}, stale), nil
	}
	return nil, fmt.Errorf("lock study %s: lock file %s keeps disappearing", studyID, p)
}

// maxOwnerRecord bounds what is read of a lock file (a record is ~150 bytes).
const maxOwnerRecord = 4096

func readOwner(f *os.File) (store.LockOwner, error) {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, maxOwnerRecord))
	if err != nil {
		return store.LockOwner{}, err
	}
	var o store.LockOwner
	if len(strings.TrimSpace(string(b))) == 0 {
		return o, nil
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return store.LockOwner{}, fmt.Errorf("lock record: %w", err)
	}
	return o, nil
}

func writeOwner(f *os.File, o store.LockOwner) error {
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
