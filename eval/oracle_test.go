package eval

import (
	"context"
	"slices"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

// TestTruthScorerPredictsTheTruth: the oracle's prediction of a config is
// its noise-free truth with no spread, P(feasible) 1 exactly where the
// truth is feasible, zeros for a config that fails.
func TestTruthScorerPredictsTheTruth(t *testing.T) {
	p := quickProblem(t)
	ev, err := NewEvaluator(p)
	if err != nil {
		t.Fatal(err)
	}
	gt, err := LoadTruth("testdata", p.Scenario.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	def := p.Space.DefaultConfig()
	cases := []struct {
		name string
		cfg  spaces.Config
		want string // feasible, violates, fails
	}{
		{"front member", gt.Front[0].Config, "feasible"},
		{"vLLM default (TPOT over the bound)", def, "violates"},
		{"KV cache too small", def.With("gpu_memory_utilization", spaces.FloatValue(0.2)), "fails"},
	}
	ctx := context.Background()
	cfgs := make([]spaces.Config, len(cases))
	for i, c := range cases {
		cfgs[i] = c.cfg
	}
	preds, err := truthScorer{ev}.Score(ctx, cfgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := ev.Truth(ctx, c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := "violates"
			switch {
			case tr.Vec == nil:
				got = "fails"
			case tr.Feasible:
				got = "feasible"
			}
			if got != c.want {
				t.Fatalf("the truth %s, want a config that %s", got, c.want)
			}
			q := preds[i]
			want := make([]float64, len(p.Objectives))
			copy(want, tr.Vec)
			if !slices.Equal(q.Mean, want) || !slices.Equal(q.Std, make([]float64, len(want))) {
				t.Fatalf("mean %v std %v, want the truth %v without spread", q.Mean, q.Std, want)
			}
			if (q.PFeasible == 1) != tr.Feasible || (q.PFeasible != 0 && q.PFeasible != 1) {
				t.Fatalf("P(feasible) %v for a truth feasible=%v", q.PFeasible, tr.Feasible)
			}
		})
	}
}

// TestOracleStrategyScreensWithTheTruth: the oracle runs the tuner's
// trials until screening starts and its own from then on (the scorer is
// the only difference).
func TestOracleStrategyScreensWithTheTruth(t *testing.T) {
	p := quickProblem(t)
	ctx := context.Background()
	ids := map[bool][]string{}
	for _, oracle := range []bool{false, true} {
		env := Env{Problem: p, Seed: 3, Trials: 4, TempDir: t.TempDir()}
		trials, _, err := TunerStrategy{Label: "t", Oracle: oracle}.Run(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range trials {
			if tr.Number > 0 {
				ids[oracle] = append(ids[oracle], tr.ConfigID)
			}
		}
	}
	tu, or := ids[false], ids[true]
	if len(tu) != 4 || len(or) != 4 {
		t.Fatalf("%d and %d search trials, want 4 each", len(tu), len(or))
	}
	if tu[0] != or[0] {
		t.Fatalf("first trials %s and %s differ: both run vLLM's default first", tu[0], or[0])
	}
	if slices.Equal(tu, or) {
		t.Fatalf("the oracle ran the tuner's trials %v: its scorer was not used", tu)
	}
}
