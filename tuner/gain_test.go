package tuner

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// rounds builds a candidate measured in rounds 1..n with these throughputs,
// every run of round r at the moment r (as if the configs of a round ran
// at once: the drift fit is then the two-way round-by-config analysis).
func rounds(id string, tps ...float64) *Candidate {
	c := &Candidate{ConfigID: id, Runs: tps, Throughput: Robust(tps), Feasible: true, Remeasured: len(tps)}
	for i, x := range tps {
		c.Rounds = append(c.Rounds, RoundRun{Round: i + 1, At: float64(i + 1), Throughput: x})
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
// configs re-measured in 3 rounds against the default, in the plan's
// order, on a host whose speed drifts run by run (a random walk with a
// trend, 1% a run, as large as the runs' own noise), at most GainLevel's
// one-sided share of studies reports a significant gain for the
// best-looking one (the pick is the best of three: without the split
// level it would be near three times that), and a real 5% gain is found
// in most.
func TestEstimateGainsFalsePositives(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	p := roundPlan{ids: []string{"d", "a", "b", "c"}, rounds: 3, def: "d"}
	study := func(gain float64) bool {
		cands := map[string]*Candidate{}
		tps := map[string][]float64{}
		speed, trend := 0.0, 0.01*r.NormFloat64()
		for i, x := range p.runs(fmt.Sprint(r.Uint64())) {
			speed += trend + 0.005*r.NormFloat64()
			g := 1.0
			if x.id == "a" {
				g = gain
			}
			tp := 1000 * g * math.Exp(speed+0.007*r.NormFloat64())
			if cands[x.id] == nil {
				cands[x.id] = &Candidate{ConfigID: x.id}
			}
			cands[x.id].Rounds = append(cands[x.id].Rounds, RoundRun{Round: x.round, At: 60 * float64(i), Throughput: tp})
			tps[x.id] = append(tps[x.id], tp)
		}
		for id, c := range cands {
			c.Throughput = Robust(tps[id])
		}
		gs, _ := EstimateGains([]*Candidate{cands["a"], cands["b"], cands["c"]}, cands["d"])
		best := slices.MaxFunc(gs, func(a, b GainEstimate) int { return cmp.Compare(a.Pct, b.Pct) })
		return best.Significant
	}
	const n = 2000
	false_, found := 0, 0
	for range n {
		if study(1) {
			false_++
		}
		if study(1.05) {
			found++
		}
	}
	if rate := float64(false_) / n; rate > (1-GainLevel)/2+0.01 {
		t.Errorf("false gains in %.3f of studies, want at most %.3f", rate, (1-GainLevel)/2)
	}
	if rate := float64(found) / n; rate < 0.8 {
		t.Errorf("a real 5%% gain found in %.3f of studies", rate)
	}
	t.Logf("false gains %d of %d studies, a real 5%% gain found in %d", false_, n, found)
}

// TestRoundOrder: each round runs vLLM's default first and every other
// config once; over as many rounds as there are others, each runs once at
// every place (balanced: as often early as late); the order is the same
// for the same study and round.
func TestRoundOrder(t *testing.T) {
	ids := []string{"a", "d", "b", "c"}
	places := map[string][]int{}
	for r := 1; r <= 6; r++ {
		o := roundOrder("s1", r, ids, "d")
		if !slices.Equal(o, roundOrder("s1", r, slices.Clone(ids), "d")) {
			t.Fatal("order not reproducible")
		}
		if o[0] != "d" || !slices.Equal(slices.Sorted(slices.Values(o)), []string{"a", "b", "c", "d"}) {
			t.Fatalf("round %d order %v; want d first, then a, b, c", r, o)
		}
		for i, id := range o[1:] {
			places[id] = append(places[id], i)
		}
	}
	for id, ps := range places {
		// Rounds 1-3 and 4-6 each put the config once at places 0, 1, 2.
		for _, half := range [][]int{ps[:3], ps[3:]} {
			if !slices.Equal(slices.Sorted(slices.Values(half)), []int{0, 1, 2}) {
				t.Fatalf("config %s at places %v; want each place once in 3 rounds", id, ps)
			}
		}
	}
	// Without the default among them: the others alone, still rotated.
	if o := roundOrder("s1", 2, []string{"a", "b"}, "d"); len(o) != 2 || o[0] == roundOrder("s1", 1, []string{"a", "b"}, "d")[0] {
		t.Fatalf("order %v", o)
	}
}

// TestRoundPlanRuns: the plan runs whole rounds in roundOrder and closes
// the last with a run of vLLM's default (round rounds+1), so that every
// other config's run lies between two of the default's.
func TestRoundPlanRuns(t *testing.T) {
	p := roundPlan{ids: []string{"d", "a", "b"}, rounds: 2, def: "d"}
	runs := p.runs("s1")
	if len(runs) != 7 || runs[0] != (roundRun{"d", 1}) || runs[3] != (roundRun{"d", 2}) || runs[6] != (roundRun{"d", 3}) {
		t.Fatalf("runs %v; want d, two others, d, two others, d", runs)
	}
	if p.left(nil) != 7 {
		t.Fatalf("left %d, want 7", p.left(nil))
	}
	if p := (roundPlan{ids: []string{"a", "b"}, rounds: 2}); len(p.runs("s1")) != 4 {
		t.Fatalf("without the default: %v", p.runs("s1"))
	}
}

// TestEstimateGainsWithinRoundDrift: the host speeds up by 1% per run and
// the default runs before the config in every round (the issue 26 seed):
// pairing the runs of a round would see a steady gain of about 2%; with
// the default's runs bracketing the config's, the drift fit sees none. A
// real 5% gain under the same drift is found.
func TestEstimateGainsWithinRoundDrift(t *testing.T) {
	noise := []float64{0.002, -0.003, 0.001, -0.001, 0.003, -0.002, 0.0, 0.002, -0.001, 0.001, -0.002, 0.003, 0.0}
	study := func(gain float64) GainEstimate {
		base, c := &Candidate{ConfigID: "d"}, &Candidate{ConfigID: "a"}
		var bt, ct []float64
		run := 0
		measure := func(to *Candidate, tps *[]float64, round int, g float64) {
			x := 1000 * g * math.Exp(0.01*float64(run)+noise[run])
			to.Rounds = append(to.Rounds, RoundRun{Round: round, At: float64(run) * 60, Throughput: x})
			*tps = append(*tps, x)
			run++
		}
		for r := 1; r <= 3; r++ {
			measure(base, &bt, r, 1)
			run++ // another finalist's run
			measure(c, &ct, r, gain)
			run++ // another finalist's run
		}
		measure(base, &bt, 4, 1) // the closing run
		base.Throughput, c.Throughput = Robust(bt), Robust(ct)
		g, ok := EstimateGain(c, base)
		if !ok {
			t.Fatal("not ok")
		}
		return g
	}
	if g := study(1); g.Significant || math.Abs(g.Pct) > 0.6 {
		t.Errorf("no gain, drifting host: %s: %s", g, g.Verdict())
	}
	if g := study(1.05); !g.Significant || math.Abs(g.Pct-5) > 0.6 {
		t.Errorf("5%% gain, drifting host: %s: %s", g, g.Verdict())
	}
}
