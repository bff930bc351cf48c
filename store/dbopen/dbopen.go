// Package dbopen opens tuner's database (store.DB) from what a user passes
// as --db: a postgres:// URL (store/pgstore) or a bbolt file path
// (store/boltstore). It is the one opener every door uses.
package dbopen

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/store/pgstore"
)

// Options are the knobs of Open.
type Options struct {
	// ReadOnly opens for reading only (a bbolt file must exist and have the
	// current schema; PostgreSQL transactions are read-only).
	ReadOnly bool
	// Logger receives recovery and debug messages; nil discards them.
	Logger *slog.Logger
	// Timeout bounds a bbolt operation's wait for the file lock (0: the
	// default).
	Timeout time.Duration
	// NoSync skips fsync on bbolt commits (tests and benchmarks only).
	NoSync bool
	// Now is the clock for record timestamps; nil means time.Now.
	Now func() time.Time
}

// IsURL reports whether target names a PostgreSQL database rather than a
// bbolt file.
func IsURL(target string) bool { return pgstore.IsURL(target) }

// Open opens target: a postgres:// URL or a bbolt file (created with its
// directory when missing, unless read-only).
func Open(ctx context.Context, target string, o Options) (store.DB, error) {
	if IsURL(target) {
		return pgstore.Open(ctx, pgstore.Config{URL: target, ReadOnly: o.ReadOnly, Logger: o.Logger, Now: o.Now})
	}
	return boltstore.Open(ctx, target, boltstore.Options{ReadOnly: o.ReadOnly, Logger: o.Logger, Timeout: o.Timeout, NoSync: o.NoSync, Now: o.Now})
}

// DefaultPath is the default database file (see boltstore.DefaultPath).
func DefaultPath() (string, error) { return boltstore.DefaultPath(os.Getenv) }

// DataDir is where files beside the database go (engine logs, results kept
// while a database is away): the bbolt file's directory, or the default
// database's directory for a URL.
func DataDir(target string) string {
	if !IsURL(target) {
		return filepath.Dir(target)
	}
	p, err := DefaultPath()
	if err != nil {
		return os.TempDir()
	}
	return filepath.Dir(p)
}
