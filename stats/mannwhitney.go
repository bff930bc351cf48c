package stats

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Method selects how MannWhitneyU computes its p-value.
type Method int

const (
	// Auto is scipy's 'auto': Exact when either sample has at most
	// ExactMaxSize values and no value is tied, Asymptotic otherwise.
	Auto Method = iota
	// Exact uses the exact null distribution of U (no tie correction: with
	// ties the statistic is truncated to an integer, as scipy does).
	Exact
	// Asymptotic uses the normal approximation with the tie-corrected
	// variance and a continuity correction of 0.5.
	Asymptotic
)

// ExactMaxSize is the sample size up to which Auto uses the exact
// distribution (scipy's threshold).
const ExactMaxSize = 8

func (m Method) String() string {
	switch m {
	case Auto:
		return "auto"
	case Exact:
		return "exact"
	case Asymptotic:
		return "asymptotic"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// Errors of the tests in this package; wrapped with the sample that caused
// them.
var (
	ErrEmpty = errors.New("stats: empty sample")
	ErrNaN   = errors.New("stats: NaN in sample")
)

// UResult is the outcome of a two-sided Mann-Whitney U test.
type UResult struct {
	// U is the statistic of the first sample x: the number of pairs
	// (x_i, y_j) with x_i > y_j, ties counting one half (scipy's statistic).
	U float64
	// P is the two-sided p-value, in [0, 1].
	P float64
	// Method is the method used (Exact or Asymptotic, never Auto).
	Method Method
	// Ties is true when some value occurs more than once in the pooled sample.
	Ties bool
}

// MannWhitneyU is the two-sided Mann-Whitney U (Wilcoxon rank-sum) test of
// x against y, as scipy.stats.mannwhitneyu(x, y, use_continuity=True,
// alternative='two-sided', method=m). The inputs are not modified.
//
// The exact distribution costs O(min(n1,n2)^2 * max(n1,n2)) time and
// O(n1*n2) memory; Auto only picks it when a sample has at most 8 values.
func MannWhitneyU(x, y []float64, m Method) (UResult, error) {
	if err := checkSample("x", x); err != nil {
		return UResult{}, err
	}
	if err := checkSample("y", y); err != nil {
		return UResult{}, err
	}
	n1, n2 := len(x), len(y)
	r1, tieTerm := rankSum(x, y)
	u1 := r1 - float64(n1)*float64(n1+1)/2
	u2 := float64(n1)*float64(n2) - u1
	u := math.Max(u1, u2)
	res := UResult{U: u1, Ties: tieTerm > 0, Method: m}
	if m == Auto {
		res.Method = Asymptotic
		if (n1 <= ExactMaxSize || n2 <= ExactMaxSize) && !res.Ties {
			res.Method = Exact
		}
	}
	var p float64
	switch res.Method {
	case Exact:
		// P(U >= u) by symmetry is P(U <= n1*n2 - u); scipy truncates a
		// non-integer u (only possible with ties) toward zero.
		p = 2 * uCDF(n1, n2, n1*n2-int(u))
	case Asymptotic:
		p = 2 * uNormalSF(u, n1, n2, tieTerm)
	default:
		return UResult{}, fmt.Errorf("stats: unknown Mann-Whitney method %d", int(m))
	}
	res.P = math.Max(0, math.Min(1, p))
	return res, nil
}

func checkSample(name string, s []float64) error {
	if len(s) == 0 {
		return fmt.Errorf("sample %s: %w", name, ErrEmpty)
	}
	for i, v := range s {
		if math.IsNaN(v) {
			return fmt.Errorf("sample %s, value %d: %w", name, i, ErrNaN)
		}
	}
	return nil
}

// rankSum returns the sum of the average ranks (1-based) of x in the pooled
// sample x ∪ y and the tie term sum(t^3 - t) over groups of t equal values.
func rankSum(x, y []float64) (r1, tieTerm float64) {
	type obs struct {
		v     float64
		fromX bool
	}
	all := make([]obs, 0, len(x)+len(y))
	for _, v := range x {
		all = append(all, obs{v, true})
	}
	for _, v := range y {
		all = append(all, obs{v, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		// Positions i..j-1 (ranks i+1..j) share the average rank.
		avg := float64(i+1+j) / 2
		for k := i; k < j; k++ {
			if all[k].fromX {
				r1 += avg
			}
		}
		if t := float64(j - i); t > 1 {
			tieTerm += t*t*t - t
		}
		i = j
	}
	return r1, tieTerm
}

// uNormalSF is P(U >= u) under the normal approximation with the tie-
// corrected variance and continuity correction (scipy's _get_mwu_z).
func uNormalSF(u float64, n1, n2 int, tieTerm float64) float64 {
	fn1, fn2 := float64(n1), float64(n2)
	n := fn1 + fn2
	mu := fn1 * fn2 / 2
	s := math.Sqrt(fn1 * fn2 / 12 * ((n + 1) - tieTerm/(n*(n-1))))
	z := (u - mu - 0.5) / s // -Inf when every value is tied (s = 0)
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

// uCDF is P(U <= k) for sample sizes n1, n2 without ties. The counts of
// arrangements by U are the coefficients of the Gaussian binomial
// [m+n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), m and n the
// smaller and larger size. Every step maps lower degrees to higher ones, so
// only the coefficients up to k are kept; each step divides by (1 - q^i) (a
// running sum) and multiplies by (1 - q^(n+i)): O(m k) time instead of the
// O(m n k) of the textbook recurrence. Scaling step i by i/(n+i) keeps the
// coefficients probabilities (the counts overflow float64 past m+n = 1029).
func uCDF(n1, n2, k int) float64 {
	m, n := min(n1, n2), max(n1, n2)
	if k < 0 {
		return 0
	}
	if k >= m*n {
		return 1
	}
	// Sum the smaller tail; the distribution is symmetric about m*n/2.
	if k > m*n-k-1 {
		return 1 - uCDF(n1, n2, m*n-k-1)
	}
	c := make([]float64, k+1)
	c[0] = 1
	for i := 1; i <= m; i++ {
		for j := i; j <= k; j++ {
			c[j] += c[j-i]
		}
		for j := k; j >= n+i; j-- {
			c[j] -= c[j-n-i]
		}
		f := float64(i) / float64(n+i)
		for j := range c {
			c[j] *= f
		}
	}
	var s float64
	for _, v := range c {
		s += v
	}
	return s
}
