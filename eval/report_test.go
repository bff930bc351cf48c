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
