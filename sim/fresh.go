package sim

import (
	"context"
	"sync"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// FreshNoiseRunner is the virtual-clock runner as `tuner search --engine
// sim-virtual` and the search benchmark use it: the simulator seeds its
// noise by config, so a plain Runner measures a config the same way every
// time; this one advances the seed with every run, so re-measurements vary
// as real ones do, deterministically for the starting seed.
type FreshNoiseRunner struct {
	base *Runner
	seed uint64
	mu   sync.Mutex
	n    uint64
}

// NewFreshNoiseRunner builds the runner; cfg.Seed is the starting seed.
func NewFreshNoiseRunner(cfg Config) (*FreshNoiseRunner, error) {
	r, err := NewRunner(cfg)
	if err != nil {
		return nil, err
	}
	return &FreshNoiseRunner{base: r, seed: cfg.Seed}, nil
}

// Run measures cfg under w with the next noise seed.
func (f *FreshNoiseRunner) Run(ctx context.Context, cfg spaces.Config, w trial.Workload) (trial.Result, error) {
	f.mu.Lock()
	seed := f.seed + f.n*0x9e3779b97f4a7c15
	f.n++
	f.mu.Unlock()
	return f.base.WithSeed(seed).Run(ctx, cfg, w)
}

// RunStaged measures the short workload and, when promote says so, the
// full one on the same engine (Runner.RunStaged), each stage with the
// next noise seed.
func (f *FreshNoiseRunner) RunStaged(ctx context.Context, cfg spaces.Config, short, full trial.Workload, promote func(*trial.Result) bool) (trial.Result, trial.Result, error) {
	return runStaged(ctx, cfg, short, full, promote, f.Run)
}
