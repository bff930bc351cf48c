package search

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/c-bata/goptuna/tpe"

	"github.com/vllm-tuner/tuner/pareto"
)

// TestMergeGMMKeepsDensity: TPE's "above" mixture of 10,000 observations,
// merged to maxComponents, keeps the truncated log density within 0.15 of the
// exact one wherever the density is not negligible; small mixtures are left
// as they are.
func TestMergeGMMKeepsDensity(t *testing.T) {
	params := newTPESampler(rand.New(rand.NewPCG(1, 1)), 8, 24).params
	r := rand.New(rand.NewPCG(3, 4))
	lo, hi := 0.0, 100.0
	for _, n := range []int{40, 10000} {
		xs := make([]float64, n)
		for i := range xs {
			switch i % 3 { // two clusters and a uniform background
			case 0:
				xs[i] = math.Max(lo, math.Min(hi, 20+3*r.NormFloat64()))
			case 1:
				xs[i] = math.Max(lo, math.Min(hi, 70+10*r.NormFloat64()))
			default:
				xs[i] = lo + r.Float64()*(hi-lo)
			}
		}
		pe := tpe.NewParzenEstimator(xs, lo, hi, params)
		merged := mergeGMM(pe, maxComponents)
		if n < maxComponents {
			if merged != pe {
				t.Fatalf("n=%d: a mixture below the cap was merged", n)
			}
			continue
		}
		if len(merged.Weights) > maxComponents {
			t.Fatalf("n=%d: %d components after merging", n, len(merged.Weights))
		}
		if w := floatsSum(merged.Weights); math.Abs(w-1) > 1e-9 {
			t.Fatalf("merged weights sum to %v", w)
		}
		exact, approx := newTruncGMM(pe, lo, hi), newTruncGMM(merged, lo, hi)
		worst := 0.0
		for x := lo; x <= hi; x += 0.25 {
			e := exact.logPDF(x)
			if e < math.Log(1e-4) { // negligible mass: not what TPE compares
				continue
			}
			worst = math.Max(worst, math.Abs(approx.logPDF(x)-e))
		}
		if worst > 0.15 {
			t.Fatalf("n=%d: merged log density off by %.3f", n, worst)
		}
	}
}

func floatsSum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}

// TestToldIdxBounded: a long history tells the sampler maxTold trials, the
// toldBest best among them, in history order; a short one tells all.
func TestToldIdxBounded(t *testing.T) {
	s := h100(t)
	for _, n := range []int{48, maxTold + 500} {
		hist := randomHistory(t, s, n, 2, synth)
		p, err := NewProposer(ProposerConfig{Space: s, Seed: 1, History: hist})
		if err != nil {
			t.Fatal(err)
		}
		sc := p.scalariser()
		got := p.toldIdx(sc, rand.New(rand.NewPCG(1, 2)))
		if n <= maxTold {
			if !slices.Equal(got, p.sampler) {
				t.Fatalf("n=%d: told %d of %d", n, len(got), len(p.sampler))
			}
			continue
		}
		if len(got) != maxTold || !slices.IsSorted(got) {
			t.Fatalf("n=%d: told %d trials (sorted %v)", n, len(got), slices.IsSorted(got))
		}
		vals := make([]float64, len(p.sampler))
		for i, k := range p.sampler {
			vals[i] = sc.value(p.outs[k])
		}
		slices.Sort(vals)
		in := map[int]bool{}
		for _, k := range got {
			in[k] = true
		}
		best := 0
		for _, k := range p.sampler {
			if sc.value(p.outs[k]) < vals[toldBest-1] && in[k] {
				best++
			}
		}
		if want := countBelow(vals, vals[toldBest-1]); best != want {
			t.Fatalf("n=%d: %d of the %d best told", n, best, want)
		}
	}
}

func countBelow(sorted []float64, v float64) int {
	i, _ := slices.BinarySearch(sorted, v)
	return i
}

// TestFrontKeptPerTell: the front the proposer keeps as trials arrive is
// pareto.Front of its feasible observations.
func TestFrontKeptPerTell(t *testing.T) {
	s := h100(t)
	p, err := NewProposer(ProposerConfig{Space: s, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range randomHistory(t, s, 400, 3, synth) {
		p.Tell(o.Config, o.Result)
	}
	var pts [][]float64
	var idx []int
	for k, e := range p.outs {
		if e.feasible {
			pts, idx = append(pts, e.vals), append(idx, k)
		}
	}
	var want []int
	for _, i := range pareto.Front(pts, p.cfg.Objectives.Directions()) {
		want = append(want, idx[i])
	}
	if len(want) < 3 || !slices.Equal(p.front, want) {
		t.Fatalf("kept front %v, want %v", p.front, want)
	}
}

// TestHVIBound: the cheap bound is never below the hypervolume a point adds,
// and is zero for a dominated point.
func TestHVIBound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ref := []float64{1.1, 1.1, 1.1}
	dirs := minDirs(3)
	for range 300 {
		var front [][]float64
		for range 1 + r.IntN(30) {
			front = append(front, []float64{r.Float64(), r.Float64(), r.Float64()})
		}
		y := []float64{r.Float64(), r.Float64(), r.Float64()}
		base, _ := pareto.Hypervolume(front, dirs, ref)
		hv, _ := pareto.Hypervolume(append(slices.Clone(front), y), dirs, ref)
		if b := hviBound(front, y, ref); b < hv-base-1e-12 {
			t.Fatalf("bound %v below the gain %v", b, hv-base)
		}
		if weaklyDominated(front, y) && hviBound(front, y, ref) != 0 {
			t.Fatal("dominated point with a positive bound")
		}
	}
}
