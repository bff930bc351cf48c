package search

import (
	"math"
	"testing"
)

// Once a study has LateAfter trials of its own, mutations mix fine and
// coarse steps (lateSteps) where the opening's are all 0.1: a spike of
// hypervolume a few percent wide at an SLO bound needs the fine ones.
func TestLateMutationSteps(t *testing.T) {
	sp := h100(t)
	// shares returns the fractions of numeric coordinates a mutation moved
	// by more than 0.25 and by less than 0.04 (unit cube), from the centre.
	shares := func(p *Proposer) (coarse, fine float64) {
		x := make([]float64, len(p.dims))
		for i := range x {
			x[i] = 0.5
		}
		moved := 0
		for range 3000 {
			m := p.mutate(x)
			for _, d := range p.dims {
				if d.levels != nil {
					continue
				}
				dx := math.Abs(d.unit(m[d.p.Name]) - d.unit(d.fromUnit(0.5)))
				if dx == 0 {
					continue // not mutated (or rounded back)
				}
				moved++
				if dx > 0.25 {
					coarse++
				}
				if dx < 0.04 {
					fine++
				}
			}
		}
		if moved == 0 {
			t.Fatal("no numeric coordinate moved")
		}
		return coarse / float64(moved), fine / float64(moved)
	}
	pc := DefaultProposerConfig()
	pc.Space = sp
	for range pc.LateAfter - 1 {
		pc.History = append(pc.History, Observation{Config: sp.DefaultConfig(), Result: synth(sp.DefaultConfig())})
	}
	early := newProposer(t, pc)
	if early.late() {
		t.Fatalf("late after %d trials, LateAfter %d", len(pc.History), pc.LateAfter)
	}
	pc.History = append(pc.History, Observation{Config: sp.DefaultConfig(), Result: synth(sp.DefaultConfig())})
	late := newProposer(t, pc)
	if !late.late() {
		t.Fatalf("not late after %d trials, LateAfter %d", len(pc.History), pc.LateAfter)
	}
	ec, ef := shares(early)
	lc, lf := shares(late)
	// Steps of N(0, 0.1): 1% beyond 0.25, 31% within 0.04; an even mix of
	// 0.02, 0.1 and 0.3: 14% and 46%.
	if ec > 0.04 || lc < 0.08 {
		t.Errorf("share of coarse steps: %.3f early (want <= 0.04), %.3f late (want >= 0.08)", ec, lc)
	}
	if lf < ef+0.08 {
		t.Errorf("share of fine steps: %.3f early, %.3f late (want at least 0.08 more)", ef, lf)
	}

	// The acquisition is less cautious once late.
	if k, kl := early.feasibilityExponent(), late.feasibilityExponent(); k != 3 || kl != 2 {
		t.Errorf("feasibility exponent %v early, %v late (want 3 and 2)", k, kl)
	}

	// Never late when LateAfter is negative; LateBisectEvery < 0 keeps
	// BisectEvery, LateFeasibilityExponent < 0 FeasibilityExponent.
	pc.LateAfter, pc.LateBisectEvery = -1, -1
	never := newProposer(t, pc)
	if never.late() || never.cfg.LateBisectEvery != never.cfg.BisectEvery {
		t.Errorf("LateAfter -1: late %v, late bisection every %d (bisection every %d)", never.late(), never.cfg.LateBisectEvery, never.cfg.BisectEvery)
	}
	for _, tc := range []struct{ k, late, want float64 }{
		{3, -1, 3}, // negative: FeasibilityExponent throughout
		{-1, 0, 1}, // k = 1 set, late unset: never more cautious late
		{4, 0, 2},
		{4, 3, 3},
	} {
		pc.LateAfter, pc.FeasibilityExponent, pc.LateFeasibilityExponent = 0, tc.k, tc.late
		p := newProposer(t, pc)
		if got := p.feasibilityExponent(); !p.late() || got != tc.want {
			t.Errorf("FeasibilityExponent %v, LateFeasibilityExponent %v: late %v, exponent %v (want %v)", tc.k, tc.late, p.late(), got, tc.want)
		}
	}
}
