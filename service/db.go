package service

import (
	"context"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// DB is what the service needs of its database: what a search needs, the
// reads of the API and the job queue. The bbolt store (tuner.BoltDB) and
// PostgreSQL (cmd/tuner's pgDB over store/pgstore) both provide it.
type DB interface {
	tuner.SearchDB
	Study(ctx context.Context, id string) (store.Study, error)
	Trial(ctx context.Context, id string) (store.Trial, error)
	JobQueue
}

// JobQueue persists the service's jobs.
type JobQueue interface {
	AddJob(ctx context.Context, j store.Job) (store.Job, error)
	UpdateJob(ctx context.Context, j store.Job) error
	Jobs(ctx context.Context) ([]store.Job, error)
	Job(ctx context.Context, id string) (store.Job, error)
}

var _ DB = tuner.BoltDB{}

var _ DB = tuner.PGDB{}
