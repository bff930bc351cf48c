//go:build !unix

package boltstore

import (
	"context"
	"os"
	"time"
)

// Without flock(2) the gate and session locks are no-ops: bbolt's own lock
// still serialises writers, but readers may starve a writer and running
// trials of live writers cannot be told from dead ones (they are left alone).
type fileLock struct{}

func lockFile(ctx context.Context, path string, exclusive bool, deadline time.Time) (*fileLock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return &fileLock{}, nil
}

func tryLockExisting(path string) (*fileLock, bool, error) {
	_, err := os.Stat(path)
	return nil, err == nil, nil
}

func (l *fileLock) unlock() error { return nil }

func freeBytes(string) (int64, bool) { return 0, false }
