package search

import (
	"context"
	"fmt"
	"testing"

	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
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

// Screening with the real surrogate is reproducible too.
func TestSimSurrogateReproducible(t *testing.T) {
	s := h100(t)
	objs := store.DefaultObjectives("tpot_p99")
	seq := func() []string {
		sc, err := NewSurrogateScorer(s, smokeWorkload(), objs, nil, surrogate.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p := newProposer(t, ProposerConfig{Space: s, Seed: 1, Objectives: objs, Scorer: sc, MinScreenHistory: 4})
		var ids []string
		for _, c := range runProposer(t, p, 10, simRun(t, s, 1)) {
			ids = append(ids, c.ID())
		}
		return ids
	}
	if a, b := seq(), seq(); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("same seed, different sequences:\n%v\n%v", a, b)
	}
}
