package eval

import (
	"strings"
	"testing"
)

// TestPruneGoal: the pruning goal is per scenario; on one GPU it asks the
// volume removed and the front kept (configs and hypervolume), on more only
// the front kept.
func TestPruneGoal(t *testing.T) {
	q := func(m float64) Quantiles { return Quantiles{Median: m, Q1: m, Q3: m, N: 5} }
	for _, tc := range []struct {
		name                 string
		gpus                 int
		removed, kept, hvKep float64
		met                  bool
	}{
		{"one GPU, all met", 1, 0.45, 1, 1, true},
		{"one GPU, too little removed", 1, 0.30, 1, 1, false},
		{"one GPU, configs lost", 1, 0.60, 0.95, 1, false},
		{"one GPU, hypervolume lost", 1, 0.60, 1, 0.97, false},
		{"four GPUs, nothing removed", 4, 0, 1, 1, true},
		{"four GPUs, configs lost", 4, 0.6, 0.97, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{
				Scenarios: []ScenarioReport{{Name: "s", GPUs: tc.gpus}},
				Pruning: []PruneQuality{{Scenario: "s", History: "tuner's first 24 trials", VolumeRemoved: q(tc.removed), FrontKept: q(tc.kept), HVKept: q(tc.hvKep)},
					{Scenario: "s", History: "other's 24 trials (weight 0.5)", VolumeRemoved: q(0), FrontKept: q(0), HVKept: q(0)}},
			}
			var got []Goal
			for _, g := range goals(Config{Trials: 24}, r) {
				if strings.Contains(g.Goal, "pruning") {
					got = append(got, g)
				}
			}
			if len(got) != 1 {
				t.Fatalf("%d pruning goals, want 1 (the tuner's own history): %+v", len(got), got)
			}
			if got[0].Met != tc.met || strings.Contains(got[0].Goal, "removes") != (tc.gpus == 1) {
				t.Fatalf("goal %q met %v (%s), want met %v", got[0].Goal, got[0].Met, got[0].Value, tc.met)
			}
		})
	}
}

// TestSearchGoals: the tuner's HV at 8 and 24 trials, its recommendation
// against the true best, and four workers against one are judged per
// scenario against their thresholds (issue 28).
func TestSearchGoals(t *testing.T) {
	q := func(m float64) Quantiles { return Quantiles{Median: m, Q1: m, Q3: m, N: 10} }
	curve := func(at8, at24 float64) []float64 {
		c := make([]float64, 24)
		for i := range c {
			c[i] = at8
			if i >= 23 {
				c[i] = at24
			}
		}
		return c
	}
	for _, tc := range []struct {
		name             string
		hv8, hv24, pick  float64
		par1, par4       float64
		want             map[string]bool // goal text prefix -> met
		wantValueContain string
	}{
		{"all met", 0.75, 0.92, 0.995, 0.90, 0.88,
			map[string]bool{"tuner median HV ratio >= 0.90 within 24": true, "tuner median HV ratio >= 0.70 within 8": true,
				"recommended config >= 0.99": true, "4 workers' median HV ratio >= 0.95x": true}, "0.880 / 0.900 = 0.978"},
		{"none met", 0.69, 0.89, 0.98, 0.90, 0.85,
			map[string]bool{"tuner median HV ratio >= 0.90 within 24": false, "tuner median HV ratio >= 0.70 within 8": false,
				"recommended config >= 0.99": false, "4 workers' median HV ratio >= 0.95x": false}, "0.850 / 0.900 = 0.944"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{
				Scenarios: []ScenarioReport{{Name: "s", GPUs: 1}},
				Summaries: []Summary{
					{Scenario: "s", Strategy: StratTuner, Curve: curve(tc.hv8, tc.hv24), PickBestRatio: q(tc.pick)},
					{Scenario: "s", Strategy: StratPar1, Curve: curve(0, tc.par1)},
					{Scenario: "s", Strategy: StratPar4, Curve: curve(0, tc.par4)},
				},
			}
			gs := goals(Config{Trials: 24}, r)
			for prefix, met := range tc.want {
				var found *Goal
				for i := range gs {
					if strings.HasPrefix(gs[i].Goal, prefix) {
						found = &gs[i]
					}
				}
				if found == nil {
					t.Fatalf("no goal %q in %+v", prefix, gs)
				}
				if found.Met != met {
					t.Errorf("%q (%s): met %v, want %v", found.Goal, found.Value, found.Met, met)
				}
				if strings.HasPrefix(prefix, "4 workers") && found.Value != tc.wantValueContain {
					t.Errorf("parallel goal value %q, want %q", found.Value, tc.wantValueContain)
				}
			}
		})
	}
}

// TestGridGoal: the tuner's best feasible throughput against the grid's;
// where neither found a feasible config there is no gain to claim.
func TestGridGoal(t *testing.T) {
	for _, tc := range []struct {
		tuner, grid float64
		met         bool
		value       string
	}{
		{1200, 1000, true, "1200 vs 1000 tok/s (1.20x)"},
		{1100, 1000, false, "1100 vs 1000 tok/s (1.10x)"},
		{500, 0, true, "500 vs 0 tok/s (+Infx)"},
		{0, 0, false, "0 vs 0 tok/s (0.00x)"},
	} {
		best := func(v float64) map[string]Quantiles { return map[string]Quantiles{ck(24): {Median: v, N: 10}} }
		r := &Report{
			Scenarios: []ScenarioReport{{Name: "s", GPUs: 1}},
			Summaries: []Summary{
				{Scenario: "s", Strategy: StratTuner, Curve: make([]float64, 24), BestAt: best(tc.tuner)},
				{Scenario: "s", Strategy: StratGrid, Curve: make([]float64, 24), BestAt: best(tc.grid)},
			},
		}
		var g *Goal
		for _, x := range goals(Config{Trials: 24}, r) {
			if strings.HasPrefix(x.Goal, "best feasible throughput >= 1.2x grid") {
				g = &x
			}
		}
		if g == nil {
			t.Fatalf("%v vs %v: no grid goal", tc.tuner, tc.grid)
		}
		if head, _, _ := strings.Cut(g.Value, ";"); g.Met != tc.met || head != tc.value {
			t.Errorf("%v vs %v: met %v %q, want %v %q", tc.tuner, tc.grid, g.Met, head, tc.met, tc.value)
		}
	}
}
