package search

import (
	"context"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
)

// With no infeasible trial past the TTFT bound, bisection has no pair; the
// probe moves the incumbent along max_num_seqs to where the scorer places
// the bound, its other values kept, and nowhere when the scorer sees no
// better box along any axis.
func TestProbeTowardPredictedBound(t *testing.T) {
	b := newTTFTBound(t)
	sp, slo, cfg, result, ttft, tpot := b.sp, b.slo, b.cfg, b.result, b.ttft, b.tpot
	// A scorer that knows the model: P(feasible) falls from 1 to 0 at the bound.
	knows := ScorerFunc(func(_ context.Context, cands []spaces.Config) ([]Prediction, error) {
		out := make([]Prediction, len(cands))
		for i, c := range cands {
			s := c.Int("max_num_seqs")
			pf := 0.0
			if ttft(s) <= 1000 {
				pf = 1
			}
			out[i] = Prediction{Mean: []float64{4000, tpot(s), 56}, Std: []float64{0, 0, 0}, PFeasible: pf}
		}
		return out, nil
	})
	pc := DefaultProposerConfig()
	pc.Space, pc.SLO, pc.Objectives, pc.Scorer = sp, slo, store.DefaultObjectives("tpot_p99"), knows
	for _, s := range []int{200, 300, 400, 250, 350, 500, 600, 700} { // all feasible, 200 the incumbent
		pc.History = append(pc.History, Observation{Config: cfg(s), Result: result(s), Weight: 1})
	}
	p := newProposer(t, pc)
	if _, ok := p.bisect(p.scalariser()); ok {
		t.Fatal("bisection found a pair with nothing infeasible")
	}
	c, ok := p.probe(context.Background(), p.scalariser())
	if !ok {
		t.Fatal("no probe")
	}
	// The line's steps are a quarter of the distance apart there (108, 84,
	// ...); the halvings on the model find the bound to the sequence.
	if s := c.Int("max_num_seqs"); s != 86 {
		t.Errorf("probe at max_num_seqs %d, want 86 (the bound)", s)
	}
	if c.Int("max_num_batched_tokens") != 4096 || c.Float("gpu_memory_utilization") != 0.7 || c.Str("kv_cache_dtype") != "fp8" {
		t.Errorf("probe moved more than max_num_seqs: %v", c)
	}

	// A scorer that sees no gain along any axis: no probe.
	flat := ScorerFunc(func(_ context.Context, cands []spaces.Config) ([]Prediction, error) {
		out := make([]Prediction, len(cands))
		for i := range cands {
			out[i] = Prediction{Mean: []float64{4000, 30, 56}, Std: []float64{0, 0, 0}, PFeasible: 1}
		}
		return out, nil
	})
	pc.Scorer = flat
	q := newProposer(t, pc)
	if c, ok := q.probe(context.Background(), q.scalariser()); ok {
		t.Errorf("probe %v with no predicted gain", c)
	}
}

// A side of the incumbent counts as explored when a measured config with its
// levels lies there along the axis, every other numeric value near the
// incumbent's.
func TestProbeExplored(t *testing.T) {
	pc := DefaultProposerConfig()
	pc.Space = h100(t)
	p := newProposer(t, pc)
	seqs, tokens := -1, -1
	for i, d := range p.dims {
		switch d.p.Name {
		case "max_num_seqs":
			seqs = i
		case "max_num_batched_tokens":
			tokens = i
		}
	}
	inc := make([]float64, len(p.dims))
	for i := range inc {
		inc[i] = 0.5
	}
	at := func(moves map[int]float64) []float64 {
		x := append([]float64(nil), inc...)
		for i, dx := range moves {
			x[i] += dx
		}
		return x
	}
	for _, tc := range []struct {
		name   string
		probed [][]float64
		axis   int
		side   float64
		want   bool
	}{
		{"nothing measured", nil, seqs, -1, false},
		{"below, same tokens", [][]float64{at(map[int]float64{seqs: -0.2})}, seqs, -1, true},
		{"below, asked above", [][]float64{at(map[int]float64{seqs: -0.2})}, seqs, 1, false},
		{"below, tokens moved too", [][]float64{at(map[int]float64{seqs: -0.2, tokens: 0.1})}, seqs, -1, false},
		{"below, tokens within resolution", [][]float64{at(map[int]float64{seqs: -0.2, tokens: bisectResolution / 2})}, seqs, -1, true},
		{"the incumbent itself", [][]float64{inc}, seqs, -1, false},
	} {
		if got := p.explored(tc.probed, inc, tc.axis, tc.side); got != tc.want {
			t.Errorf("%s: explored %v, want %v", tc.name, got, tc.want)
		}
	}
}
