package stats

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sort"
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
	ux, uy, err := permutationUnits(x, y, cfg)
	if err != nil {
		return PermResult{}, err
	}
	return permute(ux, uy, statistic, materialize(statistic, len(x)+len(y)), cfg, rng), nil
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

// QuantilePermutationTest is PermutationTest with statistic the q-quantile
// of SortedQuantile, to the last bit, at a fraction of its cost: a draw
// reads only the four order statistics the two quantiles interpolate
// between, scanning the pooled sorted values from the nearer end, and
// builds no groups. A p99 of 300 values a side reads about a dozen values a
// draw instead of 600. The same rng gives the same result as
// PermutationTest with func(s []float64) float64 { return
// SortedQuantile(s, q) }.
func QuantilePermutationTest(x, y []float64, q float64, cfg PermutationConfig, rng *rand.Rand) (PermResult, error) {
	ux, uy, err := permutationUnits(x, y, cfg)
	if err != nil {
		return PermResult{}, err
	}
	return permute(ux, uy, func(s []float64) float64 { return SortedQuantile(s, q) }, quantileSplit(q, byAuto), cfg, rng), nil
}

// permutationUnits checks the inputs of a permutation test and cuts them
// into the units it permutes.
func permutationUnits(x, y []float64, cfg PermutationConfig) (ux, uy [][]float64, err error) {
	if err := checkSample("x", x); err != nil {
		return nil, nil, err
	}
	if err := checkSample("y", y); err != nil {
		return nil, nil, err
	}
	if cfg.Max < 1 || cfg.Stop < 1 {
		return nil, nil, fmt.Errorf("stats: permutation test needs Max and Stop >= 1, got %d and %d", cfg.Max, cfg.Stop)
	}
	nx, ny := len(x), len(y)
	if cfg.Blocks > 1 {
		nx, ny = cfg.Blocks, cfg.Blocks
	}
	return blocks(x, nx), blocks(y, ny), nil
}

// tagged is a pooled value and the unit it came from.
type tagged struct {
	v    float64
	unit int
}

// draw is one random split of the pooled values, in ascending order: value
// i is in the marked group when mark[pooled[i].unit]; marked lists the
// marked units; x is the marked group when markX. nx and ny are the
// groups' sizes.
type draw struct {
	pooled []tagged
	mark   []bool
	marked []int
	markX  bool
	nx, ny int
}

// inX reports whether t is in x in this draw.
func (d *draw) inX(t tagged) bool { return d.mark[t.unit] == d.markX }

// split is one draw's |statistic(y) - statistic(x)|.
type split func(d *draw) float64

// materialize is the split of any statistic: it builds both sorted groups.
func materialize(statistic func(sorted []float64) float64, n int) split {
	gx, gy := make([]float64, 0, n), make([]float64, 0, n)
	return func(d *draw) float64 {
		gx, gy = gx[:0], gy[:0]
		for _, t := range d.pooled {
			if d.inX(t) {
				gx = append(gx, t.v)
			} else {
				gy = append(gy, t.v)
			}
		}
		return math.Abs(statistic(gy) - statistic(gx))
	}
}

// How quantileSplit finds the order statistics: the cheaper way for the
// draw (auto), or one way (for tests).
type findBy int

const (
	byAuto findBy = iota
	byScan
	byCount
)

// quantileSplit is the split of SortedQuantile(., q): it finds the two
// order statistics around each group's rank without building the groups,
// either by scanning the pooled values from the nearer end until all four
// are passed (a tail: a few values), or, with few units (blocks), by binary
// search on the count of a group's values below a position, summed over
// the marked units from per-unit prefix counts (the middle: 2k log2 n reads
// instead of n).
func quantileSplit(q float64, by findBy) split {
	var pre []int32 // pre[u*(n+1)+j]: values of unit u among pooled[:j]
	return func(d *draw) float64 {
		n := len(d.pooled)
		scanCost := 2 * (min(q, 1-q)*float64(n) + 2)
		countCost := float64(2 * len(d.marked) * bits.Len(uint(n)))
		if by == byCount || by == byAuto && countCost < scanCost {
			if pre == nil {
				pre = prefixCounts(d.pooled, len(d.mark))
			}
			return quantileByCount(d, q, pre)
		}
		return quantileByScan(d, q)
	}
}

// prefixCounts is quantileSplit's per-unit count table.
func prefixCounts(pooled []tagged, units int) []int32 {
	n := len(pooled)
	pre := make([]int32, units*(n+1))
	for u := range units {
		row := pre[u*(n+1) : (u+1)*(n+1)]
		for j, t := range pooled {
			row[j+1] = row[j]
			if t.unit == u {
				row[j+1]++
			}
		}
	}
	return pre
}

func quantileByCount(d *draw, q float64, pre []int32) float64 {
	n := len(d.pooled)
	// at is the position in pooled of the value of rank r (from 0) of the
	// marked group or of the other one.
	at := func(marked bool, r int) int {
		return sort.Search(n, func(i int) bool {
			c := 0
			for _, u := range d.marked {
				c += int(pre[u*(n+1)+i+1])
			}
			if !marked {
				c = i + 1 - c
			}
			return c > r
		})
	}
	value := func(marked bool, size int) float64 {
		lo, hi, frac := quantileRanks(size, q)
		i := at(marked, lo)
		j := i
		if hi > lo {
			// The next value of the group, usually a step or two on.
			for j = i + 1; d.mark[d.pooled[j].unit] != marked; j++ {
			}
		}
		return lerp(d.pooled[i].v, d.pooled[j].v, frac)
	}
	return math.Abs(value(!d.markX, d.ny) - value(d.markX, d.nx))
}

func quantileByScan(d *draw, q float64) float64 {
	nx, ny, pooled := d.nx, d.ny, d.pooled
	loX, hiX, fX := quantileRanks(nx, q)
	loY, hiY, fY := quantileRanks(ny, q)
	var vx, vy [2]float64 // the values at lo and hi
	fromTop := 2*hiX >= nx
	if fromTop {
		// Counting from the top, rank r of n is the (n-1-r)-th value.
		loX, hiX = nx-1-loX, nx-1-hiX
		loY, hiY = ny-1-loY, ny-1-hiY
	}
	needX, needY := max(loX, hiX), max(loY, hiY)
	cx, cy := 0, 0
	for i := range pooled {
		t := pooled[i]
		if fromTop {
			t = pooled[len(pooled)-1-i]
		}
		if d.inX(t) {
			if cx == loX {
				vx[0] = t.v
			}
			if cx == hiX {
				vx[1] = t.v
			}
			cx++
		} else {
			if cy == loY {
				vy[0] = t.v
			}
			if cy == hiY {
				vy[1] = t.v
			}
			cy++
		}
		if cx > needX && cy > needY {
			break
		}
	}
	return math.Abs(lerp(vy[0], vy[1], fY) - lerp(vx[0], vx[1], fX))
}

// permute is the permutation test over units, the blocks of x and of y (a
// unit of one value each for the plain test): every draw gives x as many
// units as it had, chosen at random. With blocks the groups' sizes vary by
// a few values between draws, which a quantile does not mind. The pooled
// values are sorted once, each remembering its unit; each draw marks a
// uniform random subset of the fewer units (a partial Fisher-Yates shuffle
// of idx, which need not be reset) and split reads the groups' statistics
// off the sorted values: O(n1+n2) a draw at most, no sorting. statistic
// gives the observed difference; split, each draw's.
func permute(ux, uy [][]float64, statistic func(sorted []float64) float64, diff split, cfg PermutationConfig, rng *rand.Rand) PermResult {
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

	units := append(slices.Clone(ux), uy...)
	size := make([]int, len(units))
	pooled := make([]tagged, 0, len(sx)+len(sy))
	for id, u := range units {
		size[id] = len(u)
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
	d := draw{pooled: pooled, mark: mark, marked: idx[:k], markX: markX}
	hits := 0
	for n := 1; n <= cfg.Max; n++ {
		marked := 0
		for i := range k {
			j := i + rng.IntN(len(idx)-i)
			idx[i], idx[j] = idx[j], idx[i]
			mark[idx[i]] = true
			marked += size[idx[i]]
		}
		d.nx = marked
		if !markX {
			d.nx = len(pooled) - marked
		}
		d.ny = len(pooled) - d.nx
		t := diff(&d)
		for _, i := range idx[:k] {
			mark[i] = false
		}
		if t >= t0-tol {
			hits++
			if hits == cfg.Stop {
				return PermResult{Observed: obs, P: float64(hits) / float64(n), Draws: n}
			}
		}
	}
	return PermResult{Observed: obs, P: float64(hits+1) / float64(cfg.Max+1), Draws: cfg.Max}
}
