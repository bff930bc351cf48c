package stats

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// minBatch is the fewest values a batch needs for its own quantile to mean
// anything in QuantileSE's batch-means estimate.
const minBatch = 10

// QuantileSE is the standard error of the sample q-quantile of x (0 < q <
// 1), x in time order.
//
// For independent values it is distribution-free: the quantile's density
// is read off the sorted sample between the order statistics at n*q -/+
// sqrt(n*q*(1-q)) (one binomial standard deviation of the count below the
// quantile), so SE = (x_(u) - x_(l)) / 2.
//
// With batches > 1 and at least 10 values a batch it also sees serial
// dependence (neighbouring requests that share a batch or a stall move
// together, so a run's quantile wanders more than independent values would
// let it): x is cut into that many runs of neighbours, and the share of
// each batch below the sample quantile gives the variance of the overall
// share by batch means; its ratio to the independent q(1-q)/n (at least 1)
// inflates the SE. Batch means of that share, not of each batch's own
// quantile: a batch of 20 values has no p99 of its own, but its share
// below the run's p99 is an ordinary mean.
//
// It is the spread a two-sample comparison of quantiles inherits from one
// run; MinDetectable turns it into the smallest effect a test can find.
func QuantileSE(x []float64, q float64, batches int) (float64, error) {
	if err := checkSample("x", x); err != nil {
		return math.NaN(), err
	}
	if !(q > 0 && q < 1) {
		return math.NaN(), fmt.Errorf("stats: quantile %v not in (0, 1)", q)
	}
	s := slices.Clone(x)
	slices.Sort(s)
	n := float64(len(s))
	h := math.Sqrt(n * q * (1 - q))
	lo := int(math.Max(0, math.Floor(n*q-h)))
	hi := int(math.Min(n-1, math.Ceil(n*q+h)))
	se := (s[hi] - s[lo]) / 2
	if batches > 1 && len(x) >= minBatch*batches {
		xi := stat.Quantile(q, stat.LinInterp, s, nil)
		shares := make([]float64, batches)
		for i := range batches {
			b := x[i*len(x)/batches : (i+1)*len(x)/batches]
			below := 0
			for _, v := range b {
				if v <= xi {
					below++
				}
			}
			shares[i] = float64(below) / float64(len(b))
		}
		inflation := stat.Variance(shares, nil) / float64(batches) / (q * (1 - q) / n)
		se *= math.Sqrt(math.Max(1, inflation))
	}
	return se, nil
}

// MinDetectable is the smallest true difference a two-sided test at level
// alpha finds with the given power, when the difference is estimated with
// standard error se (normal approximation): (z(1-alpha/2) + z(power)) * se.
// For two independent samples se is sqrt(se1^2 + se2^2).
func MinDetectable(se, alpha, power float64) float64 {
	if !(alpha > 0 && alpha < 1) || !(power > 0 && power < 1) || math.IsNaN(se) {
		return math.NaN()
	}
	return (distuv.UnitNormal.Quantile(1-alpha/2) + distuv.UnitNormal.Quantile(power)) * se
}

// SortedQuantile is the q-quantile of an ascending sample, interpolated
// linearly between the order statistics around rank q*(n-1) (numpy's
// default; the "_p99" of every report). q is clamped to [0, 1], NaN read as
// 0; an empty sample gives 0.
func SortedQuantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	lo, hi, frac := quantileRanks(len(sorted), q)
	return lerp(sorted[lo], sorted[hi], frac)
}

// quantileRanks gives the ranks SortedQuantile interpolates between in a
// sample of n >= 1 and the weight of the upper one.
func quantileRanks(n int, q float64) (lo, hi int, frac float64) {
	if q != q { // NaN
		q = 0
	}
	q = max(0, min(1, q))
	rank := q * float64(n-1)
	lo = int(math.Floor(rank))
	return lo, min(lo+1, n-1), rank - float64(lo)
}

func lerp(a, b, frac float64) float64 { return a + (b-a)*frac }
