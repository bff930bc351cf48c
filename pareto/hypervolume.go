package pareto

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
)

// ErrDimension reports vectors whose length does not match the objectives,
// or a dimension hypervolume does not support.
var ErrDimension = errors.New("dimension mismatch")

// Hypervolume returns the exact volume of the objective space that the points
// dominate and that dominates the reference point ref (the Lebesgue measure of
// the union of the boxes [p, ref] in minimisation space). ref is in the
// objectives' own units and must be worse than the interesting points: below
// them for maximised objectives, above them for minimised ones. Points that do
// not strictly beat ref in every objective contribute nothing, nor do points
// with NaN coordinates. One, two and three objectives are supported.
//
// Algorithms: 2-D sorts by the first coordinate and sweeps the staircase,
// O(n log n). 3-D sweeps the third coordinate upwards, keeping the 2-D
// staircase of the points seen so far and its area incrementally; the volume
// is the sum of area × slab height, O(n log n + n·s) for a staircase of s
// points (worst case O(n²)).
func Hypervolume(points [][]float64, dirs []Direction, ref []float64) (float64, error) {
	pts, r, err := minSpace(points, dirs, ref)
	if err != nil {
		return 0, err
	}
	return volume(pts, r), nil
}

// Contribution returns the hypervolume p adds to points (same dirs and ref
// as Hypervolume): Hypervolume(points ∪ {p}) − Hypervolume(points), computed
// as p's own box less the volume the points dominate inside it (each point
// clipped to the box), so a candidate's gain costs one sweep instead of two
// and does not lose digits to the difference of two large volumes.
func Contribution(points [][]float64, p []float64, dirs []Direction, ref []float64) (float64, error) {
	if len(p) != len(dirs) {
		return 0, fmt.Errorf("%w: point has %d coordinates, want %d", ErrDimension, len(p), len(dirs))
	}
	one, r, err := minSpace([][]float64{p}, dirs, ref)
	if err != nil || len(one) == 0 { // p does not beat ref: it adds nothing
		return 0, err
	}
	q := one[0]
	clipped, _, err := minSpace(points, dirs, ref)
	if err != nil {
		return 0, err
	}
	own := 1.0
	for j := range q {
		own *= r[j] - q[j]
	}
	for _, c := range clipped {
		dominated := true // c weakly dominates q
		for j := range c {
			if c[j] > q[j] {
				dominated = false
			}
			c[j] = max(c[j], q[j])
		}
		if dominated {
			return 0, nil
		}
	}
	return max(0, own-volume(clipped, r)), nil
}

// minSpace checks the dimensions and returns the points that strictly beat
// ref, and ref, in minimisation space (copies: the sweeps sort and clip
// them).
func minSpace(points [][]float64, dirs []Direction, ref []float64) ([][]float64, []float64, error) {
	d := len(dirs)
	if len(ref) != d {
		return nil, nil, fmt.Errorf("%w: reference point has %d coordinates, want %d", ErrDimension, len(ref), d)
	}
	if d < 1 || d > 3 {
		return nil, nil, fmt.Errorf("%w: hypervolume supports 1 to 3 objectives, got %d", ErrDimension, d)
	}
	r := make([]float64, d)
	for j, dir := range dirs {
		r[j] = ref[j] * dir.sign()
		if math.IsNaN(r[j]) {
			return nil, nil, fmt.Errorf("%w: reference coordinate %d is NaN", ErrDimension, j)
		}
	}
	// One backing array for every point: the search sweeps fronts of
	// hundreds of points for each candidate it scores.
	pts := make([][]float64, 0, len(points))
	buf := make([]float64, len(points)*d)
	for i, p := range points {
		if len(p) != d {
			return nil, nil, fmt.Errorf("%w: point %d has %d coordinates, want %d", ErrDimension, i, len(p), d)
		}
		q := buf[i*d : (i+1)*d : (i+1)*d]
		in := true
		for j, dir := range dirs {
			q[j] = p[j] * dir.sign()
			if !(q[j] < r[j]) { // also false for NaN
				in = false
			}
		}
		if in {
			pts = append(pts, q)
		}
	}
	return pts, r, nil
}

// volume is the hypervolume of points in minimisation space that all beat r.
func volume(pts [][]float64, r []float64) float64 {
	switch len(r) {
	case 1:
		best := r[0]
		for _, p := range pts {
			best = min(best, p[0])
		}
		return r[0] - best
	case 2:
		return hv2(pts, r[0], r[1])
	}
	return hv3(pts, r)
}

// hv2 is the 2-D sweep in minimisation space; every point beats (rx, ry).
func hv2(pts [][]float64, rx, ry float64) float64 {
	slices.SortFunc(pts, func(a, b []float64) int {
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		return cmp.Compare(a[1], b[1])
	})
	area, prevY := 0.0, ry
	for _, p := range pts {
		if p[1] < prevY {
			area += (rx - p[0]) * (prevY - p[1])
			prevY = p[1]
		}
	}
	return area
}

// staircase is a 2-D non-dominated set sorted by x ascending (so y strictly
// descending) with the area it dominates up to (rx, ry).
type staircase struct {
	xs, ys []float64
	rx, ry float64
	area   float64
}

// insert adds (qx, qy), removing the points it dominates and growing area by
// the part of [qx,rx]×[qy,ry] not dominated before.
func (s *staircase) insert(qx, qy float64) {
	// k: last point with x <= qx.
	k := sort.Search(len(s.xs), func(i int) bool { return s.xs[i] > qx }) - 1
	if k >= 0 && s.ys[k] <= qy {
		return // weakly dominated: nothing new
	}
	j := k + 1 // first point with x >= qx
	if k >= 0 && s.xs[k] == qx {
		j = k
	}
	hPrev := s.ry // height of the staircase just left of qx
	if j > 0 {
		hPrev = s.ys[j-1]
	}
	e := j // points j..e-1 are dominated by q (x >= qx, y >= qy)
	for e < len(s.xs) && s.ys[e] >= qy {
		e++
	}
	next := func(i int) float64 { // x where the segment starting at point i ends
		if i+1 < len(s.xs) {
			return s.xs[i+1]
		}
		return s.rx
	}
	// Segment [qx, x_j) at height hPrev, then each dominated point's segment.
	end := s.rx
	if j < len(s.xs) {
		end = s.xs[j]
	}
	gain := (end - qx) * (hPrev - qy)
	for i := j; i < e; i++ {
		gain += (next(i) - s.xs[i]) * (s.ys[i] - qy)
	}
	s.area += gain
	s.xs = slices.Replace(s.xs, j, e, qx)
	s.ys = slices.Replace(s.ys, j, e, qy)
}

// hv3 sweeps z upwards in minimisation space; every point beats r.
func hv3(pts [][]float64, r []float64) float64 {
	slices.SortFunc(pts, func(a, b []float64) int { return cmp.Compare(a[2], b[2]) })
	s := staircase{rx: r[0], ry: r[1], xs: make([]float64, 0, len(pts)), ys: make([]float64, 0, len(pts))}
	vol := 0.0
	for i, p := range pts {
		s.insert(p[0], p[1])
		top := r[2]
		if i+1 < len(pts) {
			top = pts[i+1][2]
		}
		vol += s.area * (top - p[2])
	}
	return vol
}
