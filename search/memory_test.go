package search

import (
	"context"
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

func TestMemoryFitPStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    memoryFit
		h    float64
		want float64
	}{
		{"no failure", memoryFit{rampGiB: 1}, -5, 1},
		{"at the failure", memoryFit{failed: true, failMax: 0.5, rampGiB: 1}, 0.5, memoryFloorP},
		{"below it", memoryFit{failed: true, failMax: 0.5, rampGiB: 1}, -3, memoryFloorP},
		{"half up the ramp", memoryFit{failed: true, failMax: 0.5, rampGiB: 1}, 1, memoryFloorP + (1-memoryFloorP)/2},
		{"past the ramp", memoryFit{failed: true, failMax: 0.5, rampGiB: 1}, 1.5, 1},
		{"a start narrows the ramp", memoryFit{failed: true, started: true, failMax: 0.5, okMin: 0.7, rampGiB: 1}, 0.7, 1},
		{"inside the narrow ramp", memoryFit{failed: true, started: true, failMax: 0.5, okMin: 0.7, rampGiB: 1}, 0.6, memoryFloorP + (1-memoryFloorP)/2},
		{"a start far above keeps the ramp", memoryFit{failed: true, started: true, failMax: 0.5, okMin: 9, rampGiB: 1}, 1.5, 1},
		{"not separated", memoryFit{failed: true, started: true, failMax: 0.5, okMin: 0.2, rampGiB: 1}, 0, 1},
	} {
		if got := tc.f.pStart(tc.h); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: pStart(%v) = %v, want %v", tc.name, tc.h, got, tc.want)
		}
	}
}

// TestFitMemory: the study's own memory failures and start-ups, on the
// headroom estimate; other contexts', other failures and a GPU short of
// free memory for the utilisation asked (too much, not too little) say
// nothing.
func TestFitMemory(t *testing.T) {
	s := testSpace(t, "Qwen2.5-32B", "A100-40GB", 2)
	tg := *s.Target()
	at := func(util float64) spaces.Config {
		return s.DefaultConfig().With("tensor_parallel_size", spaces.IntValue(2)).With("gpu_memory_utilization", spaces.FloatValue(util)).
			With("max_num_batched_tokens", spaces.IntValue(2048))
	}
	fail := func(c spaces.Config, f trial.FailureClass) Observation {
		return Observation{Config: c, Result: &trial.Result{Config: c, Status: trial.StatusFailed, Failure: f}}
	}
	ok := func(c spaces.Config) Observation { return Observation{Config: c, Result: measured(c, 500, 50, 30)} }
	other := fail(at(0.95), trial.FailOOM)
	other.Target = &tg
	short := fail(at(0.98), trial.FailOOM)
	short.Result.Error = "engine out of memory (exit 1): ValueError: Free memory on device (37.1/39.39 GiB) on startup is less than desired GPU memory utilization (0.98, 38.6 GiB)."
	hist := []Observation{
		fail(at(0.8), trial.FailKVTooSmall), fail(at(0.81), trial.FailOOM), ok(at(0.85)), ok(at(0.9)),
		other, fail(at(0.97), trial.FailCrashed), {Config: at(0.99)}, short,
	}
	f := fitMemory(tg, hist)
	h := func(u float64) float64 { return surrogate.StartHeadroomGiB(tg, at(u)) }
	if !f.failed || !f.started || f.failMax != h(0.81) || f.okMin != h(0.85) {
		t.Fatalf("fit %+v, want failures up to %v and starts from %v GiB", f, h(0.81), h(0.85))
	}
	if f.rampGiB != rampShare*tg.GPU.MemoryGiB {
		t.Errorf("ramp %v GiB", f.rampGiB)
	}
	if p := f.pStart(h(0.8)); p != memoryFloorP {
		t.Errorf("P(start) at utilisation 0.80 %v, want %v", p, memoryFloorP)
	}
	if p := f.pStart(h(0.86)); p != 1 {
		t.Errorf("P(start) at utilisation 0.86 %v, want 1", p)
	}
	// More tokens a step need more activation memory: less headroom.
	if !(surrogate.StartHeadroomGiB(tg, at(0.85).With("max_num_batched_tokens", spaces.IntValue(65536))) < h(0.85)-1) {
		t.Error("65,536 batched tokens leave as much headroom as 2,048")
	}
}

// TestSurrogateScorerLearnsMemoryFloor: Qwen 2.5 32B on two 40 GB A100s
// fits only near the top of the utilisation range that the static pruning
// leaves (weights and one sequence's KV cache). Before two trials are
// measured the surrogate's P(feasible) is one constant; the memory
// failures must still steer the search out of the floor. On the
// simulator's start-up accounting, 11 of the first 12 trials failed for
// memory without memoryFit (3 with it).
func TestSurrogateScorerLearnsMemoryFloor(t *testing.T) {
	s := testSpace(t, "Qwen2.5-32B", "A100-40GB", 2)
	objs := store.DefaultObjectives("tpot_p99")
	po := DefaultPruneOptions()
	po.Objectives = objs
	pruned, _ := Prune(s, nil, po)
	sc, err := NewSurrogateScorer(pruned, smokeWorkload(), objs, nil, surrogate.Options{Seed: 3, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultProposerConfig()
	cfg.Space, cfg.Sampler, cfg.Seed, cfg.Objectives, cfg.Scorer = pruned, SamplerTPE, 3, objs, sc
	p := newProposer(t, cfg)
	run := simRun(t, pruned, 3)
	memFails := 0
	for i := range 12 {
		c, err := p.Ask(context.Background())
		if err != nil {
			t.Fatalf("ask %d: %v", i, err)
		}
		r := run(c)
		if r.Failure == trial.FailOOM || r.Failure == trial.FailKVTooSmall {
			memFails++
		}
		p.Tell(c, r)
	}
	t.Logf("%d of 12 trials failed for memory", memFails)
	if memFails > 5 {
		t.Errorf("%d of 12 trials failed for memory, want at most 5", memFails)
	}
}
