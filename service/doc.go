// Package service is `tuner serve`: the optimizer as an HTTP service. It is
// the second door to the core the CLI uses: a search job's body is a
// tuner.SearchSpec, validated by the same code with the same messages, and
// run by tuner.Search.Start like `tuner search` runs it; a benchmark job's
// ({"kind":"bench"}) is a tuner.BenchSpec run by tuner.Bench.Run like
// `tuner bench run`, and the runs it stores are read and compared with the
// core's tuner.CompareRuns as `tuner bench compare` does.
//
// Routes (Go's method+path patterns, no framework): a JSON API under
// /api/v1 (studies, trials with their raw data, front, recommendation,
// space, jobs, benchmark runs and compare, and Server-Sent Events of job
// progress), /metrics (its own Prometheus registry), /healthz, /readyz, and
// an embedded web page at /.
//
// The database is a store.DB (a bbolt file or PostgreSQL, every endpoint on
// both). Study reads go through a per-study cache that rereads only
// the tail of a study from its first running trial on (cache.go), so a
// study of 10,000 trials is not decoded again on every request.
//
// Jobs persist in the store (store.Job) and run one at a time per GPU set,
// each set's engines seeing CUDA_VISIBLE_DEVICES of that set. Stopping the
// service stops running jobs as Ctrl-C stops a search (the trial is marked
// interrupted) and leaves them running in the store: the next start resumes
// search jobs with --resume semantics, then the queue. A benchmark is not
// resumed: its run is kept partial and the next start fails the job.
//
// Schedules (store.Schedule, schedules.go) queue ordinary jobs on cron
// expressions (robfig/cron parses; the firing loop is ours, on Config.Clock):
// the store records a firing and queues its job in one write, checked
// against the schedule's next slot so that a slot fires once; a firing
// while the previous job is queued or running is recorded as skipped;
// slots that passed while the service was down run once (catch-up). A
// scheduled benchmark's runs are gated against the schedule's previous run
// and a regression or a failure goes to Config.Alerts (package alert).
package service
