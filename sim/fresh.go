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
	// clock is the host's time (simulated seconds) at which the next run
	// starts: each run advances it by its own time, so that a drifting
	// host (Config.Host) moves on between runs as a real one does.
	clock float64
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
	res, err := f.next().Run(ctx, cfg, w)
	f.advance(res.Phases.TotalS)
	return res, err
}

// next is the base runner with the next noise seed, starting at the host's
// clock.
func (f *FreshNoiseRunner) next() *Runner {
	f.mu.Lock()
	defer f.mu.Unlock()
	seed := f.seed + f.n*0x9e3779b97f4a7c15
	f.n++
	r := f.base.WithSeed(seed)
	r.cfg.HostStart = f.clock
	return r
}

// advance moves the host's clock on by a run's simulated time.
func (f *FreshNoiseRunner) advance(s float64) {
	f.mu.Lock()
	f.clock += s
	f.mu.Unlock()
}

// RunStaged is Runner.RunStaged with the next noise seed.
func (f *FreshNoiseRunner) RunStaged(ctx context.Context, cfg spaces.Config, short, full trial.Workload, promote func(*trial.Result) bool) (trial.Result, trial.Result, error) {
	a, b, err := f.next().RunStaged(ctx, cfg, short, full, promote)
	f.advance(a.Phases.TotalS + b.Phases.TotalS)
	return a, b, err
}
