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

// searchDB is what `tuner search` needs of a database: the bbolt file or a
// PostgreSQL database (--db postgres://...).
type searchDB interface {
	tuner.TrialStore
	studyLister
	historyReader
	EnsureStudy(ctx context.Context, key store.StudyKey) (store.Study, error)
	// lockStudy takes the one-search-per-study lock; stale describes a
	// previous owner that died holding it ("" when none).
	lockStudy(ctx context.Context, studyID string) (release func() error, stale string, err error)
	Path() string
	Close() error
}

type studyLister interface {
	Studies(ctx context.Context) ([]store.Study, error)
}

type historyReader interface {
	HistoryTrials(ctx context.Context, q store.HistoryQuery) ([]store.Trial, error)
}

type boltDB struct{ *store.Store }

func (b boltDB) lockStudy(ctx context.Context, id string) (func() error, string, error) {
	l, err := b.LockStudy(ctx, id)
	if err != nil {
		return nil, "", err
	}
	stale := ""
	if l.Stale != nil {
		stale = l.Stale.String()
	}
	return l.Unlock, stale, nil
}

type pgDB struct{ *pgstore.Store }

func (p pgDB) lockStudy(ctx context.Context, id string) (func() error, string, error) {
	l, err := p.LockStudy(ctx, id)
	if err != nil {
		return nil, "", err
	}
	return l.Unlock, "", nil
}

var (
	_ searchDB = boltDB{}
	_ searchDB = pgDB{}
)

// openSearchDB opens --db for writing: a postgres:// URL or a bbolt file.
// A database that cannot be reached is an error naming host and database
// (never the password), before any engine starts.
func openSearchDB(ctx context.Context, db string, log *slog.Logger) (searchDB, error) {
	if pgstore.IsURL(db) {
		s, err := pgstore.Open(ctx, pgstore.Config{URL: db, Logger: log})
		if err != nil {
			return nil, err
		}
		return pgDB{s}, nil
	}
	s, err := store.Open(ctx, db, store.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	return boltDB{s}, nil
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
	historyReader
	Close() error
}, error) {
	if pgstore.IsURL(db) {
		return pgstore.Open(ctx, pgstore.Config{URL: db, ReadOnly: true})
	}
	return store.Open(ctx, db, store.Options{ReadOnly: true})
}
