package search

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

func surrogateOptions() surrogate.Options { return surrogate.Options{} }

// measured builds an ok result with the given throughput, TPOT p99 and VRAM.
func measured(c spaces.Config, thr, tpot, vram float64) *trial.Result {
	return &trial.Result{Config: c, Status: trial.StatusOK, PeakVRAMGiB: vram,
		Levels: []trial.Level{{Metrics: trial.Metrics{Completed: 10, OutputThroughput: thr, TPOT: trial.Dist{P99: tpot}}}}}
}

func TestConservativeRank(t *testing.T) {
	s := h100(t)
	def := s.DefaultConfig()
	a := def.With("max_num_seqs", spaces.IntValue(64))
	b := def.With("max_num_seqs", spaces.IntValue(128))
	c := def.With("max_num_seqs", spaces.IntValue(512))
	objs := pareto.Objectives{{Name: "output_throughput", Direction: pareto.Maximize}, {Name: "tpot_p99", Direction: pareto.Minimize}}
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 50}}
	hist := []Observation{
		// a: steady 1000 tok/s, 20 ms.
		{Config: a, Result: measured(a, 1000, 20, 70)}, {Config: a, Result: measured(a, 1010, 20, 70)}, {Config: a, Result: measured(a, 990, 20, 70)},
		// b: one lucky run of 1500 and two of 900: median 900, MAD 0 -> 900; 20 ms.
		{Config: b, Result: measured(b, 1500, 20, 70)}, {Config: b, Result: measured(b, 900, 20, 70)}, {Config: b, Result: measured(b, 900, 20, 70)},
		// c: fast but one run violates the SLO.
		{Config: c, Result: measured(c, 3000, 40, 70)}, {Config: c, Result: measured(c, 3000, 60, 70)},
		// a failure of another config: ranked last.
		{Config: def, Result: &trial.Result{Status: trial.StatusFailed, Failure: trial.FailOOM}},
	}
	r := ConservativeRank(hist, objs, slo, 1)
	if len(r) != 4 {
		t.Fatalf("%d ranked, want 4", len(r))
	}
	if r[0].ID != a.ID() || r[0].Rank != 0 {
		t.Fatalf("first = %s rank %d, want a (steady) at rank 0", r[0].Config, r[0].Rank)
	}
	if math.Abs(r[0].Median[0]-1000) > 1e-9 || math.Abs(r[0].MAD[0]-10) > 1e-9 || math.Abs(r[0].Conservative[0]-990) > 1e-9 {
		t.Fatalf("a: median %v MAD %v conservative %v", r[0].Median, r[0].MAD, r[0].Conservative)
	}
	if r[1].ID != b.ID() || r[1].Rank != 1 || r[1].Conservative[0] != 900 {
		t.Fatalf("second = %+v, want b at rank 1 with conservative 900", r[1])
	}
	for _, x := range r[2:] {
		if x.Rank != -1 {
			t.Fatalf("%s: rank %d, want -1 (infeasible or failed)", x.Config, x.Rank)
		}
	}
}

func TestRepeatCandidates(t *testing.T) {
	s := h100(t)
	p := newProposer(t, ProposerConfig{Space: s, Seed: 4})
	runProposer(t, p, 20, nil)
	got := p.RepeatCandidates(3)
	if len(got) != 3 {
		t.Fatalf("%d candidates, want 3", len(got))
	}
	ranked := ConservativeRank(p.History(), p.cfg.Objectives, nil, 1)
	front := map[string]bool{}
	for _, r := range ranked {
		if r.Rank == 0 {
			front[r.ID] = true
		}
	}
	for _, c := range got {
		if len(front) >= 3 && !front[c.ID()] {
			t.Errorf("%s is not on the conservative front", c)
		}
	}
	if p.RepeatCandidates(0) != nil {
		t.Error("RepeatCandidates(0) not empty")
	}
}

func TestSurrogateScorer(t *testing.T) {
	s := h100(t)
	slo := trial.SLO{{Metric: "tpot_p99", Op: "<=", Limit: 12}}
	sc, err := NewSurrogateScorer(s, smokeWorkload(), store.DefaultObjectives(""), slo, surrogateOptions())
	if err != nil {
		t.Fatal(err)
	}
	cands := []spaces.Config{s.DefaultConfig()}
	if _, err := sc.Score(context.Background(), cands); !errors.Is(err, ErrNotFitted) {
		t.Fatalf("score before fit: %v, want ErrNotFitted", err)
	}
	hist := randomHistory(t, s, 30, 2, synth)
	if err := sc.Fit(context.Background(), hist); err != nil {
		t.Fatal(err)
	}
	// Low batch (tpot ~ 8.5 ms in synth) vs a batch bound by the KV cache
	// (~16 ms), against a 12 ms limit.
	lo := s.DefaultConfig().With("max_num_seqs", spaces.IntValue(16)).With("max_num_batched_tokens", spaces.IntValue(16384))
	hi := s.DefaultConfig().With("max_num_seqs", spaces.IntValue(2048)).With("max_num_batched_tokens", spaces.IntValue(16384))
	preds, err := sc.Score(context.Background(), []spaces.Config{lo, hi})
	if err != nil {
		t.Fatal(err)
	}
	if len(preds[0].Mean) != 3 {
		t.Fatalf("prediction has %d objectives", len(preds[0].Mean))
	}
	if !(preds[0].PFeasible > 0.5 && preds[1].PFeasible < 0.5) {
		t.Fatalf("P(feasible): low batch %.2f, high batch %.2f; want > 0.5 and < 0.5", preds[0].PFeasible, preds[1].PFeasible)
	}
	if !(preds[1].Mean[0] > preds[0].Mean[0]) {
		t.Fatalf("throughput: high batch %.0f not above low batch %.0f", preds[1].Mean[0], preds[0].Mean[0])
	}
}

func TestCMAESGenerations(t *testing.T) {
	p := newProposer(t, ProposerConfig{Space: h100(t), Sampler: SamplerCMAES, Seed: 5})
	runProposer(t, p, 40, nil)
	if p.cma.opt == nil || p.cma.opt.Generation() < 2 {
		t.Fatalf("CMA-ES did not advance generations over 40 trials")
	}
}
