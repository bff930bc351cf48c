package eval

import (
	"context"
	"testing"
)

// TestParallelStrategy: four simulated workers run the asked number of
// trials, numbered in claim order, never the same config twice, vLLM's
// default first; par1 is the same proposer one trial at a time.
func TestParallelStrategy(t *testing.T) {
	p := quickProblem(t)
	for _, s := range ExtraStrategies() {
		t.Run(s.Name(), func(t *testing.T) {
			env := Env{Problem: p, Seed: 3, Trials: 10, TempDir: t.TempDir()}
			trials, _, err := s.Run(context.Background(), env)
			if err != nil {
				t.Fatal(err)
			}
			if len(trials) != env.Trials {
				t.Fatalf("%d trials, want %d", len(trials), env.Trials)
			}
			seen := map[string]bool{}
			for i, tr := range trials {
				if tr.Number != i+1 || tr.Phase != PhaseSearch {
					t.Fatalf("trial %d numbered %d (%s)", i, tr.Number, tr.Phase)
				}
				if seen[tr.ConfigID] {
					t.Fatalf("config %s run twice", tr.ConfigID)
				}
				seen[tr.ConfigID] = true
			}
			if trials[0].ConfigID != p.Space.DefaultConfig().ID() {
				t.Errorf("first trial %s is not vLLM's default", trials[0].ConfigID)
			}
		})
	}
}
