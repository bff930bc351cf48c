package pareto

import (
	"cmp"
	"math"
	"slices"
)

// Dominates reports whether a Pareto-dominates b: a is no worse than b in
// every objective and strictly better in at least one. Vectors must have
// len(dirs) coordinates; a NaN coordinate on either side makes it false.
func Dominates(a, b []float64, dirs []Direction) bool {
	better := false
	for i, d := range dirs {
		x, y := a[i]*d.sign(), b[i]*d.sign()
		if math.IsNaN(x) || math.IsNaN(y) || x > y {
			return false
		}
		if x < y {
			better = true
		}
	}
	return better
}

// hasNaN reports whether v holds a NaN.
func hasNaN(v []float64) bool {
	return slices.ContainsFunc(v, math.IsNaN)
}

// minimised copies the points into minimisation space.
func minimised(points [][]float64, dirs []Direction) [][]float64 {
	out := make([][]float64, len(points))
	for i, p := range points {
		q := make([]float64, len(dirs))
		for j, d := range dirs {
			q[j] = p[j] * d.sign()
		}
		out[i] = q
	}
	return out
}

// lexLess orders minimisation-space vectors lexicographically.
func lexLess(a, b []float64) int {
	for i := range a {
		if c := cmp.Compare(a[i], b[i]); c != 0 {
			return c
		}
	}
	return 0
}

// dominatesMin is Dominates in minimisation space (no NaN allowed).
func dominatesMin(a, b []float64) bool {
	better := false
	for i := range a {
		if a[i] > b[i] {
			return false
		}
		if a[i] < b[i] {
			better = true
		}
	}
	return better
}

// frontOf returns the non-dominated subset of idx (minimisation vectors in
// m), in ascending index order. Algorithm: sort lexicographically; a point can
// only be dominated by one that sorts before it, and (by transitivity) if it
// is dominated at all then some front member dominates it, so each point is
// compared with the front found so far: O(n log n + n·|front|·d).
func frontOf(m [][]float64, idx []int) []int {
	order := slices.Clone(idx)
	slices.SortStableFunc(order, func(a, b int) int {
		if c := lexLess(m[a], m[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var front []int
	for _, i := range order {
		dominated := false
		for _, f := range front {
			if dominatesMin(m[f], m[i]) {
				dominated = true
				break
			}
		}
		if !dominated {
			front = append(front, i)
		}
	}
	slices.Sort(front)
	return front
}

// Front returns the indices (ascending) of the non-dominated points: no point
// of the input dominates them. Points with NaN coordinates are left out.
// Equal vectors do not dominate each other, so duplicates are all kept.
func Front(points [][]float64, dirs []Direction) []int {
	return FrontMasked(points, dirs, nil)
}

// FrontMasked is Front over the points i with keep[i] (all points when keep is
// nil), e.g. the SLO-feasible ones. Masked-out points neither enter the front
// nor dominate anything.
func FrontMasked(points [][]float64, dirs []Direction, keep []bool) []int {
	m := minimised(points, dirs)
	idx := make([]int, 0, len(points))
	for i := range points {
		if (keep == nil || keep[i]) && !hasNaN(m[i]) {
			idx = append(idx, i)
		}
	}
	return frontOf(m, idx)
}

// Sort performs non-dominated sorting: fronts[0] is the Pareto front, fronts[1]
// the front of what remains, and so on; each front lists indices ascending.
// Points with NaN coordinates appear in no front.
func Sort(points [][]float64, dirs []Direction) [][]int {
	m := minimised(points, dirs)
	rest := make([]int, 0, len(points))
	for i := range points {
		if !hasNaN(m[i]) {
			rest = append(rest, i)
		}
	}
	var fronts [][]int
	for len(rest) > 0 {
		f := frontOf(m, rest)
		fronts = append(fronts, f)
		in := make(map[int]bool, len(f))
		for _, i := range f {
			in[i] = true
		}
		rest = slices.DeleteFunc(rest, func(i int) bool { return in[i] })
	}
	return fronts
}

// Ranks returns each point's non-dominated rank (0 for the front, 1 for the
// next, ...), or -1 for points with NaN coordinates.
func Ranks(points [][]float64, dirs []Direction) []int {
	r := make([]int, len(points))
	for i := range r {
		r[i] = -1
	}
	for k, f := range Sort(points, dirs) {
		for _, i := range f {
			r[i] = k
		}
	}
	return r
}

// Insert is one step of incremental front maintenance: given the current
// front (mutually non-dominated vectors) and a new point p, it reports
// whether p belongs to the updated front and which members p dominates (to be
// removed). A NaN point is never added.
func Insert(front [][]float64, p []float64, dirs []Direction) (add bool, drop []int) {
	if hasNaN(p) {
		return false, nil
	}
	for _, f := range front {
		if Dominates(f, p, dirs) {
			return false, nil
		}
	}
	for i, f := range front {
		if Dominates(p, f, dirs) {
			drop = append(drop, i)
		}
	}
	return true, drop
}
