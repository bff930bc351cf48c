package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/pgstore"
	"github.com/vllm-tuner/tuner/tuner"
)

// pgDB is a PostgreSQL database as a tuner.SearchDB.
type pgDB struct {
	*pgstore.Store
	dataDir string
}

func (p pgDB) LockStudy(ctx context.Context, id string) (func() error, string, error) {
	l, err := p.Store.LockStudy(ctx, id)
	if err != nil {
		return nil, "", err
	}
	return l.Unlock, "", nil
}

func (p pgDB) DataDir() string { return p.dataDir }

var _ tuner.SearchDB = pgDB{}

// searchDB is a database open for a search, closed when done.
type searchDB interface {
	tuner.SearchDB
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
		return pgDB{s, dataDir(db)}, nil
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
