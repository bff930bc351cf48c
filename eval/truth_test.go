package eval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
)

func quickProblem(t *testing.T) *Problem {
	t.Helper()
	p, err := DefaultScenarios()[0].Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

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
}

// TestCommittedTruth checks the committed cache files: decodable, valid,
// small, fronts non-dominated and inside their spaces. A stale key is
// reported, not failed: `make eval-search` recomputes it.
func TestCommittedTruth(t *testing.T) {
	own, err := LoadScenarios("../examples/eval-scenarios.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range append(DefaultScenarios(), own...) {
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

// TestWalk: a numeric walk reaches a bound to one unit (steps kept while
// they enter the front, halved when not), from either side, and stops at
// the range's end.
func TestWalk(t *testing.T) {
	p := quickProblem(t)
	prm, _ := p.Space.Param("max_num_batched_tokens")
	start := p.Space.DefaultConfig().With("max_num_seqs", spaces.IntValue(8))
	for _, tc := range []struct {
		from  int
		sign  float64
		bound int
		want  int
	}{
		{8192, -1, 879, 879},     // smaller is better down to 879
		{600, 1, 4099, 4099},     // larger is better up to 4099
		{8192, -1, 100, 512},     // down to the range's end
		{8192, 1, 70000, 65536},  // up to the range's end
		{8192, -1, 8192, 8192},   // already at the bound
		{2048, 1, 2049, 2049},    // one unit away
		{65536, 1, 70000, 65536}, // at the end: no probe
	} {
		c := start.With(prm.Name, spaces.IntValue(tc.from))
		best, probes := tc.from, 0
		err := walk(p.Space, c, prm, tc.sign, func(n spaces.Config) (bool, error) {
			probes++
			v, _ := n.Get(prm.Name)
			x := int(v.Float())
			better := (tc.sign < 0 && x < best && x >= tc.bound) || (tc.sign > 0 && x > best && x <= tc.bound)
			if better {
				best = x
			}
			return better, nil
		})
		if err != nil || best != tc.want {
			t.Errorf("from %d sign %v bound %d: reached %d after %d probes (%v), want %d", tc.from, tc.sign, tc.bound, best, probes, err, tc.want)
		}
		if probes > 60 {
			t.Errorf("from %d sign %v bound %d: %d probes", tc.from, tc.sign, tc.bound, probes)
		}
	}
}

// TestLevelCombos: every combination of the discrete levels when they are
// few, a sample of distinct ones when not.
func TestLevelCombos(t *testing.T) {
	p := quickProblem(t)
	n := 1
	for _, prm := range p.Space.Tuned() {
		if lv := levelAxis(prm); len(lv) > 1 {
			n *= len(lv)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	distinct := func(cs []map[string]spaces.Value) int {
		seen := map[string]bool{}
		for _, c := range cs {
			seen[spaces.NewConfig(c).ID()] = true
		}
		return len(seen)
	}
	if all := levelCombos(p.Space, 0, r); len(all) != n || distinct(all) != n {
		t.Errorf("all combinations: %d (%d distinct), want %d", len(all), distinct(all), n)
	}
	if some := levelCombos(p.Space, 100, r); len(some) != 100 || distinct(some) != 100 {
		t.Errorf("sampled: %d (%d distinct), want 100", len(some), distinct(some))
	}
	if n < 100 {
		t.Fatalf("only %d combinations: the test needs a larger space", n)
	}
}

func FuzzDecodeTruth(f *testing.F) {
	p := &Problem{Objectives: pareto.Objectives{{Name: "output_throughput", Direction: pareto.Maximize}, {Name: "tpot_p99", Direction: pareto.Minimize}}}
	cfg := spaces.NewConfig(map[string]spaces.Value{"max_num_seqs": spaces.IntValue(8)})
	gt := GroundTruth{Format: TruthFormat, Key: "k", Scenario: "s", Objectives: p.Objectives, Ref: []float64{0, 10}, HV: 5,
		RefStrict: []float64{1, 9}, HVStrict: 1, Front: []FrontPoint{{ID: cfg.ID(), Config: cfg, Vec: []float64{1, 5}}}}
	good, _ := json.Marshal(gt)
	f.Add(good)
	f.Add([]byte(`{"format":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := decodeTruth(b)
		if err != nil {
			return
		}
		if err := g.validate(); err != nil {
			t.Fatalf("decoded an invalid truth: %v", err)
		}
		if _, err := json.Marshal(g); err != nil {
			t.Fatalf("decoded truth does not encode: %v", err)
		}
	})
}

// TestDescend: an edge descent reaches the best value of its objective,
// one axis after another, and keeps the SLO (infeasible configs never
// become the current one).
func TestDescend(t *testing.T) {
	p := quickProblem(t)
	start, _ := validConfig(p.Space, p.Space.DefaultConfig().With("max_num_seqs", spaces.IntValue(8)))
	num := func(c spaces.Config, name string) float64 { v, _ := c.Get(name); return v.Float() }
	// Objective 0, minimised: distance of max_num_batched_tokens from 879
	// plus that of gpu_memory_utilization from 0.8; feasible only below
	// utilisation 0.95 and with fp8 KV cache off.
	var best Truth
	look := func(_ string, c spaces.Config) (Truth, bool, error) {
		v, _ := c.Get("kv_cache_dtype")
		tr := Truth{Vec: []float64{math.Abs(num(c, "max_num_batched_tokens")-879) + 1000*math.Abs(num(c, "gpu_memory_utilization")-0.8)},
			Feasible: num(c, "gpu_memory_utilization") < 0.95 && v.String() == "auto"}
		if tr.Feasible && (best.Vec == nil || tr.Vec[0] < best.Vec[0]) {
			best = tr
		}
		return tr, false, nil
	}
	t0, _, _ := look("", start)
	if err := descend(p.Space, frontMember{cfg: start, vec: t0.Vec}, 0, pareto.Minimize, look); err != nil {
		t.Fatal(err)
	}
	if best.Vec[0] > 1e-6 {
		t.Errorf("descent stopped at %v from the optimum", best.Vec[0])
	}
}

func distinctVecs(vecs [][]float64) int {
	seen := map[string]bool{}
	for _, v := range vecs {
		seen[vecKey(v)] = true
	}
	return len(seen)
}
