package pareto

import (
	"cmp"
	"math"
	"slices"
)

// CrowdingDistance returns NSGA-II's crowding distance of each point within
// the set (normally one front): per objective the points are sorted, the two
// extremes get +Inf and each interior point adds the gap between its
// neighbours divided by the objective's range. Objectives with zero range add
// nothing. Sets of one or two points are all +Inf.
func CrowdingDistance(points [][]float64, dirs []Direction) []float64 {
	n := len(points)
	dist := make([]float64, n)
	if n <= 2 {
		for i := range dist {
			dist[i] = math.Inf(1)
		}
		return dist
	}
	order := make([]int, n)
	for j := range dirs {
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(points[a][j], points[b][j]) })
		lo, hi := points[order[0]][j], points[order[n-1]][j]
		dist[order[0]], dist[order[n-1]] = math.Inf(1), math.Inf(1)
		span := hi - lo
		if !(span > 0) || math.IsInf(span, 0) {
			continue
		}
		for k := 1; k < n-1; k++ {
			dist[order[k]] += (points[order[k+1]][j] - points[order[k-1]][j]) / span
		}
	}
	return dist
}

// SelectDiverse picks k indices of points (normally a front) that spread
// over it: it repeatedly drops the point with the smallest crowding distance
// (ties: the highest index) and recomputes, so extremes are kept. The result
// is ascending. k >= len(points) returns every index.
func SelectDiverse(points [][]float64, dirs []Direction, k int) []int {
	idx := make([]int, len(points))
	for i := range idx {
		idx[i] = i
	}
	if k < 0 {
		k = 0
	}
	for len(idx) > k {
		sub := make([][]float64, len(idx))
		for i, j := range idx {
			sub[i] = points[j]
		}
		cd := CrowdingDistance(sub, dirs)
		worst := 0
		for i := range cd {
			if cd[i] <= cd[worst] {
				worst = i
			}
		}
		idx = slices.Delete(idx, worst, worst+1)
	}
	return idx
}

// Knee returns the index of the compromise point of a set (normally a front):
// each objective is normalised over the set to [0, 1] with 0 the best value
// (so the ideal point is the origin), and the point closest to the origin in
// Euclidean distance wins; ties go to the lowest index. Weights, when given
// (one per objective, >= 0), scale the normalised coordinates. Points with NaN
// coordinates are skipped; it returns -1 when no point is left.
func Knee(points [][]float64, dirs []Direction, weights []float64) int {
	m := minimised(points, dirs)
	d := len(dirs)
	lo, hi := make([]float64, d), make([]float64, d)
	for j := range d {
		lo[j], hi[j] = math.Inf(1), math.Inf(-1)
	}
	for _, p := range m {
		if hasNaN(p) {
			continue
		}
		for j := range d {
			lo[j], hi[j] = min(lo[j], p[j]), max(hi[j], p[j])
		}
	}
	best, bestD := -1, math.Inf(1)
	for i, p := range m {
		if hasNaN(p) {
			continue
		}
		s := 0.0
		for j := range d {
			v := 0.0
			if span := hi[j] - lo[j]; span > 0 && !math.IsInf(span, 0) {
				v = (p[j] - lo[j]) / span
			}
			if j < len(weights) {
				v *= weights[j]
			}
			s += v * v
		}
		if s < bestD {
			best, bestD = i, s
		}
	}
	return best
}
