package eval

import (
	"encoding/json"
	"math"
	"slices"

	"github.com/vllm-tuner/tuner/pareto"
)

// frontOf returns the non-dominated vectors of pts (nil for none).
func frontOf(pts [][]float64, p *Problem) [][]float64 {
	if len(pts) == 0 {
		return nil
	}
	var out [][]float64
	for _, i := range pareto.Front(pts, p.Objectives.Directions()) {
		out = append(out, pts[i])
	}
	return out
}

// hvOf is the hypervolume of pts against ref (0 for none).
func hvOf(pts [][]float64, p *Problem, ref []float64) float64 {
	if len(pts) == 0 {
		return 0
	}
	hv, err := pareto.Hypervolume(pts, p.Objectives.Directions(), ref)
	if err != nil {
		return 0
	}
	return hv
}

// curve returns the HV ratio after each of the first n search trials: the
// hypervolume of the true vectors of the truly SLO-feasible configs tried
// so far over trueHV, clamped to [0, 1]. A run that stopped early keeps its
// last value.
func curve(trials []Trial, n int, p *Problem, ref []float64, trueHV float64) []float64 {
	out := make([]float64, n)
	var pts [][]float64
	k := 0
	last := 0.0
	for _, t := range trials {
		if t.Phase != PhaseSearch || t.Number > n {
			continue
		}
		for k < t.Number-1 {
			out[k] = last
			k++
		}
		if t.found() {
			pts = append(pts, t.True.Vec)
			pts = frontOf(pts, p)
			last = math.Max(0, math.Min(1, hvOf(pts, p, ref)/trueHV))
		}
		out[k] = last
		k++
	}
	for ; k < n; k++ {
		out[k] = last
	}
	return out
}

// trialsTo returns the first trial count whose ratio reaches thr (0: never).
func trialsTo(c []float64, thr float64) int {
	for i, v := range c {
		if v >= thr-1e-12 {
			return i + 1
		}
	}
	return 0
}

// Quantiles summarises values over seeds.
type Quantiles struct {
	Median float64 `json:"median"`
	Q1     float64 `json:"q1"`
	Q3     float64 `json:"q3"`
	N      int     `json:"n"`
}

// quantile is the linearly interpolated q-quantile of sorted xs (R type 7).
func quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	h := q * float64(n-1)
	lo := int(math.Floor(h))
	hi := min(lo+1, n-1)
	return sorted[lo] + (h-float64(lo))*(sorted[hi]-sorted[lo])
}

func quantiles(xs []float64) Quantiles {
	s := slices.Clone(xs)
	s = slices.DeleteFunc(s, math.IsNaN)
	slices.Sort(s)
	return Quantiles{Median: quantile(s, 0.5), Q1: quantile(s, 0.25), Q3: quantile(s, 0.75), N: len(s)}
}

// MarshalJSON writes NaN figures (no data) as null.
func (q Quantiles) MarshalJSON() ([]byte, error) {
	f := func(x float64) *float64 {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil
		}
		return &x
	}
	return json.Marshal(struct {
		Median *float64 `json:"median"`
		Q1     *float64 `json:"q1"`
		Q3     *float64 `json:"q3"`
		N      int      `json:"n"`
	}{f(q.Median), f(q.Q1), f(q.Q3), q.N})
}

// UnmarshalJSON reads null figures back as NaN.
func (q *Quantiles) UnmarshalJSON(b []byte) error {
	var v struct {
		Median, Q1, Q3 *float64
		N              int
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	g := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	*q = Quantiles{Median: g(v.Median), Q1: g(v.Q1), Q3: g(v.Q3), N: v.N}
	return nil
}
