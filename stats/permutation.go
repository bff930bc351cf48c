package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// PermutationConfig bounds the Monte-Carlo permutation test.
type PermutationConfig struct {
	// Max is the most permutations drawn; the smallest p-value it can give
	// is 1/(Max+1).
	Max int
	// Stop ends the test early once this many permutations were at least as
	// extreme as the observed split (Besag and Clifford's sequential
	// p-value, Stop/draws): a clear non-result costs tens of draws, not Max.
	Stop int
}

// DefaultPermutationConfig allows p-values down to 5e-5, small enough to
// survive a Holm correction over a few hundred tests at alpha 0.05.
func DefaultPermutationConfig() PermutationConfig {
	return PermutationConfig{Max: 19999, Stop: 20}
}

// PermResult is the outcome of PermutationTest.
type PermResult struct {
	// Observed is statistic(y) - statistic(x).
	Observed float64
	// P is the two-sided Monte-Carlo p-value, in (0, 1].
	P float64
	// Draws is the number of permutations drawn.
	Draws int
}

// PermutationTest is the two-sided two-sample permutation test of the
// difference statistic(y) - statistic(x), where statistic takes a sorted
// sample (a quantile, say). Under the null hypothesis that x and y come from
// one distribution every split of the pooled values into groups of the
// original sizes is equally likely, so the p-value (the share of random
// splits whose |difference| is at least the observed one, counting the
// observed split) is valid at any sample size and for any statistic: no
// asymptotics, which is what an extreme quantile of a few hundred values
// lacks. Each draw costs O(n1+n2): the pooled sample is sorted once and
// each group is read off it in order. The inputs are not modified.
func PermutationTest(x, y []float64, statistic func(sorted []float64) float64, cfg PermutationConfig, rng *rand.Rand) (PermResult, error) {
	if err := checkSample("x", x); err != nil {
		return PermResult{}, err
	}
	if err := checkSample("y", y); err != nil {
		return PermResult{}, err
	}
	if cfg.Max < 1 || cfg.Stop < 1 {
		return PermResult{}, fmt.Errorf("stats: permutation test needs Max and Stop >= 1, got %d and %d", cfg.Max, cfg.Stop)
	}
	sx, sy := slices.Clone(x), slices.Clone(y)
	slices.Sort(sx)
	slices.Sort(sy)
	obs := statistic(sy) - statistic(sx)
	t0 := math.Abs(obs)
	// Equal splits can differ in the last bits of an interpolated
	// statistic; they must count as "at least as extreme".
	tol := 1e-9 * t0

	pooled := append(slices.Clone(x), y...)
	slices.Sort(pooled)
	n1 := len(x)
	inX := make([]bool, len(pooled))
	for i := range n1 {
		inX[i] = true
	}
	bx, by := make([]float64, 0, n1), make([]float64, 0, len(y))
	hits := 0
	for draw := 1; draw <= cfg.Max; draw++ {
		rng.Shuffle(len(inX), func(i, j int) { inX[i], inX[j] = inX[j], inX[i] })
		bx, by = bx[:0], by[:0]
		for i, v := range pooled {
			if inX[i] {
				bx = append(bx, v)
			} else {
				by = append(by, v)
			}
		}
		if math.Abs(statistic(by)-statistic(bx)) >= t0-tol {
			hits++
			if hits == cfg.Stop {
				return PermResult{Observed: obs, P: float64(hits) / float64(draw), Draws: draw}, nil
			}
		}
	}
	return PermResult{Observed: obs, P: float64(hits+1) / float64(cfg.Max+1), Draws: cfg.Max}, nil
}
