// Package service is `tuner serve`: the optimizer as an HTTP service. It is
// the second door to the core the CLI uses: a job's body is a
// tuner.SearchSpec, validated by the same code with the same messages, and
// run by tuner.Search.Start like `tuner search` runs it.
//
// Routes (Go's method+path patterns, no framework): a JSON API under
// /api/v1 (studies, trials with their raw data, front, recommendation,
// space, jobs, and
// Server-Sent Events of job progress), /metrics (its own Prometheus
// registry), /healthz, /readyz, and an embedded web page at /.
//
// The database is a DB: the bbolt store (tuner.BoltDB) or PostgreSQL
// (tuner.PGDB). Study reads go through a per-study cache that rereads only
// the tail of a study from its first running trial on (cache.go), so a
// study of 10,000 trials is not decoded again on every request.
//
// Jobs persist in the store (store.Job) and run one at a time per GPU set,
// each set's engines seeing CUDA_VISIBLE_DEVICES of that set. Stopping the
// service stops running jobs as Ctrl-C stops a search (the trial is marked
// interrupted) and leaves them running in the store: the next start resumes
// them with --resume semantics, then the queue.
package service
