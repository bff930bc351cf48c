package stats

import (
	"math"

	"gonum.org/v1/gonum/stat"
)

// KSTest is the two-sample Kolmogorov-Smirnov test on sorted samples: the
// p-value of the statistic D (gonum) under the asymptotic Kolmogorov
// distribution with the effective size n1*n2/(n1+n2) and Stephens'
// small-sample correction. It returns 1 when a sample is empty.
func KSTest(x, y []float64) float64 {
	if len(x) == 0 || len(y) == 0 {
		return 1
	}
	d := stat.KolmogorovSmirnov(x, nil, y, nil)
	ne := float64(len(x)) * float64(len(y)) / float64(len(x)+len(y))
	sq := math.Sqrt(ne)
	return KolmogorovQ((sq + 0.12 + 0.11/sq) * d)
}

// KolmogorovQ is the survival function of the Kolmogorov distribution,
// P(K > lambda) = 2 sum_{k>=1} (-1)^(k-1) exp(-2 k^2 lambda^2), with the
// Jacobi-theta form for small lambda where that series converges slowly.
func KolmogorovQ(lambda float64) float64 {
	switch {
	case math.IsNaN(lambda):
		return math.NaN()
	case lambda <= 0:
		return 1
	case lambda < 1.18:
		// P(K <= l) = sqrt(2 pi)/l * sum exp(-(2k-1)^2 pi^2 / (8 l^2))
		var s float64
		for k := 1; k <= 20; k++ {
			s += math.Exp(-float64((2*k-1)*(2*k-1)) * math.Pi * math.Pi / (8 * lambda * lambda))
		}
		return math.Max(0, math.Min(1, 1-math.Sqrt(2*math.Pi)/lambda*s))
	}
	var s float64
	sign := 1.0
	for k := 1; k <= 100; k++ {
		term := math.Exp(-2 * float64(k*k) * lambda * lambda)
		s += sign * term
		if term < 1e-16 {
			break
		}
		sign = -sign
	}
	return math.Max(0, math.Min(1, 2*s))
}
