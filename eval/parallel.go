package eval

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

// Strategy names of the parallel-worker comparison (not in the default
// set: `tuner eval search --strategies par1,par4`).
const (
	StratPar1 = "par1"
	StratPar4 = "par4"
)

// ExtraStrategies are the strategies run only when named.
func ExtraStrategies() []Strategy {
	return []Strategy{ParallelStrategy{Label: StratPar1, Workers: 1}, ParallelStrategy{Label: StratPar4, Workers: 4},
		TunerStrategy{Label: StratScreen, Screen: tuner.Screening{Fraction: ScreenFraction}},
		TunerStrategy{Label: StratOracle, Oracle: true}}
}

// ParallelStrategy is the tuner's proposer (TunerStrategy's, cold) driven as Workers workers of one shared study are: each trial
// takes its simulated time (startup + measurement); when one ends its
// result is told and that worker asks again while the others' configs are
// in flight (told to the proposer as pending: never proposed, a constant
// liar for TPE, front members at the surrogate's predicted mean in
// screening, and trials spent in the count that starts the late phase; see
// search.Proposer.SetPending). Trials are numbered in the order they were
// asked (claimed), so HV@N compares the first N claims with the
// sequential search (Workers 1) on the same code path.
type ParallelStrategy struct {
	Label   string
	Workers int
}

func (s ParallelStrategy) Name() string { return s.Label }

// inflight is a trial running on a simulated worker.
type inflight struct {
	cfg spaces.Config
	res trial.Result
	end float64 // simulated seconds
}

func (s ParallelStrategy) Run(ctx context.Context, env Env) ([]Trial, Belief, error) {
	p := env.Problem
	prop, err := TunerStrategy{Label: s.Label}.proposer(env, nil)
	if err != nil {
		return nil, Belief{}, err
	}
	r, err := measureRunner(env)
	if err != nil {
		return nil, Belief{}, err
	}
	var (
		out     []Trial
		running []inflight
		now     float64
	)
	start := func() (bool, error) {
		pending := make([]spaces.Config, len(running))
		for i, j := range running {
			pending[i] = j.cfg
		}
		prop.SetPending(pending)
		cfg, err := prop.Ask(ctx)
		if errors.Is(err, search.ErrExhausted) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("%s ask: %w", s.Label, err)
		}
		res, err := r.Run(ctx, cfg, p.Workload)
		if err != nil {
			return false, err
		}
		out = append(out, p.record(len(out)+1, PhaseSearch, cfg, &res))
		running = append(running, inflight{cfg, res, now + res.Phases.TotalS})
		return true, nil
	}
	more := true
	for more && len(out) < env.Trials && len(running) < max(1, s.Workers) {
		if more, err = start(); err != nil {
			return nil, Belief{}, err
		}
	}
	for len(running) > 0 {
		i := 0
		for k, j := range running {
			if j.end < running[i].end {
				i = k
			}
		}
		j := running[i]
		running = slices.Delete(running, i, i+1)
		now = j.end
		prop.Tell(j.cfg, &j.res)
		if more && len(out) < env.Trials {
			if more, err = start(); err != nil {
				return nil, Belief{}, err
			}
		}
	}
	return out, bestMeasured(out, p), nil
}
