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
		if _, ok := s.(ParallelStrategy); !ok {
			continue
		}
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

// TestScreenStrategy: tuner-sh runs the asked number of search trials (a
// screened-out config is one), each paid for in GPU time; a screened-out
// one is a failed trial of class screened_out, never the belief's pick.
func TestScreenStrategy(t *testing.T) {
	p := quickProblem(t)
	s := strategyByName(StratScreen)
	env := Env{Problem: p, Seed: 3, Trials: 10, TempDir: t.TempDir()}
	trials, b, err := s.Run(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, tr := range trials {
		if tr.Phase != PhaseSearch {
			continue
		}
		if n++; tr.Number != n || tr.GPUSeconds <= 0 {
			t.Fatalf("search trial %d: numbered %d, %.1f GPU s", n, tr.Number, tr.GPUSeconds)
		}
		if tr.ScreenedOut && (tr.Status != "failed" || tr.Measured != nil || tr.ConfigID == b.ConfigID) {
			t.Fatalf("screened-out trial %d: status %s, measured %v, picked %v", n, tr.Status, tr.Measured, tr.ConfigID == b.ConfigID)
		}
	}
	if n != env.Trials {
		t.Fatalf("%d search trials, want %d", n, env.Trials)
	}
}
