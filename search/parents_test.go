package search

import "testing"

// TestParentsAreThisContextsFront: mutation parents come from this
// context's feasible front only; another context's front (a warm start's
// history) is not mutated, even while this one is empty.
func TestParentsAreThisContextsFront(t *testing.T) {
	s := h100(t)
	a100 := testTarget(t, "Llama-3.1-8B", "A100-80GB", 1)
	hist := randomHistory(t, s, 20, 3, synth)
	other := make([]Observation, len(hist))
	for i, o := range hist {
		o.Weight, o.Target = 0.5, &a100
		other[i] = o
	}
	for _, tc := range []struct {
		name string
		hist []Observation
		want bool // any parents
	}{
		{"other context only", other, false},
		{"own context", hist, true},
		{"both", append(append([]Observation(nil), hist[:3]...), other...), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultProposerConfig()
			cfg.Space, cfg.Seed, cfg.History = s, 1, tc.hist
			p := newProposer(t, cfg)
			got := p.parents()
			if (len(got) > 0) != tc.want {
				t.Fatalf("%d parents, want some: %v", len(got), tc.want)
			}
			if len(got) > len(p.front) {
				t.Fatalf("%d parents from a front of %d members of this context", len(got), len(p.front))
			}
		})
	}
}
