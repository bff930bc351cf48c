package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vllm-tuner/tuner/service"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/tuner"
)

// searchDB is a database open for a search or the service, closed when
// done.
type searchDB interface {
	service.DB
	Path() string
	Close() error
}

// openSearchDB opens --db for writing: a postgres:// URL or a bbolt file.
// A database that cannot be reached is an error naming host and database
// (never the password), before any engine starts.
func openSearchDB(ctx context.Context, db string, log *slog.Logger) (searchDB, error) {
	if pgstore.IsURL(db) {
		s, err := pgstore.Open(ctx, pgstore.Config{URL: db, Logger: log})
		if err != nil {
			return nil, err
		}
		return tuner.PGDB{Store: s, Dir: dataDir(db)}, nil
	}
	s, err := store.Open(ctx, db, store.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return tuner.BoltDB{Store: s}, nil
}

// dataDir is where files beside the database go (engine logs): the bbolt
// file's directory, or the default database's directory for a URL.
func dataDir(db string) string {
	if !pgstore.IsURL(db) {
		return filepath.Dir(db)
	}
	p, err := store.DefaultPath(os.Getenv)
	if err != nil {
		return os.TempDir()
	}
	return filepath.Dir(p)
}

// openHistory opens --db read-only for the history of a dry run.
func openHistory(ctx context.Context, db string) (interface {
	tuner.HistoryReader
	Close() error
}, error) {
	if pgstore.IsURL(db) {
		return pgstore.Open(ctx, pgstore.Config{URL: db, ReadOnly: true})
	}
	return store.Open(ctx, db, store.Options{ReadOnly: true})
}
