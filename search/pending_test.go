package search

import (
	"context"
	"testing"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
)

// With a config in flight on another worker, screening measures gains
// against a front that includes what the scorer expects of it: the next ask
// is a config the in-flight one is not expected to dominate, where the
// acquisition alone picked one it dominates on seeds 1 and 5. Each seed's history is ten
// sequential trials of synth screened by its oracle.
func TestPendingBelievedInScreening(t *testing.T) {
	sp := h100(t)
	objs := store.DefaultObjectives("")
	ctx := context.Background()
	for _, seed := range []uint64{1, 2, 5} {
		pc := ProposerConfig{Space: sp, Seed: seed, Scorer: oracle{objs}}
		hist := newProposer(t, pc)
		runProposer(t, hist, 10, nil)
		pc.History = hist.History()

		alone, err := newProposer(t, pc).Ask(ctx) // what one worker would run next
		if err != nil {
			t.Fatal(err)
		}
		p := newProposer(t, pc)
		p.SetPending([]spaces.Config{alone})
		next, err := p.Ask(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if next.ID() == alone.ID() {
			t.Fatalf("seed %d: proposed %s, pending on another worker", seed, alone.ID())
		}
		// The oracle is exact and certain: the believed front is the
		// measured front plus the pending config's true outcome.
		var front [][]float64
		for _, o := range append(pc.History, Observation{Config: alone, Result: synth(alone), Weight: 1}) {
			if e := evaluate(o, objs, nil); e.feasible {
				front = append(front, e.vals)
			}
		}
		e := evaluate(Observation{Config: next, Result: synth(next)}, objs, nil)
		if !e.feasible {
			t.Fatalf("seed %d: next ask %s fails in synth", seed, next.ID())
		}
		if add, _ := pareto.Insert(front, e.vals, objs.Directions()); !add {
			t.Errorf("seed %d: next ask %s (%v) is dominated by the front with %s in flight (%v): it adds nothing once that one ends",
				seed, next.ID(), e.vals, alone.ID(), front[len(front)-1])
		}
	}
}

// The late phase counts the configs in flight on other workers as trials
// spent: four workers that have claimed LateAfter trials refine as one
// worker would after as many; with nothing in flight only the study's own
// observations count.
func TestLateCountsConfigsInFlight(t *testing.T) {
	sp := h100(t)
	p := newProposer(t, ProposerConfig{Space: sp, Seed: 3, LateAfter: 8})
	claimed := runProposer(t, p, 6, nil)
	other := newProposer(t, ProposerConfig{Space: sp, Seed: 9})
	var inFlight []spaces.Config
	for range 3 {
		c, err := other.Ask(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		inFlight = append(inFlight, c)
	}
	for _, tc := range []struct {
		name    string
		pending []spaces.Config
		want    bool
	}{
		{"nothing in flight", nil, false},
		{"one in flight, 7 spent", inFlight[1:2], false},
		{"two in flight, 8 spent", inFlight[1:], true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.SetPending(tc.pending)
			if got := p.late(); got != tc.want {
				t.Errorf("late() = %v with %d own trials and %d in flight, want %v", got, len(claimed), len(tc.pending), tc.want)
			}
		})
	}
}
