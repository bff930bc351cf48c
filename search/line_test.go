package search

import (
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// Throughput rises as max_num_seqs falls until a TTFT bound (clients wait
// for a slot) and drops past it: the pick sits well above the bound and no
// infeasible trial measured better, so only the pick line search refines it. It walks down
// along max_num_seqs, keeping the pick's levels and other values, and gets
// within a few sequences of the bound without a repeat.
func TestLineSearchTowardBound(t *testing.T) {
	sp := h100(t)
	slo, err := trial.ParseSLO("ttft_p99<=1000ms")
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(seqs, tokens int) spaces.Config {
		c, err := sp.Normalize(spaces.NewConfig(map[string]spaces.Value{
			"max_num_seqs":           spaces.IntValue(seqs),
			"max_num_batched_tokens": spaces.IntValue(tokens),
			"kv_cache_dtype":         spaces.StringValue("fp8"),
		}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const bound = 150
	result := func(c spaces.Config) *trial.Result {
		seqs := float64(c.Int("max_num_seqs"))
		ttft, thr := 600.0, 3000-4*seqs // fewer sequences, shorter measured waves
		if seqs < bound {               // past the bound: clients queue, the measured window shrinks
			ttft, thr = 1000+(bound-seqs)*40, 0.6*thr
		}
		m := trial.Metrics{Completed: 100, OutputThroughput: thr,
			TTFT: trial.Dist{P99: ttft}, TPOT: trial.Dist{P99: 20}, ITL: trial.Dist{P99: 20}, E2EL: trial.Dist{P99: ttft + 4000}}
		return &trial.Result{Status: trial.StatusOK, Levels: []trial.Level{{Metrics: m}}, PeakVRAMGiB: 60}
	}
	pc := DefaultProposerConfig()
	pc.Space, pc.SLO, pc.Objectives = sp, slo, store.DefaultObjectives("tpot_p99")
	for _, c := range []spaces.Config{cfg(200, 4096), cfg(240, 2048), cfg(180, 8192), cfg(60, 4096), cfg(300, 4096)} {
		pc.History = append(pc.History, Observation{Config: c, Result: result(c)})
	}
	p := newProposer(t, pc)
	if c, ok := p.bisect(p.scalariser()); ok {
		t.Fatalf("bisect moved (%v): the test needs a pick no boundary bisection refines", c)
	}
	pick, steps := cfg(180, 8192), 0
	for ; steps < 12; steps++ {
		c, ok := p.lineSearch()
		if !ok {
			break
		}
		var moved []string
		for _, prm := range sp.Params {
			a, _ := c.Get(prm.Name)
			b, _ := pick.Get(prm.Name)
			if a != b {
				moved = append(moved, prm.Name)
			}
		}
		if len(moved) != 1 {
			t.Fatalf("step %d: %v moved off the pick %v, want one numeric parameter", steps, moved, pick)
		}
		if moved[0] != "max_num_seqs" {
			break // the pick is at the bound in max_num_seqs: the next axis
		}
		if c.Int("max_num_seqs") >= pick.Int("max_num_seqs") {
			t.Fatalf("step %d: max_num_seqs %d, want below the pick's %d", steps, c.Int("max_num_seqs"), pick.Int("max_num_seqs"))
		}
		p.Tell(c, result(c))
		if c.Int("max_num_seqs") >= bound {
			pick = c
		}
	}
	if pick := pick.Int("max_num_seqs"); pick > bound+3 || steps > 10 {
		t.Errorf("pick at max_num_seqs %d after %d line steps; the bound is at %d", pick, steps, bound)
	}
}

// No line step without three feasible trials or without an axis whose value
// says which way the pick objective improves; the step's direction follows
// the objective's.
func TestLineSearchDirection(t *testing.T) {
	sp := h100(t)
	run := func(seqs int, thr float64) Observation {
		c, err := sp.Normalize(spaces.NewConfig(map[string]spaces.Value{"max_num_seqs": spaces.IntValue(seqs)}))
		if err != nil {
			t.Fatal(err)
		}
		m := trial.Metrics{Completed: 100, OutputThroughput: thr, TTFT: trial.Dist{P99: 100}, TPOT: trial.Dist{P99: 20}, ITL: trial.Dist{P99: 20}, E2EL: trial.Dist{P99: 3000}}
		return Observation{Config: c, Result: &trial.Result{Status: trial.StatusOK, Levels: []trial.Level{{Metrics: m}}, PeakVRAMGiB: 60}}
	}
	rising := []Observation{run(64, 1000), run(128, 2000), run(256, 3000)}
	for _, tc := range []struct {
		name string
		hist []Observation
		dir  pareto.Direction
		want int // sign of the step in max_num_seqs; 0: none
	}{
		{"rising, maximised", rising, pareto.Maximize, 1},
		{"rising, minimised", rising, pareto.Minimize, -1},
		{"two feasible trials", rising[:2], pareto.Maximize, 0},
		{"flat", []Observation{run(64, 2000), run(128, 2000), run(256, 2000)}, pareto.Maximize, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := DefaultProposerConfig()
			pc.Space, pc.History = sp, tc.hist
			pc.Objectives = pareto.Objectives{{Name: "output_throughput", Direction: tc.dir}, {Name: "tpot_p99", Direction: pareto.Minimize}}
			p := newProposer(t, pc)
			c, ok := p.lineSearch()
			if tc.want == 0 {
				if ok {
					t.Errorf("line step %v, want none", c)
				}
				return
			}
			if !ok {
				t.Fatal("no line step")
			}
			from := 256
			if tc.want < 0 {
				from = 64
			}
			if d := c.Int("max_num_seqs") - from; d*tc.want <= 0 {
				t.Errorf("max_num_seqs %d from the pick's %d, want a step of sign %d", c.Int("max_num_seqs"), from, tc.want)
			}
		})
	}
}

// A line search along an axis ends where a step passed the peak or gained
// less than minLineGain; a step past a bound (infeasible, so not among the
// feasible trials) or a trial that moved other axes too does not end it.
func TestLineDone(t *testing.T) {
	pick := []float64{0.5, 0.5}
	for _, tc := range []struct {
		name string
		x    []float64 // the other feasible trial
		y    float64   // its value; the pick's is 100
		want bool
	}{
		{"no neighbour", []float64{0.6, 0.4}, 90, false},
		{"ahead, worse: peak passed", []float64{0.48, 0.5}, 95, true},
		{"behind, 5% worse: still climbing", []float64{0.52, 0.5}, 95, false},
		{"behind, 0.5% worse: flat", []float64{0.52, 0.5}, 99.5, true},
		{"other axis, 5% worse", []float64{0.5, 0.48}, 95, false},
		{"other axis, 0.5% worse: a noise-level pick", []float64{0.5, 0.48}, 99.5, true},
		{"two axes moved, 0.5% worse", []float64{0.52, 0.48}, 99.5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			xs, ys := [][]float64{pick, tc.x}, []float64{100, tc.y}
			if got := lineDone(xs, ys, 0, 0, -1); got != tc.want {
				t.Errorf("lineDone = %v, want %v", got, tc.want)
			}
		})
	}
}

// Line steps start once the study has twice LateAfter trials and take every
// LateLineEvery-th ask; never with LateAfter or LateLineEvery negative.
func TestLineDue(t *testing.T) {
	sp := h100(t)
	for _, tc := range []struct {
		name                 string
		trials, ask          int
		lateAfter, lineEvery int
		want                 bool
	}{
		{"before 2 x LateAfter", 15, 17, 8, 2, false},
		{"at 2 x LateAfter, its ask", 16, 17, 8, 2, true},
		{"at 2 x LateAfter, a bisection's ask", 16, 18, 8, 2, false},
		{"every 4th", 20, 21, 8, 4, true},
		{"every 4th, not this one", 20, 23, 8, 4, false},
		{"every ask", 16, 18, 8, 1, true},
		{"never late", 30, 31, -1, 2, false},
		{"no line steps", 30, 31, 8, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := DefaultProposerConfig()
			pc.Space, pc.LateAfter, pc.LateLineEvery = sp, tc.lateAfter, tc.lineEvery
			for range tc.trials {
				c := sp.DefaultConfig()
				pc.History = append(pc.History, Observation{Config: c, Result: synth(c)})
			}
			p := newProposer(t, pc)
			p.asks = tc.ask
			if got := p.lineDue(); got != tc.want {
				t.Errorf("lineDue after %d trials at ask %d = %v, want %v", tc.trials, tc.ask, got, tc.want)
			}
		})
	}
}
