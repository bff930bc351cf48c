package tuner

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat/combin"
)

func TestMannWhitneyCDFExact(t *testing.T) {
	// Counts of U for m = n = 3 (C(6,3) = 20 arrangements):
	// u = 0..9 -> 1 1 2 3 3 3 3 2 1 1.
	counts := []float64{1, 1, 2, 3, 3, 3, 3, 2, 1, 1}
	cdf := mannWhitneyCDF(3, 3)
	sum := 0.0
	for u, c := range counts {
		sum += c
		if got := cdf(u); math.Abs(got-sum/20) > 1e-12 {
			t.Fatalf("P(U <= %d) = %g, want %g", u, got, sum/20)
		}
	}
	// Every exact distribution sums to 1 and is symmetric around mn/2.
	for _, mn := range [][2]int{{1, 1}, {2, 5}, {4, 4}, {7, 3}, {10, 12}} {
		m, n := mn[0], mn[1]
		cdf := mannWhitneyCDF(m, n)
		if cdf(m*n) != 1 || cdf(-1) != 0 {
			t.Fatalf("m=%d n=%d: cdf(mn)=%g cdf(-1)=%g", m, n, cdf(m*n), cdf(-1))
		}
		if got, want := cdf(0), 1/float64(combin.Binomial(m+n, m)); math.Abs(got-want) > 1e-12 {
			t.Fatalf("m=%d n=%d: P(U=0) = %g, want %g", m, n, got, want)
		}
		for u := range m * n {
			lo, hi := cdf(u), 1-cdf(m*n-u-1)
			if math.Abs(lo-hi) > 1e-9 {
				t.Fatalf("m=%d n=%d: not symmetric at %d: %g vs %g", m, n, u, lo, hi)
			}
		}
	}
}

func TestShiftCI(t *testing.T) {
	tests := []struct {
		name      string
		x, y      []float64
		level     float64
		low, high float64
		cover     float64
	}{
		// 3 vs 3: the widest interval (min to max difference) covers
		// 1 - 2/20 = 90%, below the 95% asked for.
		{"3v3", []float64{105, 106, 104}, []float64{100, 101, 99}, 0.95, 3, 7, 0.9},
		// 2 vs 3: 1 - 2/10.
		{"2v3", []float64{105, 106}, []float64{100, 101, 99}, 0.95, 4, 7, 0.8},
		// 1 vs 1: a point, no coverage.
		{"1v1", []float64{5}, []float64{3}, 0.95, 2, 2, 0},
		// 6 vs 6 at 90%: P(U <= 7) = 0.0465, P(U <= 8) = 0.0660 (exact
		// tables), so k = 8: the 8th smallest and largest of the 36
		// differences 5..15, at a coverage of 1 - 2*0.0465.
		{"6v6", []float64{10, 11, 12, 13, 14, 15}, []float64{0, 1, 2, 3, 4, 5}, 0.9, 8, 12, 0.9069},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iv, ok := ShiftCI(tt.x, tt.y, tt.level)
			if !ok {
				t.Fatal("not ok")
			}
			if iv.Low != tt.low || iv.High != tt.high || math.Abs(iv.Level-tt.cover) > 5e-4 {
				t.Fatalf("ShiftCI = %+v, want [%g, %g] at %.4f", iv, tt.low, tt.high, tt.cover)
			}
		})
	}
	if _, ok := ShiftCI(nil, []float64{1}, 0.9); ok {
		t.Fatal("empty sample accepted")
	}
}

// TestShiftCICoverage: over many draws of two samples from the same
// skewed distribution shifted by a known amount, the interval holds the
// shift at least as often as its stated level (it is distribution-free).
func TestShiftCICoverage(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	const shift, draws = 25.0, 4000
	for _, mn := range [][2]int{{3, 3}, {5, 4}, {8, 8}} {
		hits, level := 0, 0.0
		for range draws {
			x, y := make([]float64, mn[0]), make([]float64, mn[1])
			for i := range x {
				x[i] = 1000 + shift + r.ExpFloat64()*40
			}
			for i := range y {
				y[i] = 1000 + r.ExpFloat64()*40
			}
			iv, _ := ShiftCI(x, y, 0.95)
			level = iv.Level
			if iv.Low <= shift && shift <= iv.High {
				hits++
			}
		}
		// 4000 draws: the binomial sd is under 0.5%; allow 1.5%.
		if got := float64(hits) / draws; got < level-0.015 {
			t.Fatalf("%v runs: coverage %.3f below the stated %.3f", mn, got, level)
		}
	}
}

func FuzzShiftCI(f *testing.F) {
	f.Add(1.0, 2.0, 3.0, 0.5, 1.5, 0.9)
	f.Fuzz(func(t *testing.T, a, b, c, d, e, level float64) {
		for _, v := range []float64{a, b, c, d, e, level} {
			if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e100 {
				t.Skip()
			}
		}
		x, y := []float64{a, b, c}, []float64{d, e}
		iv, ok := ShiftCI(x, y, math.Mod(math.Abs(level), 1))
		if !ok || iv.Low > iv.High || iv.Level < 0 || iv.Level > 1 {
			t.Fatalf("ShiftCI(%v, %v) = %+v, %v", x, y, iv, ok)
		}
		// The widest interval is [min x - max y, max x - min y].
		if iv.Low < slices.Min(x)-slices.Max(y) || iv.High > slices.Max(x)-slices.Min(y) {
			t.Fatalf("interval %+v outside the differences", iv)
		}
	})
}

func TestEstimateGain(t *testing.T) {
	cand := func(runs ...float64) *Candidate {
		return &Candidate{Runs: runs, Throughput: Robust(runs)}
	}
	tests := []struct {
		name        string
		c, base     *Candidate
		significant bool
		verdict     string
	}{
		// The case: +1% inside run-to-run noise of +-3%.
		{"noise", cand(1010, 1040, 985), cand(1000, 1030, 975), false, "no significant gain: keep the default"},
		{"clear gain", cand(1100, 1110, 1095), cand(1000, 1010, 995), true, "significant gain"},
		{"one run each", cand(1100), cand(1000), false, "too few runs to tell a gain from noise (1 vs 1; re-measure with --repeats 3 or more)"},
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
				t.Fatalf("interval %+v does not hold the median gain", g)
			}
		})
	}
	if _, ok := EstimateGain(cand(1), &Candidate{}); ok {
		t.Fatal("gain over an unmeasured default")
	}
}
