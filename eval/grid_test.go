package eval

import (
	"context"
	"math"
	"reflect"
	"slices"
	"testing"

	"gonum.org/v1/gonum/floats"

	"github.com/vllm-tuner/tuner/spaces"
)

func TestCoarseToFine(t *testing.T) {
	for n := 1; n <= 40; n++ {
		o := coarseToFine(n)
		s := slices.Clone(o)
		slices.Sort(s)
		for i := range n {
			if s[i] != i {
				t.Fatalf("n=%d: order %v is not a permutation", n, o)
			}
		}
		if n >= 2 && (o[0] != 0 || o[1] != n-1) {
			t.Fatalf("n=%d: order %v does not start with both ends", n, o)
		}
	}
	if got := coarseToFine(5); !slices.Equal(got, []int{0, 4, 2, 1, 3}) {
		t.Fatalf("coarseToFine(5) = %v", got)
	}
}

func TestGridStrategy(t *testing.T) {
	p := quickProblem(t)
	env := Env{Problem: p, Seed: 1, Trials: 14, TempDir: t.TempDir()}
	trials, belief, err := GridStrategy{}.Run(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	if len(trials) != env.Trials {
		t.Fatalf("%d trials, want %d", len(trials), env.Trials)
	}
	def := p.Space.DefaultConfig()
	probing := true
	var util float64
	seqs, toks := map[int]bool{}, map[int]bool{}
	for i, tr := range trials {
		if tr.Number != i+1 || tr.Phase != PhaseSearch {
			t.Fatalf("trial %d numbered %d (%s)", i, tr.Number, tr.Phase)
		}
		c := tr.Config
		for _, name := range c.Names() {
			if name == "max_num_seqs" || name == "max_num_batched_tokens" || name == "gpu_memory_utilization" {
				continue
			}
			if v, _ := c.Get(name); !v.Equal(mustGet(def, name)) {
				t.Fatalf("trial %d changes %s from the default", i+1, name)
			}
		}
		if probing {
			if c.Int("max_num_seqs") != gridSeqs[len(gridSeqs)-1] || c.Int("max_num_batched_tokens") != gridTokens[len(gridTokens)-1] {
				t.Fatalf("probe %d is not the largest grid point: %s", i+1, c)
			}
			if want := 0.98 - 0.01*float64(i); math.Abs(c.Float("gpu_memory_utilization")-want) > 1e-9 {
				t.Fatalf("probe %d at utilisation %v, want %v", i+1, c.Float("gpu_memory_utilization"), want)
			}
			if tr.Status != "failed" {
				probing, util = false, c.Float("gpu_memory_utilization")
			}
			continue
		}
		if c.Float("gpu_memory_utilization") != util {
			t.Fatalf("grid trial %d at utilisation %v, probe found %v", i+1, c.Float("gpu_memory_utilization"), util)
		}
		seqs[c.Int("max_num_seqs")], toks[c.Int("max_num_batched_tokens")] = true, true
	}
	if probing {
		t.Fatal("no probe started")
	}
	if !seqs[gridSeqs[0]] || !toks[gridTokens[0]] {
		t.Errorf("a grid prefix should reach the low ends: seqs %v tokens %v", seqs, toks)
	}
	if belief.ConfigID == "" {
		t.Error("grid picked nothing")
	}
}

func mustGet(c spaces.Config, name string) spaces.Value { v, _ := c.Get(name); return v }

// TestNoiseFreeMeasuresTheTruth: with Env.NoiseFree every trial measures
// its config's noise-free objectives exactly (what --noise-free reports);
// with noise on the same trials do not.
func TestNoiseFreeMeasuresTheTruth(t *testing.T) {
	p := quickProblem(t)
	ev, err := NewEvaluator(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, free := range []bool{true, false} {
		env := Env{Problem: p, Seed: 1, Trials: 6, TempDir: t.TempDir(), NoiseFree: free}
		trials, _, err := GridStrategy{}.Run(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		exact, measured := 0, 0
		for _, tr := range trials {
			if tr.Measured == nil {
				continue
			}
			measured++
			truth, err := ev.Truth(ctx, tr.Config)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(tr.Measured, truth.Vec) && tr.MeasuredFeasible == truth.Feasible {
				exact++
			}
		}
		if measured == 0 {
			t.Fatalf("noise-free %v: no trial measured", free)
		}
		if free && exact != measured {
			t.Fatalf("noise-free: %d of %d trials measured their truth", exact, measured)
		}
		if !free && exact != 0 {
			t.Fatalf("noise on: %d of %d trials measured exactly their truth", exact, measured)
		}
	}
}

// TestOnStreams: a config is judged on DefaultStreams request streams other
// than the scenario's, each its own (the throughputs differ from each other
// and from the scenario's stream), the same on every call; vLLM's default
// config, whose TPOT misses the 8B H100 chat SLO by a tenth, misses it on
// each.
func TestOnStreams(t *testing.T) {
	p := quickProblem(t)
	gt, err := LoadTruth("testdata", p.Scenario.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	best, ok := gt.Best()
	if !ok || best.Vec[0] != gt.BestThroughput {
		t.Fatalf("Best() = %v (ok %v), truth's best throughput %v", best.Vec, ok, gt.BestThroughput)
	}
	ev, err := NewEvaluator(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := ev.OnStreams(ctx, best.Config, DefaultStreams)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != DefaultStreams {
		t.Fatalf("%d streams, want %d", len(got), DefaultStreams)
	}
	distinct := map[float64]bool{}
	for i, tr := range got {
		if tr.Vec == nil || tr.Vec[0] == best.Vec[0] {
			t.Fatalf("stream %d: %+v (the scenario's own stream: %v)", i+1, tr, best.Vec)
		}
		distinct[tr.Vec[0]] = true
	}
	if len(distinct) != DefaultStreams {
		t.Errorf("throughputs %v: the streams are not re-drawn", got)
	}
	again, err := ev.OnStreams(ctx, best.Config, DefaultStreams)
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Errorf("second call %v (%v), first %v", again, err, got)
	}
	def, err := ev.OnStreams(ctx, p.Space.DefaultConfig(), DefaultStreams)
	if err != nil {
		t.Fatal(err)
	}
	if tr, _ := ev.Truth(ctx, p.Space.DefaultConfig()); tr.Feasible || slices.ContainsFunc(def, func(tr Truth) bool { return tr.Feasible || tr.Vec == nil }) {
		t.Errorf("default config (feasible on the scenario's stream: %v): %+v on the other streams, want served, SLO missed", tr.Feasible, def)
	}
}

// TestRunOnStreams: a run that tried the truth's front configs, its best
// first, and picked that best: its HV ratio on the other streams is what
// its first HVStreamTrials trials hold there (no more, on every stream,
// than the whole front) over the whole front's; its pick scores the
// throughput ratio 1 and the best's SLO count. A run of no trials and no
// pick holds nothing.
func TestRunOnStreams(t *testing.T) {
	p := quickProblem(t)
	gt, err := LoadTruth("testdata", p.Scenario.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := NewEvaluator(p)
	if err != nil {
		t.Fatal(err)
	}
	st := &scenarioState{prob: p, ev: ev, truth: gt}
	best, _ := gt.Best()
	run := func(cfgs []spaces.Config) *Run {
		r := &Run{Belief: Belief{ConfigID: best.Config.ID()}}
		for i, c := range cfgs {
			r.Trials = append(r.Trials, Trial{Number: i + 1, Phase: PhaseSearch, ConfigID: c.ID(), Config: c})
		}
		return r
	}
	all := gt.FrontConfigs()
	if len(all) < HVStreamTrials+2 {
		t.Fatalf("front of %d configs: too few for the test", len(all))
	}
	ctx := context.Background()
	// The whole front as one long run: the HV counts its first HVStreamTrials.
	first := slices.Insert(slices.DeleteFunc(slices.Clone(all), func(c spaces.Config) bool { return c.ID() == best.Config.ID() }), 0, best.Config)
	f, err := onStreams(ctx, st, run(first), DefaultStreams)
	if err != nil {
		t.Fatal(err)
	}
	part, err := st.hvOnStreams(ctx, first[:HVStreamTrials], DefaultStreams)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := st.truthOnStreams(ctx, DefaultStreams)
	if err != nil {
		t.Fatal(err)
	}
	if want := floats.Sum(part) / floats.Sum(whole); math.Abs(f.HVRatio-want) > 1e-12 || !f.Pick || f.Ratio != 1 || f.Met != f.BestMet {
		t.Errorf("front as a run: %+v, want HV ratio %v, throughput ratio 1, SLO met as often as the best", f, want)
	}
	for k := range whole {
		if part[k] > whole[k]*(1+1e-12) {
			t.Errorf("stream %d: %d of the front's configs hold %v, all of them %v", k+1, HVStreamTrials, part[k], whole[k])
		}
	}
	none, err := onStreams(ctx, st, &Run{}, DefaultStreams)
	if err != nil || none.HVRatio != 0 || none.Pick {
		t.Errorf("empty run: %+v (%v)", none, err)
	}
}
