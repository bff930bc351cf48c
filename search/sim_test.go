package search

import (
	"context"
	"testing"

	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

func smokeWorkload() trial.Workload {
	return trial.Workload{
		Name:        "smoke-chat",
		Prompt:      trial.LengthDist{Kind: "uniform", Min: 128, Max: 1024},
		Output:      trial.LengthDist{Kind: "uniform", Min: 32, Max: 256},
		Arrival:     trial.Arrival{Kind: "closed", Concurrency: 128},
		NumRequests: 300,
		Seed:        1,
	}
}

func simRun(t testing.TB, space *spaces.Space, seed uint64) func(spaces.Config) *trial.Result {
	t.Helper()
	c := sim.DefaultConfig()
	c.Target = *space.Target()
	c.Noise, c.Seed = true, seed
	r, err := sim.NewRunner(c)
	if err != nil {
		t.Fatal(err)
	}
	w := smokeWorkload()
	return func(cfg spaces.Config) *trial.Result {
		res, err := r.Run(context.Background(), cfg, w)
		if err != nil {
			t.Fatal(err)
		}
		return &res
	}
}

// Search-quality smoke test on the simulator: TPE with surrogate screening
// reaches a clearly higher hypervolume in 16 trials than random search.
func TestSimSearchBeatsRandom(t *testing.T) {
	objs := DefaultObjectives("tpot_p99")
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 40}}
	// The reference point sits near the default config's throughput, so the
	// hypervolume measures what a search adds beyond the obvious region.
	ref := []float64{3500, 40, 80}
	n, seeds := 16, 4
	if testing.Short() {
		seeds = 2
	}
	var rnd, tpe, full float64
	wins := 0
	for seed := range seeds {
		s := h100(t)
		run := func(cfg ProposerConfig) float64 {
			cfg.Space, cfg.Seed, cfg.Objectives, cfg.SLO = s, uint64(seed), objs, slo
			p := newProposer(t, cfg)
			runProposer(t, p, n, simRun(t, s, uint64(seed)))
			return hvOf(t, p.History(), objs, slo, ref)
		}
		sc, err := NewSurrogateScorer(s, smokeWorkload(), objs, slo, surrogate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, p, f := run(ProposerConfig{Sampler: SamplerRandom}), run(ProposerConfig{Sampler: SamplerTPE}), run(ProposerConfig{Sampler: SamplerTPE, Scorer: sc})
		t.Logf("seed %d: HV random %.0f, tpe %.0f, tpe+surrogate %.0f", seed, r, p, f)
		rnd, tpe, full = rnd+r, tpe+p, full+f
		if f > r {
			wins++
		}
	}
	t.Logf("mean HV over %d seeds after %d trials: random %.0f, tpe %.0f, tpe+surrogate %.0f", seeds, n, rnd/float64(seeds), tpe/float64(seeds), full/float64(seeds))
	if full < 1.5*rnd || wins < seeds-1 {
		t.Fatalf("tpe+surrogate (mean HV %.0f, beat random on %d of %d seeds) not clearly above random (%.0f)", full/float64(seeds), wins, seeds, rnd/float64(seeds))
	}
}
