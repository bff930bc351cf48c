package tuner

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// rounds builds a candidate measured in rounds 1..n with these throughputs.
func rounds(id string, tps ...float64) *Candidate {
	c := &Candidate{ConfigID: id, Runs: tps, Throughput: Robust(tps), Feasible: true, Remeasured: len(tps)}
	for i, x := range tps {
		c.Rounds = append(c.Rounds, RoundRun{Round: i + 1, Throughput: x})
		c.Trials = append(c.Trials, i+1)
	}
	c.Score = c.Throughput.Low(1)
	return c
}

func TestEstimateGain(t *testing.T) {
	tests := []struct {
		name        string
		c, base     *Candidate
		significant bool
		verdict     string
	}{
		// +1% inside run-to-run noise of +-3%.
		{"noise", rounds("a", 1010, 1000, 1005), rounds("d", 1000, 1030, 975), false, "no significant gain"},
		// A drift of 10% between rounds moves both alike: the paired
		// ratios see a steady 5% gain where the medians' spread hides it.
		{"gain under drift", rounds("a", 1050, 1155, 945.5), rounds("d", 1000, 1100, 900), true, "significant gain"},
		{"one round", rounds("a", 1100), rounds("d", 1000), false, "too few paired rounds to tell a gain from noise (re-measure with --repeats 3 or more)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, ok := EstimateGain(tt.c, tt.base)
			if !ok {
				t.Fatal("not ok")
			}
			if g.Significant != tt.significant || g.Verdict() != tt.verdict {
				t.Fatalf("gain %s: significant %v, verdict %q; want %v, %q", g, g.Significant, g.Verdict(), tt.significant, tt.verdict)
			}
			if g.Level > 0 && (g.LowPct > g.Pct || g.HighPct < g.Pct) {
				t.Fatalf("interval %+v does not hold the gain", g)
			}
		})
	}
	if _, ok := EstimateGain(rounds("a", 1), &Candidate{}); ok {
		t.Fatal("gain over an unmeasured default")
	}
	// Unpaired runs (no rounds): a figure, no interval, never significant.
	g, _ := EstimateGain(&Candidate{Throughput: Robust([]float64{1200, 1210})}, &Candidate{Throughput: Robust([]float64{1000, 1001})})
	if g.Level != 0 || g.Significant || math.Abs(g.Pct-20.45) > 0.1 {
		t.Fatalf("unpaired: %+v", g)
	}
}

// TestEstimateGainsFalsePositives: with no real difference, three
// configs re-measured in 3 rounds against the default on a host whose
// speed drifts by 10% between rounds and 2% within, at most GainLevel's
// share of studies reports a significant gain for the best-looking one
// (the pick is the best of three: without the split level it would be
// near three times that), and a real 8% gain is found in most.
func TestEstimateGainsFalsePositives(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	study := func(gain float64) bool {
		drift := make([]float64, 3)
		for i := range drift {
			drift[i] = math.Exp(0.1 * r.NormFloat64())
		}
		run := func(round int, g float64) float64 { return 1000 * g * drift[round] * math.Exp(0.02*r.NormFloat64()) }
		mk := func(id string, g float64) *Candidate {
			var tps []float64
			for k := range 3 {
				tps = append(tps, run(k, g))
			}
			return rounds(id, tps...)
		}
		base := mk("d", 1)
		cs := []*Candidate{mk("a", gain), mk("b", 1), mk("c", 1)}
		gs, _ := EstimateGains(cs, base)
		best := slices.MaxFunc(gs, func(a, b GainEstimate) int { return cmp.Compare(a.Pct, b.Pct) })
		return best.Significant
	}
	const n = 2000
	false_, found := 0, 0
	for range n {
		if study(1) {
			false_++
		}
		if study(1.08) {
			found++
		}
	}
	if rate := float64(false_) / n; rate > (1-GainLevel)/2+0.01 {
		t.Errorf("false gains in %.3f of studies, want at most %.3f", rate, (1-GainLevel)/2)
	}
	if rate := float64(found) / n; rate < 0.5 {
		t.Errorf("a real 8%% gain found in %.3f of studies", rate)
	}
}

// TestRoundOrder: every round runs each config once, the order is the
// same for the same study and round, and it varies between rounds.
func TestRoundOrder(t *testing.T) {
	ids := []string{"d", "a", "b", "c"}
	seen := map[string]bool{}
	for r := 1; r <= 8; r++ {
		o := roundOrder("s1", r, ids)
		if !slices.Equal(o, roundOrder("s1", r, slices.Clone(ids))) {
			t.Fatal("order not reproducible")
		}
		sorted := slices.Sorted(slices.Values(o))
		if !slices.Equal(sorted, []string{"a", "b", "c", "d"}) {
			t.Fatalf("round %d order %v", r, o)
		}
		seen[o[0]] = true
	}
	if len(seen) < 2 {
		t.Fatalf("the same config first in all 8 rounds: %v", seen)
	}
}
