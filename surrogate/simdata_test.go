package surrogate

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/spaces/spacestest"
	"github.com/vllm-tuner/tuner/trial"
)

// chatWorkload is a chat-like benchmark: ShareGPT-sized prompts and answers
// at a fixed closed-loop concurrency, kept short for the unit suite.
func chatWorkload(n int) trial.Workload {
	return trial.Workload{
		Name:        "chat",
		Prompt:      trial.LengthDist{Kind: "normal", Mean: 600, Std: 300, Min: 16, Max: 2048},
		Output:      trial.LengthDist{Kind: "normal", Mean: 220, Std: 120, Min: 8, Max: 1024},
		Arrival:     trial.Arrival{Kind: "closed", Concurrency: 64},
		NumRequests: n,
		Seed:        7,
	}
}

func mustTarget(t testing.TB, model, gpu string, count int) spaces.Target {
	t.Helper()
	c := spaces.DefaultCatalog()
	m, err := c.Model(model)
	if err != nil {
		t.Fatal(err)
	}
	g, err := c.GPU(gpu)
	if err != nil {
		t.Fatal(err)
	}
	return spaces.Target{Model: m, GPU: g, GPUCount: count}
}

func resolved(t testing.TB, tg spaces.Target) *spaces.Space {
	t.Helper()
	r, err := spaces.ResolveDefault(tg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// randomConfig draws every tuned parameter uniformly (log-uniformly where
// the parameter is log-scaled) until the config satisfies the constraints;
// keep, when not nil, filters further.
func randomConfig(t testing.TB, s *spaces.Space, r *rand.Rand, keep func(spaces.Config) bool) spaces.Config {
	t.Helper()
	for try := 0; try < 10000; try++ {
		m := map[string]spaces.Value{}
		for _, p := range s.Tuned() {
			var f float64
			switch {
			case p.Kind == spaces.Categorical:
				f = float64(r.IntN(len(p.Choices)))
			case p.Kind == spaces.Bool:
				f = float64(r.IntN(2))
			case len(p.Values) > 0:
				f = p.Values[r.IntN(len(p.Values))]
			case p.Log:
				f = math.Exp(math.Log(p.Min) + r.Float64()*(math.Log(p.Max)-math.Log(p.Min)))
			default:
				f = p.Min + r.Float64()*(p.Max-p.Min)
			}
			m[p.Name] = p.FromFloat(f)
		}
		c := spacestest.Normalized(t, s, m)
		if s.Validate(c) != nil || keep != nil && !keep(c) {
			continue
		}
		return c
	}
	t.Fatal("no valid random config in 10000 tries")
	return spaces.Config{}
}

// simSamples runs n random configs of the target on the virtual runner.
func simSamples(t testing.TB, tg spaces.Target, w trial.Workload, n int, seed uint64, keep func(spaces.Config) bool) []Sample {
	t.Helper()
	s := resolved(t, tg)
	run := simRunner(t, tg, true, seed)
	r := rand.New(rand.NewPCG(seed, 11))
	out := make([]Sample, 0, n)
	for i := 0; i < n; i++ {
		c := randomConfig(t, s, r, keep)
		res, err := run.Run(context.Background(), c, w)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Sample{Target: tg, Workload: w, Config: c, Result: &res})
	}
	return out
}

// simMatrix encodes samples for the default objectives with the schema of
// tg's resolved space.
func simMatrix(t testing.TB, tg spaces.Target, ss []Sample) *Matrix {
	t.Helper()
	m, err := BuildMatrix(NewSchema(resolved(t, tg)), DefaultObjectives(), ss)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// simRunner is the virtual runner of tg, with the simulator's step noise
// (seeded) or without it.
func simRunner(t testing.TB, tg spaces.Target, noise bool, seed uint64) *sim.Runner {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.Target = tg
	cfg.Noise = noise
	cfg.Seed = seed
	run, err := sim.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return run
}
