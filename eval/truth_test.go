package eval

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

func quickProblem(t *testing.T) *Problem {
	t.Helper()
	p, err := DefaultScenarios()[0].Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return p
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

// TestDescendRepairs: a descent whose best lies across a constraint reaches
// it through repaired probes. Minimising the token budget from 2048 at 800
// sequences stops at 800 (max_num_batched_tokens >= max_num_seqs) unless a
// probe below is repaired by lowering max_num_seqs with it.
func TestDescendRepairs(t *testing.T) {
	p := quickProblem(t)
	start, ok := validConfig(p.Space, p.Space.DefaultConfig().With("enable_chunked_prefill", spaces.BoolValue(true)).
		With("max_num_seqs", spaces.IntValue(800)).With("max_num_batched_tokens", spaces.IntValue(2048)))
	if !ok {
		t.Fatal("start config invalid")
	}
	prm, _ := p.Space.Param("max_num_batched_tokens")
	var best float64 = math.Inf(1)
	look := func(_ string, c spaces.Config) (Truth, bool, error) {
		v, _ := c.Get("max_num_batched_tokens")
		best = math.Min(best, v.Float())
		return Truth{Vec: []float64{v.Float()}, Feasible: true}, false, nil
	}
	t0, _, _ := look("", start)
	if err := descend(p.Space, frontMember{cfg: start, vec: t0.Vec}, 0, pareto.Minimize, look); err != nil {
		t.Fatal(err)
	}
	if best != prm.Min {
		t.Errorf("descent reached %v batched tokens, want the range's %v", best, prm.Min)
	}
}

// TestDescendRestores: a level move that is better but just misses the SLO
// is pulled back within it along a numeric axis (restore), so the descent
// reaches a feasible pocket no single move enters; a move that misses by
// more than restoreMax is not restored. Objective 0, minimised: 10 with
// the KV cache in auto, 0 in fp8, where the SLO holds only for token
// budgets in [1900, 2000] and the violation grows with the distance.
func TestDescendRestores(t *testing.T) {
	p := quickProblem(t)
	start, ok := validConfig(p.Space, p.Space.DefaultConfig().With("kv_cache_dtype", spaces.StringValue("auto")).
		With("max_num_seqs", spaces.IntValue(8)).With("max_num_batched_tokens", spaces.IntValue(4096)))
	if !ok {
		t.Fatal("start config invalid")
	}
	for _, tc := range []struct {
		name  string
		scale float64 // violation per batched token outside the window
		want  float64 // best objective reached
	}{
		{"small miss restored", 1e-5, 0},
		{"large miss left", 1e-3, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			best := math.Inf(1)
			look := func(_ string, c spaces.Config) (Truth, bool, error) {
				kv, _ := c.Get("kv_cache_dtype")
				mbt, _ := c.Get("max_num_batched_tokens")
				tr := Truth{Vec: []float64{10}, Feasible: true}
				if kv.String() == "fp8" {
					tr.Vec[0] = 0
					if d := math.Max(1900-mbt.Float(), mbt.Float()-2000); d > 0 {
						tr.Feasible, tr.Violation = false, tc.scale*d
					}
				}
				if tr.Feasible {
					best = math.Min(best, tr.Vec[0])
				}
				return tr, false, nil
			}
			t0, _, _ := look("", start)
			if err := descend(p.Space, frontMember{cfg: start, vec: t0.Vec}, 0, pareto.Minimize, look); err != nil {
				t.Fatal(err)
			}
			if best != tc.want {
				t.Errorf("descent reached %v, want %v", best, tc.want)
			}
		})
	}
}

func distinctVecs(vecs [][]float64) int {
	seen := map[string]bool{}
	for _, v := range vecs {
		seen[vecKey(v)] = true
	}
	return len(seen)
}

// multiGPUProblem is the Qwen2-72B problem on 8 H200s: ten parallel
// layouts (TP x DP <= 8).
func multiGPUProblem(t *testing.T) *Problem {
	t.Helper()
	for _, sc := range DefaultScenarios() {
		if sc.GPUCount == 8 {
			p, err := sc.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatal("no 8-GPU default scenario")
	return nil
}

// TestDescendResplits: an edge descent moves between parallel layouts
// that changing TP or DP alone cannot reach (8 x 1 to 4 x 2 passes through
// 4 x 1 or the invalid 8 x 2), keeping the other flags.
func TestDescendResplits(t *testing.T) {
	p := multiGPUProblem(t)
	seqs := spaces.IntValue(77)
	for _, tc := range []struct{ from, best spaces.Layout }{
		{spaces.Layout{TP: 8, DP: 1}, spaces.Layout{TP: 4, DP: 2}},
		{spaces.Layout{TP: 4, DP: 2}, spaces.Layout{TP: 8, DP: 1}},
		{spaces.Layout{TP: 4, DP: 2}, spaces.Layout{TP: 2, DP: 4}},
		{spaces.Layout{TP: 1, DP: 8}, spaces.Layout{TP: 8, DP: 1}},
	} {
		// Objective 0, minimised: 0 at the best layout, 1 at the start, 5
		// elsewhere; every other flag ignored.
		cost := func(c spaces.Config) float64 {
			switch spaces.LayoutOf(c) {
			case tc.best:
				return 0
			case tc.from:
				return 1
			}
			return 5
		}
		var best spaces.Config
		look := func(_ string, c spaces.Config) (Truth, bool, error) {
			if best.Len() == 0 || cost(c) < cost(best) {
				best = c
			}
			return Truth{Vec: []float64{cost(c)}, Feasible: true}, false, nil
		}
		start, ok := validConfig(p.Space, p.Space.DefaultConfig().With("tensor_parallel_size", spaces.IntValue(tc.from.TP)).
			With("data_parallel_size", spaces.IntValue(tc.from.DP)).With("max_num_seqs", seqs))
		if !ok {
			t.Fatalf("%s: start invalid", tc.from)
		}
		if err := descend(p.Space, frontMember{cfg: start, vec: []float64{1}}, 0, pareto.Minimize, look); err != nil {
			t.Fatal(err)
		}
		if got := spaces.LayoutOf(best); got != tc.best {
			t.Errorf("from %s: reached %s, want %s", tc.from, got, tc.best)
		}
		if v, _ := best.Get("max_num_seqs"); !v.Equal(seqs) {
			t.Errorf("from %s: max_num_seqs %s, want %s kept", tc.from, v, seqs)
		}
	}
}

// TestPolishLayouts: a polish started from one 4 x 2 config converges to
// the whole front of synthetic problems whose layouts share the front
// along max_num_seqs (kv_cache_dtype matters only where said), every
// layout's part to the last unit: 8 x 1 at the low latencies and 4 x 2 at
// the high throughputs; and an 8 x 1 window that beats 4 x 2 at one
// max_num_seqs with fp8 only, reached along 8 x 1's own front from its
// low-latency end through configs 4 x 2 dominates (the walk from the front
// alone stops at the first dominated probe: with seed 2 the edge stage's
// random sample misses the window, and a polish that refines the overall
// front's members only, re-split moves included, ends at 53 points and
// 91% of the true hypervolume).
func TestPolishLayouts(t *testing.T) {
	p := multiGPUProblem(t)
	sp := p.Space.Clone() // the layout, max_num_seqs and kv_cache_dtype
	for i := range sp.Params {
		switch prm := &sp.Params[i]; prm.Name {
		case "tensor_parallel_size", "data_parallel_size", "max_num_seqs", "kv_cache_dtype":
		default:
			prm.Tune = false
		}
	}
	p.Space = sp
	prm, _ := sp.Param("max_num_seqs")
	const vram, limit = 800.0, 40.0            // GiB, TPOT bound (ms)
	type shape struct{ perSeq, floor float64 } // throughput per sequence, TPOT at zero load
	for _, tc := range []struct {
		name   string
		shapes map[spaces.Layout]shape
		window int // max_num_seqs where 8 x 1 with fp8 has twice its throughput (0: none)
	}{
		{"crossing", map[spaces.Layout]shape{{TP: 4, DP: 2}: {3, 15}, {TP: 8, DP: 1}: {2, 10}, {TP: 2, DP: 4}: {1, 20}}, 0},
		{"window", map[spaces.Layout]shape{{TP: 4, DP: 2}: {3, 12}, {TP: 8, DP: 1}: {2, 10}}, 41},
	} {
		vecOf := func(l spaces.Layout, s int, fp8 bool) ([]float64, bool) {
			sh, ok := tc.shapes[l]
			if !ok {
				return nil, false
			}
			thr := sh.perSeq * float64(s)
			switch {
			case l == (spaces.Layout{TP: 8, DP: 1}) && fp8 && s == tc.window:
				thr *= 2
			case tc.window > 0 && fp8:
				thr *= 0.99
			}
			return []float64{thr, sh.floor + float64(s)/2, vram}, true
		}
		truth := func(_ context.Context, c spaces.Config) (Truth, error) {
			v, ok := vecOf(spaces.LayoutOf(c), c.Int("max_num_seqs"), c.Str("kv_cache_dtype") == "fp8")
			if !ok {
				return Truth{Failure: trial.FailOOM}, nil
			}
			return Truth{Vec: v, Feasible: v[1] <= limit}, nil
		}
		// The true front: every max_num_seqs of every layout, filtered.
		var all [][]float64
		where := map[string]spaces.Layout{}
		for l := range tc.shapes {
			for s := int(prm.Min); s <= int(prm.Max); s++ {
				for _, fp8 := range []bool{false, true} {
					if v, _ := vecOf(l, s, fp8); v[1] <= limit {
						all = append(all, v)
						where[vecKey(v)] = l
					}
				}
			}
		}
		dirs := p.Objectives.Directions()
		ref := []float64{0, limit + 1, 1000}
		var want [][]float64
		for _, i := range pareto.Front(all, dirs) {
			want = append(want, all[i])
		}
		wantHV, _ := pareto.Hypervolume(want, dirs, ref)

		start, _ := validConfig(sp, sp.DefaultConfig().With("tensor_parallel_size", spaces.IntValue(4)).
			With("data_parallel_size", spaces.IntValue(2)).With("max_num_seqs", spaces.IntValue(16)))
		t0, _ := truth(context.Background(), start)
		m := []frontMember{{cfg: start, vec: t0.Vec}}
		res, err := polish(context.Background(), p, truth, m, m, ref, 60000, 64, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[spaces.Layout]int{}
		for _, v := range vecsOf(res.front) {
			got[where[vecKey(v)]]++
		}
		hv, _ := pareto.Hypervolume(vecsOf(res.front), dirs, ref)
		if !res.converged || math.Abs(hv-wantHV) > 1e-9*wantHV || distinctVecs(vecsOf(res.front)) != distinctVecs(want) {
			t.Errorf("%s: converged %v after %d evaluations: front %d points (configs by layout %v), HV %v; want %d points, HV %v",
				tc.name, res.converged, res.evals, distinctVecs(vecsOf(res.front)), got, hv, distinctVecs(want), wantHV)
		}
	}
}
