package stats

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// PairedResult is a paired comparison of two samples measured on the same
// units (seeds, scenarios): the differences y - x, their mean and its
// standard error, Student's paired t statistic and its two-sided p-value.
type PairedResult struct {
	N      int     `json:"n"`
	Mean   float64 `json:"mean"` // mean of y - x
	SE     float64 `json:"se"`   // standard error of Mean
	T      float64 `json:"t"`
	P      float64 `json:"p"`      // two-sided; 1 when every difference is 0
	Wins   int     `json:"wins"`   // units with y > x
	Losses int     `json:"losses"` // units with y < x
}

// Paired compares y with x unit by unit (R's t.test(y, x, paired = TRUE)).
// Pairing removes what the units share: two searches run on the same seeds
// share their openings' luck, so a difference too small for two unpaired
// medians to show can still be measured.
func Paired(x, y []float64) (PairedResult, error) {
	if len(x) != len(y) {
		return PairedResult{}, fmt.Errorf("stats: paired samples of %d and %d values", len(x), len(y))
	}
	if len(x) < 2 {
		return PairedResult{}, fmt.Errorf("stats: paired comparison needs at least 2 pairs, got %d", len(x))
	}
	d := make([]float64, len(x))
	r := PairedResult{N: len(x)}
	for i := range x {
		if math.IsNaN(x[i]) || math.IsNaN(y[i]) || math.IsInf(x[i], 0) || math.IsInf(y[i], 0) {
			return PairedResult{}, fmt.Errorf("stats: pair %d is not finite (%v, %v)", i, x[i], y[i])
		}
		d[i] = y[i] - x[i]
		switch {
		case d[i] > 0:
			r.Wins++
		case d[i] < 0:
			r.Losses++
		}
	}
	n := float64(len(d))
	r.Mean = stat.Mean(d, nil)
	r.SE = stat.StdDev(d, nil) / math.Sqrt(n)
	switch {
	case r.SE > 0:
		r.T = r.Mean / r.SE
		r.P = 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: n - 1}.Survival(math.Abs(r.T))
	case r.Mean == 0:
		r.P = 1
	default: // every difference equal and not 0
		r.T = math.Copysign(math.Inf(1), r.Mean)
	}
	return r, nil
}
