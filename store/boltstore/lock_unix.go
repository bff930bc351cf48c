//go:build unix

package boltstore

import (
	"context"
	"errors"
	"github.com/vllm-tuner/tuner/store"
	"os"
	"syscall"
	"time"
)

// fileLock is an flock(2) on a side file. Locks belong to the open file
// description, so two locks in one process exclude each other like two
// processes do.
type fileLock struct{ f *os.File }

// tryFlock makes one non-blocking attempt; ok is false when another holder
// conflicts.
func tryFlock(f *os.File, exclusive bool) (ok bool, err error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err = syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

// lockFile opens (creating) path and locks it, polling every pollEvery until
// deadline or ctx ends. It returns ErrBusy on timeout.
func lockFile(ctx context.Context, path string, exclusive bool, deadline time.Time) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	const pollEvery = time.Millisecond
	for {
		ok, err := tryFlock(f, exclusive)
		if err != nil {
			f.Close()
			return nil, err
		}
		if ok {
			return &fileLock{f: f}, nil
		}
		if !time.Now().Before(deadline) {
			f.Close()
			return nil, store.ErrBusy
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// tryLockExisting locks an existing file without waiting; ok is false when
// the file is held by someone else or does not exist (exists reports which).
func tryLockExisting(path string) (l *fileLock, exists bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	ok, err := tryFlock(f, true)
	if err != nil || !ok {
		f.Close()
		return nil, true, err
	}
	return &fileLock{f: f}, true, nil
}

func (l *fileLock) unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	err := l.f.Close()
	l.f = nil
	return err
}

// freeBytes is the space available to this user on the file system of dir.
func freeBytes(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}
