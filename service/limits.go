package service

import (
	"fmt"
	"time"

	"github.com/vllm-tuner/tuner/tuner"
)

// JobLimits bound the size of a job an API client may queue: one request
// must not occupy the GPUs for a year or the store with a billion trials.
// The CLI is not bound by them (its user owns the machine).
type JobLimits struct {
	Trials, Proposals, Finalists, Repeats, Extend, Patience int
	Requests                                                int // per level (search) and per cell (bench)
	Budget, Duration, Timeout                               time.Duration
	Cells, Models, Args                                     int
}

// DefaultJobLimits are far above the shipped presets and any overnight
// search (48 trials, 3 finalists, 3 rounds, 8 hours).
func DefaultJobLimits() JobLimits {
	return JobLimits{
		Trials: 1000, Proposals: 10000, Finalists: 50, Repeats: 20, Extend: 100, Patience: 1000,
		Requests: 1_000_000, Budget: 7 * 24 * time.Hour, Duration: 24 * time.Hour, Timeout: 24 * time.Hour,
		Cells: 500, Models: 50, Args: 200,
	}
}

// sizeCheck collects the first bound a job passes.
type sizeCheck struct{ err error }

func (c *sizeCheck) int(field string, v, max int) {
	if c.err == nil && v > max {
		c.err = tuner.Usagef("job body: %s %d over the limit of %d", field, v, max)
	}
}

func (c *sizeCheck) dur(field string, v, max time.Duration) {
	if c.err == nil && v > max {
		c.err = tuner.Usagef("job body: %s %s over the limit of %s", field, v, max)
	}
}

// search refuses a search job larger than l.
func (l JobLimits) search(s tuner.SearchSpec) error {
	var c sizeCheck
	c.int("trials", s.Trials, l.Trials)
	c.int("proposals", s.Proposals, l.Proposals)
	c.int("finalists", s.Finalists, l.Finalists)
	c.int("repeats", s.Repeats, l.Repeats)
	c.int("extend", s.Extend, l.Extend)
	c.int("patience", s.Patience, l.Patience)
	if s.Requests != nil {
		c.int("requests", *s.Requests, l.Requests)
	}
	if s.Duration != nil {
		c.dur("duration", s.Duration.Std(), l.Duration)
	}
	c.dur("budget", s.Budget.Std(), l.Budget)
	c.dur("trial_timeout", s.TrialTimeout.Std(), l.Timeout)
	c.dur("startup_timeout", s.StartupTimeout.Std(), l.Timeout)
	c.dur("lease", s.Lease.Std(), l.Timeout)
	c.int("enqueue", len(s.Enqueue), l.Args)
	c.int("engine_args", len(s.EngineArgs), l.Args)
	c.int("engine_env", len(s.EngineEnv), l.Args)
	return c.err
}

// bench refuses a benchmark job larger than l (its matrix resolved).
func (l JobLimits) bench(b *tuner.Bench) error {
	var c sizeCheck
	c.int("matrix cells", len(b.Matrix.Cells), l.Cells)
	c.int("models", len(b.Models), l.Models)
	c.int("engine_args", len(b.Spec.EngineArgs), l.Args)
	c.int("labels", len(b.Spec.Labels), l.Args)
	c.dur("request_timeout", b.Spec.RequestTimeout.Std(), l.Timeout)
	c.dur("startup_timeout", b.Spec.StartupTimeout.Std(), l.Timeout)
	for _, cell := range b.Matrix.Cells {
		c.int(fmt.Sprintf("cell %s: num_requests", cell.Name), cell.Workload.NumRequests, l.Requests)
		c.dur(fmt.Sprintf("cell %s: duration", cell.Name), cell.Workload.Duration, l.Duration)
	}
	return c.err
}
