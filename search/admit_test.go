package search

import (
	"cmp"
	"context"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// The best throughput capped below the client count: admit moves it to
// every client once, at the largest budget the scorer expects within the
// TPOT limit, its other values kept; and not when it admits every client
// already, when the load was not a closed loop, when the scorer expects
// no budget feasible, or when max_num_seqs is not tuned.
func TestAdmit(t *testing.T) {
	sp := h100(t)
	slo, err := trial.ParseSLO("ttft_p99<=5000ms,tpot_p99<=100ms")
	if err != nil {
		t.Fatal(err)
	}
	obs := func(seqs, tokens, clients int, thr float64) Observation {
		o := bisectObs(t, sp, seqs, tokens, thr, 3000, 90)
		o.Result.Levels[0].Concurrency = clients
		return o
	}
	// With every client in, TPOT p99 is 40 ms + a tenth of the budget: the
	// 100 ms limit at 600 tokens, throughput rising with the budget.
	model := func(pf func(seqs, tokens int) float64) Scorer {
		return ScorerFunc(func(_ context.Context, cands []spaces.Config) ([]Prediction, error) {
			out := make([]Prediction, len(cands))
			for i, c := range cands {
				b := float64(c.Int("max_num_batched_tokens"))
				out[i] = Prediction{Mean: []float64{2000 + b/2, 3000, 56}, Std: []float64{0, 0, 0},
					PFeasible: pf(c.Int("max_num_seqs"), c.Int("max_num_batched_tokens"))}
			}
			return out, nil
		})
	}
	tpotBound := model(func(seqs, tokens int) float64 {
		if seqs >= 256 && 40+float64(tokens)/10 > 100 {
			return 0
		}
		return 1
	})
	never := model(func(int, int) float64 { return 0 })
	capped := []Observation{obs(200, 8192, 256, 2400), obs(150, 8192, 256, 2300)}
	pinned := sp.Clone()
	param(t, pinned, "max_num_seqs").Tune = false
	for _, tc := range []struct {
		name       string
		space      *spaces.Space // nil: sp
		hist       []Observation
		scorer     Scorer
		wantOK     bool
		minT, maxT int
	}{
		{"capped below the clients", nil, capped, tpotBound, true, 450, 600},
		{"every client admitted already", nil, []Observation{obs(300, 8192, 256, 2400), obs(150, 8192, 256, 2300)}, tpotBound, false, 0, 0},
		{"not a closed loop", nil, []Observation{obs(200, 8192, 0, 2400)}, tpotBound, false, 0, 0},
		{"no budget expected feasible", nil, capped, never, false, 0, 0},
		{"max_num_seqs pinned", pinned, capped, tpotBound, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := DefaultProposerConfig()
			pc.Space, pc.SLO, pc.Objectives, pc.Scorer = cmp.Or(tc.space, sp), slo, store.DefaultObjectives("ttft_p99"), tc.scorer
			pc.History = tc.hist
			p := newProposer(t, pc)
			c, ok := p.admit(context.Background(), p.scalariser())
			if ok != tc.wantOK {
				t.Fatalf("admit ok = %v (%v), want %v", ok, c, tc.wantOK)
			}
			if !ok {
				return
			}
			if s := c.Int("max_num_seqs"); s != 256 {
				t.Errorf("admitted at max_num_seqs %d, want the 256 clients", s)
			}
			if b := c.Int("max_num_batched_tokens"); b < tc.minT || b > tc.maxT {
				t.Errorf("budget %d, want %d-%d (the largest expected within the TPOT limit)", b, tc.minT, tc.maxT)
			}
			if c.Str("kv_cache_dtype") != "fp8" {
				t.Errorf("levels moved: %v", c)
			}
			if again, ok := p.admit(context.Background(), p.scalariser()); ok {
				t.Errorf("admitted twice: %v", again)
			}
		})
	}
}
