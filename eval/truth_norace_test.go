//go:build !race

// Pure computation (the noise-free simulator, one goroutine): built without
// -race only, run by `make norace` (see the Makefile). The evaluator's
// memo, shared by the harness's workers, is raced by TestQuickHarness.

package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
)

func TestTruthKey(t *testing.T) {
	ctx := context.Background()
	p := quickProblem(t)
	plan := SamplePlan{Random: 10, Refine: 2, Seed: 1}
	k1, err := TruthKey(ctx, p, plan)
	if err != nil {
		t.Fatal(err)
	}
	if k2, _ := TruthKey(ctx, p, plan); k2 != k1 {
		t.Fatalf("key not stable: %s vs %s", k1, k2)
	}
	plan2 := plan
	plan2.Random++
	if k, _ := TruthKey(ctx, p, plan2); k == k1 {
		t.Error("key ignores the plan")
	}
	sc := p.Scenario
	sc.Workload.NumRequests++ // the simulator's results move: new fingerprint
	p2, err := sc.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	f1, _ := Fingerprint(ctx, p)
	f2, _ := Fingerprint(ctx, p2)
	if f1 == f2 {
		t.Error("fingerprint ignores the workload")
	}
	sc = p.Scenario
	sc.SLO = "ttft_p99<=900ms,tpot_p99<=25ms" // same simulator, other scenario
	p3, _ := sc.Resolve()
	if k, _ := TruthKey(ctx, p3, plan); k == k1 {
		t.Error("key ignores the scenario")
	}
}

// TestTruthCache computes a small ground truth and checks its invariants,
// (one config per distinct point among them), the cache round trip and
// staleness.
func TestTruthCache(t *testing.T) {
	ctx := context.Background()
	p := quickProblem(t)
	ev, err := NewEvaluator(p)
	if err != nil {
		t.Fatal(err)
	}
	plan := SamplePlan{Random: 30, Refine: 10, Seed: 5, Polish: 300}
	keys, err := KeysOf(ctx, p, plan)
	if err != nil {
		t.Fatal(err)
	}
	key := keys.Truth
	gt, err := ComputeTruth(ctx, p, ev, plan, keys, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gt.Polished == 0 || gt.Polished > plan.Polish || !(gt.HV >= gt.SampledHV) {
		t.Errorf("polish: %d evaluations, HV %v from sampled %v", gt.Polished, gt.HV, gt.SampledHV)
	}
	if err := gt.validate(); err != nil {
		t.Fatal(err)
	}
	dirs := p.Objectives.Directions()
	if n := distinctVecs(gt.FrontVecs()); n != len(gt.Front) {
		t.Errorf("front of %d members holds %d distinct points", len(gt.Front), n)
	}
	for i, a := range gt.Front {
		for j, b := range gt.Front {
			if i != j && pareto.Dominates(b.Vec, a.Vec, dirs) {
				t.Fatalf("front member %s dominated by %s", a.ID, b.ID)
			}
		}
		if err := p.Space.Validate(a.Config); err != nil {
			t.Fatalf("front config %s not in the space: %v", a.ID, err)
		}
		tr, _ := ev.Truth(ctx, a.Config)
		if !tr.Feasible {
			t.Fatalf("front config %s is not feasible", a.ID)
		}
		for k, o := range p.Objectives {
			if !o.Direction.Better(a.Vec[k], gt.Ref[k]) {
				t.Fatalf("front point %v does not beat the reference %v", a.Vec, gt.Ref)
			}
		}
	}
	if gt.Evaluated < plan.Random || gt.Evaluated > plan.Random+plan.Refine+plan.Polish+len(gridSeqs)*len(gridTokens)+1 {
		t.Errorf("evaluated %d configs", gt.Evaluated)
	}
	if gt.Default.Vec == nil {
		t.Error("default config not evaluated")
	}

	dir := t.TempDir()
	if err := SaveTruth(dir, gt, "x"); err != nil {
		t.Fatal(err)
	}
	back, err := LoadTruth(dir, "x", key)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(gt)
	b, _ := json.Marshal(back)
	if !bytes.Equal(a, b) {
		t.Error("cache round trip changed the ground truth")
	}
	if _, err := LoadTruth(dir, "x", "other"); !errors.Is(err, ErrStaleCache) {
		t.Errorf("stale key: %v, want ErrStaleCache", err)
	}
	if _, err := LoadTruth(dir, "y", key); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing cache: %v, want not exist", err)
	}

	// A polish started from the cached sample stage keeps its reference
	// point: the front alone may lack the sample's worst feasible latency
	// that sets it where the SLO does not bound the latency objective.
	st := loadSampled(dir, "x", keys.Sample)
	if st == nil || len(st.Front) != len(gt.Front) || !slices.Equal(st.Ref, gt.Ref) {
		t.Fatalf("sample stage of the cache: %+v", st)
	}
	st.Ref = slices.Clone(gt.Ref)
	st.Ref[1] *= 2
	again, err := ComputeTruth(ctx, p, ev, plan, keys, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.Ref, st.Ref) || !(again.HV >= gt.HV) {
		t.Errorf("recomputed from the sample stage: ref %v (want %v), HV %v (first %v)", again.Ref, st.Ref, again.HV, gt.HV)
	}
}

// TestCommittedTruth checks the committed cache files: decodable, valid,
// small, fronts non-dominated and inside their spaces. A stale key is
// reported, not failed: `make eval-search` recomputes it.
func TestCommittedTruth(t *testing.T) {
	own := exampleScenarios(t, "../examples/eval-scenarios.yaml")
	heldOut := exampleScenarios(t, "../examples/eval-heldout.yaml")
	for _, sc := range slices.Concat(DefaultScenarios(), own, heldOut) {
		// The repository takes no file over 512 KiB; a front of one
		// config per distinct point (distinctPoints) is ~150 KB at most.
		if st, err := os.Stat(truthFile("testdata", sc.Name)); err == nil && st.Size() > 300<<10 {
			t.Errorf("%s: committed ground truth is %d KB (keep it under 300 KB)", sc.Name, st.Size()>>10)
		}
		gt, err := LoadTruth("testdata", sc.Name, "")
		if errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: no committed ground truth", sc.Name)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		p, err := sc.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		if !gt.Objectives.Equal(p.Objectives) || gt.Scenario != sc.Name {
			t.Fatalf("%s: cache is for %s / %v", sc.Name, gt.Scenario, gt.Objectives)
		}
		vecs := gt.FrontVecs()
		if n := distinctVecs(vecs); n != len(vecs) {
			t.Errorf("%s: front of %d members holds %d distinct points (one config per point)", sc.Name, len(vecs), n)
		}
		if idx := pareto.Front(vecs, p.Objectives.Directions()); len(idx) != len(vecs) {
			t.Errorf("%s: %d of %d front points are dominated", sc.Name, len(vecs)-len(idx), len(vecs))
		}
		hv, err := pareto.Hypervolume(vecs, p.Objectives.Directions(), gt.Ref)
		if err != nil || math.Abs(hv-gt.HV) > 1e-9*gt.HV {
			t.Errorf("%s: stored HV %v, recomputed %v (%v)", sc.Name, gt.HV, hv, err)
		}
		for _, f := range gt.Front {
			if err := p.Space.Validate(f.Config); err != nil {
				t.Errorf("%s: front config %s: %v", sc.Name, f.ID, err)
				break
			}
		}
		if key, err := TruthKey(context.Background(), p, gt.Plan); err == nil && key != gt.Key {
			t.Logf("%s: committed ground truth is stale (key %s, simulator now gives %s); run make eval-search", sc.Name, gt.Key, key)
		}
	}
}
