package eval

import (
	"encoding/json"
	"math"
	"math/rand/v2"
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
