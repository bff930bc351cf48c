package stats

import (
	"cmp"
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
	// Blocks, when > 1, cuts each sample, in the order given (time order),
	// into this many runs of consecutive values and permutes whole blocks
	// instead of single values: a block permutation test, valid when
	// neighbouring values are dependent (a stall of the machine slows every
	// request in flight, so tail latencies arrive in clusters) as long as
	// blocks are longer than the dependence. 0 or 1 permutes single values.
	Blocks int
}

// DefaultPermutationConfig allows p-values down to 1e-4, small enough to
// pass a Holm correction over 500 tests at alpha 0.05, and permutes single
// values.
func DefaultPermutationConfig() PermutationConfig {
	return PermutationConfig{Max: 9999, Stop: 20}
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
	nx, ny := len(x), len(y)
	if cfg.Blocks > 1 {
		nx, ny = cfg.Blocks, cfg.Blocks
	}
	return permute(blocks(x, nx), blocks(y, ny), statistic, cfg, rng), nil
}

// blocks cuts s into n runs of consecutive values whose lengths differ by at
// most one (fewer when s is shorter than n).
func blocks(s []float64, n int) [][]float64 {
	n = min(n, len(s))
	out := make([][]float64, 0, n)
	for i := range n {
		out = append(out, s[i*len(s)/n:(i+1)*len(s)/n])
	}
	return out
}

// permute is the permutation test over units, the blocks of x and of y (a
// unit of one value each for the plain test): every draw gives x as many
// units as it had, chosen at random. With blocks the groups' sizes vary by
// a few values between draws, which a quantile does not mind. The pooled
// values are sorted once, each remembering its unit; each draw marks a
// uniform random subset of the fewer units (a partial Fisher-Yates shuffle
// of idx, which need not be reset) and reads both groups off the sorted
// values in order: O(n1+n2) a draw, no sorting.
func permute(ux, uy [][]float64, statistic func(sorted []float64) float64, cfg PermutationConfig, rng *rand.Rand) PermResult {
	var sx, sy []float64
	for _, u := range ux {
		sx = append(sx, u...)
	}
	for _, u := range uy {
		sy = append(sy, u...)
	}
	slices.Sort(sx)
	slices.Sort(sy)
	obs := statistic(sy) - statistic(sx)
	t0 := math.Abs(obs)
	// Equal splits can differ in the last bits of an interpolated
	// statistic; they must count as "at least as extreme".
	tol := 1e-9 * t0

	type tagged struct {
		v    float64
		unit int
	}
	units := append(slices.Clone(ux), uy...)
	pooled := make([]tagged, 0, len(sx)+len(sy))
	for id, u := range units {
		for _, v := range u {
			pooled = append(pooled, tagged{v, id})
		}
	}
	slices.SortFunc(pooled, func(a, b tagged) int { return cmp.Compare(a.v, b.v) })
	k, markX := len(ux), true
	if len(uy) < k {
		k, markX = len(uy), false
	}
	idx := make([]int, len(units))
	for i := range idx {
		idx[i] = i
	}
	mark := make([]bool, len(units))
	gx, gy := make([]float64, 0, len(pooled)), make([]float64, 0, len(pooled))
	hits := 0
	for draw := 1; draw <= cfg.Max; draw++ {
		for i := range k {
			j := i + rng.IntN(len(idx)-i)
			idx[i], idx[j] = idx[j], idx[i]
			mark[idx[i]] = true
		}
		gx, gy = gx[:0], gy[:0]
		for _, t := range pooled {
			if mark[t.unit] == markX {
				gx = append(gx, t.v)
			} else {
				gy = append(gy, t.v)
			}
		}
		for _, i := range idx[:k] {
			mark[i] = false
		}
		if math.Abs(statistic(gy)-statistic(gx)) >= t0-tol {
			hits++
			if hits == cfg.Stop {
				return PermResult{Observed: obs, P: float64(hits) / float64(draw), Draws: draw}
			}
		}
	}
	return PermResult{Observed: obs, P: float64(hits+1) / float64(cfg.Max+1), Draws: cfg.Max}
}
