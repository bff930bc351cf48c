package search

import (
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/spaces/spacestest"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// A TPOT bound met by few sequences, a TTFT bound met by many: the best
// config sits between a feasible trial and a better infeasible one, and
// bisection walks toward it along max_num_seqs, keeping the incumbent's
// levels.
func TestBisectTowardBound(t *testing.T) {
	b := newTTFTBound(t)
	sp, slo, cfg, result := b.sp, b.slo, b.cfg, b.result
	pc := DefaultProposerConfig()
	pc.Space, pc.SLO, pc.Objectives = sp, slo, store.DefaultObjectives("tpot_p99")
	pc.History = []Observation{
		{Config: cfg(200), Result: result(200)}, // feasible, the incumbent
		{Config: cfg(40), Result: result(40)},   // TTFT 3760 ms: infeasible, better TPOT
		{Config: cfg(300), Result: result(300)}, // feasible, worse
	}
	p, err := NewProposer(pc)
	if err != nil {
		t.Fatal(err)
	}
	lastSeqs := 200
	for step := range 4 {
		c, ok := p.bisect(p.scalariser())
		if !ok {
			t.Fatalf("step %d: no bisection", step)
		}
		seqs := c.Int("max_num_seqs")
		if seqs >= lastSeqs || seqs <= 40 {
			t.Fatalf("step %d: max_num_seqs %d, want between the infeasible 40 and the incumbent's %d", step, seqs, lastSeqs)
		}
		if c.Str("kv_cache_dtype") != "fp8" || c.Int("max_num_batched_tokens") != 4096 {
			t.Fatalf("step %d: levels or other numeric values moved: %v", step, c)
		}
		r := result(seqs)
		p.Tell(c, r)
		if r.Levels[0].Metrics.TTFT.P99 <= 1000 {
			lastSeqs = seqs // a new incumbent
		}
	}
	// The bound is at 86 sequences (TTFT 1000 ms): 200 -> 89 in 4 steps.
	if lastSeqs > 95 || lastSeqs < 86 {
		t.Errorf("incumbent at max_num_seqs %d after 4 bisections; the bound is at 86", lastSeqs)
	}

	// Nothing infeasible and better: no bisection.
	pc.History = pc.History[:1]
	q, err := NewProposer(pc)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := q.bisect(q.scalariser()); ok {
		t.Errorf("bisection without an infeasible better trial: %v", c)
	}
}

// A midpoint nearer to a config already tried or in flight than to the
// incumbent is not bisected: with the nearest pair's midpoint in flight, the
// farther pair in the same direction (past it) is skipped, and a pair in
// another direction is bisected instead.
func TestBisectSkipsShadowedPairs(t *testing.T) {
	sp := h100(t)
	slo, err := trial.ParseSLO("ttft_p99<=1000ms")
	if err != nil {
		t.Fatal(err)
	}
	obs := func(seqs, tokens int, ttft, tpot float64) Observation {
		return bisectObs(t, sp, seqs, tokens, 4000, ttft, tpot)
	}
	inc := obs(200, 4096, 400, 30)     // feasible: the incumbent
	near := obs(40, 4096, 3760, 14)    // infeasible, better TPOT
	farther := obs(20, 4096, 5000, 12) // infeasible, past near
	aside := obs(200, 512, 2000, 20)   // infeasible, another axis
	between := obs(70, 4096, 900, 35)  // feasible, dominated: between the incumbent and near, past their midpoint
	pc := DefaultProposerConfig()
	pc.Space, pc.SLO, pc.Objectives = sp, slo, store.DefaultObjectives("tpot_p99")
	pc.History = []Observation{inc, near}
	mid, ok := newProposer(t, pc).bisect(newProposer(t, pc).scalariser())
	if !ok {
		t.Fatal("no bisection of the nearest pair")
	}
	for _, tc := range []struct {
		name     string
		hist     []Observation
		pending  []spaces.Config
		wantOK   bool
		wantSeqs int // 0: any
	}{
		{"nearest pair", []Observation{inc, near, farther}, nil, true, mid.Int("max_num_seqs")},
		{"its midpoint in flight, farther pair past it", []Observation{inc, near, farther}, []spaces.Config{mid}, false, 0},
		{"its midpoint in flight, a pair on another axis", []Observation{inc, near, farther, aside}, []spaces.Config{mid}, true, 200},
		{"a config measured past its midpoint", []Observation{inc, near, between}, nil, false, 0},
		{"a config in flight past its midpoint", []Observation{inc, near}, []spaces.Config{between.Config}, true, mid.Int("max_num_seqs")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc.History = tc.hist
			p := newProposer(t, pc)
			p.SetPending(tc.pending)
			c, ok := p.bisect(p.scalariser())
			if ok != tc.wantOK {
				t.Fatalf("bisect ok = %v (%v), want %v", ok, c, tc.wantOK)
			}
			if ok && tc.wantSeqs != 0 && c.Int("max_num_seqs") != tc.wantSeqs {
				t.Errorf("bisected to %v, want max_num_seqs %d", c, tc.wantSeqs)
			}
		})
	}
}

// Boxes are measured against the SLO's latency limit itself, also when a
// trial measured above the limit widens the history's range: the incumbent
// is then the low-latency config, not the throughput end a reference beyond
// the limit would favour, and bisection walks from it toward the trial that
// missed only its TTFT bound.
func TestBisectExactReference(t *testing.T) {
	sp := h100(t)
	slo, err := trial.ParseSLO("ttft_p99<=1000ms,tpot_p99<=25ms")
	if err != nil {
		t.Fatal(err)
	}
	obs := func(seqs int, thr, ttft, tpot float64) Observation {
		return bisectObs(t, sp, seqs, 4096, thr, ttft, tpot)
	}
	pc := DefaultProposerConfig()
	pc.Space, pc.SLO, pc.Objectives = sp, slo, store.DefaultObjectives("tpot_p99")
	pc.History = []Observation{
		obs(1024, 3700, 500, 30), // over the TPOT limit: the history's latency range reaches 30 ms
		obs(200, 6000, 500, 22),  // feasible, 3 ms of slack: box 18,000
		obs(60, 3000, 900, 15),   // feasible, 10 ms of slack: box 30,000, the incumbent
		obs(20, 3000, 4000, 10),  // over the TTFT limit only: box 45,000 were it feasible
	}
	p := newProposer(t, pc)
	c, ok := p.bisect(p.scalariser())
	if !ok {
		t.Fatal("no bisection")
	}
	// Against a reference beyond the limit (the history's worst latency plus
	// 10%), the 200-sequence config would hold more than the 60-sequence one
	// and the midpoint would lie between 200 and 20.
	if s := c.Int("max_num_seqs"); s <= 20 || s >= 60 {
		t.Errorf("bisected to max_num_seqs %d, want between the infeasible 20 and the incumbent's 60", s)
	}
}

// bisectObs is a measured trial of the h100 space at max_num_seqs seqs, a
// token budget of tokens and the fp8 KV cache.
func bisectObs(t *testing.T, sp *spaces.Space, seqs, tokens int, thr, ttft, tpot float64) Observation {
	t.Helper()
	c := spacestest.Normalized(t, sp, map[string]spaces.Value{
		"max_num_seqs":           spaces.IntValue(seqs),
		"max_num_batched_tokens": spaces.IntValue(tokens),
		"kv_cache_dtype":         spaces.StringValue("fp8"),
	})
	m := trial.Metrics{Completed: 100, OutputThroughput: thr,
		TTFT: trial.Dist{P99: ttft}, TPOT: trial.Dist{P99: tpot}, ITL: trial.Dist{P99: tpot}, E2EL: trial.Dist{P99: ttft + 200*tpot}}
	return Observation{Config: c, Result: &trial.Result{Status: trial.StatusOK, Levels: []trial.Level{{Metrics: m}}, PeakVRAMGiB: 60}}
}
