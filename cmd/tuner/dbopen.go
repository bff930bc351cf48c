package main

import (
	"context"
	"log/slog"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/dbopen"
)

// openSearchDB opens --db for writing: a postgres:// URL or a bbolt file.
// A database that cannot be reached is an error naming host and database
// (never the password), before any engine starts.
func openSearchDB(ctx context.Context, db string, log *slog.Logger) (store.DB, error) {
	return dbopen.Open(ctx, db, dbopen.Options{Logger: log})
}

// dataDir is where files beside the database go (engine logs).
func dataDir(db string) string { return dbopen.DataDir(db) }

// openHistory opens --db read-only for the history of a dry run.
func openHistory(ctx context.Context, db string) (store.DB, error) {
	return dbopen.Open(ctx, db, dbopen.Options{ReadOnly: true})
}
