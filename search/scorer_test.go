package search

import (
	"context"
	"errors"
	"testing"

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
