package tuner

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/combin"
	"gonum.org/v1/gonum/stat/distuv"
)

// Interval is a distribution-free confidence interval of a shift: the
// median of x - y over the pairs of two independent samples.
type Interval struct {
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
	Level float64 `json:"level"` // achieved coverage, e.g. 0.9
}

// ShiftCI is the confidence interval of the shift between two samples that
// inverts the Mann-Whitney test (the Hodges-Lehmann interval): with the m*n
// pairwise differences x_i - y_j sorted, it is [d_(k), d_(mn+1-k)] for the
// largest k whose two tails keep the coverage at or above level. Only the
// ranks matter, so it holds for any continuous distribution, which suits
// throughput runs (few, skewed, with the odd outlier). Few runs cannot
// reach every level: with 3 and 3 runs the widest interval, from the
// smallest to the largest difference, covers 90%; then k is 1 and Level
// says the coverage achieved. ok is false when either sample is empty.
func ShiftCI(x, y []float64, level float64) (Interval, bool) {
	m, n := len(x), len(y)
	if m == 0 || n == 0 {
		return Interval{}, false
	}
	d := make([]float64, 0, m*n)
	for _, a := range x {
		for _, b := range y {
			d = append(d, a-b)
		}
	}
	slices.Sort(d)
	cdf := mannWhitneyCDF(m, n)
	alpha := (1 - level) / 2
	k := 1
	for k < (m*n+1)/2 && cdf(k) <= alpha { // cdf(k) = P(U <= k)
		k++
	}
	// k is now the largest index whose tail P(U <= k-1) stays within
	// alpha, or 1 when even the widest interval falls short of level.
	return Interval{Low: d[k-1], High: d[m*n-k], Level: 1 - 2*cdf(k-1)}, true
}

// mannWhitneyCDF returns P(U <= u) for the Mann-Whitney statistic of
// samples of m and n without ties under the null hypothesis: exact counts
// for the sizes a study re-measures, the normal approximation beyond.
func mannWhitneyCDF(m, n int) func(u int) float64 {
	if m*n > 2500 {
		mu := float64(m*n) / 2
		sd := math.Sqrt(float64(m*n*(m+n+1)) / 12)
		norm := distuv.Normal{Mu: mu, Sigma: sd}
		return func(u int) float64 {
			if u < 0 {
				return 0
			}
			return norm.CDF(float64(u) + 0.5)
		}
	}
	// f[j][u]: arrangements of i x's and j y's with U = u, built up over i
	// (the recurrence f(i,j,u) = f(i-1,j,u-j) + f(i,j-1,u)).
	f := make([][]float64, n+1)
	for j := range f {
		f[j] = make([]float64, m*n+1)
		f[j][0] = 1
	}
	for i := 1; i <= m; i++ {
		g := make([][]float64, n+1)
		for j := range g {
			g[j] = make([]float64, m*n+1)
		}
		g[0][0] = 1
		for j := 1; j <= n; j++ {
			for u := 0; u <= i*j; u++ {
				v := g[j-1][u]
				if u >= j {
					v += f[j][u-j]
				}
				g[j][u] = v
			}
		}
		f = g
	}
	total := combin.Binomial(m+n, m)
	cum := make([]float64, m*n+1)
	s := 0.0
	for u, c := range f[n] {
		s += c
		cum[u] = s / float64(total)
	}
	return func(u int) float64 {
		switch {
		case u < 0:
			return 0
		case u >= len(cum):
			return 1
		}
		return cum[u]
	}
}

// GainLevel is the coverage the gain's interval aims for; MinGainLevel is
// the least coverage at which a gain is called significant (2 runs against
// 3 reach 80%, 3 against 3 reach 90%).
const (
	GainLevel    = 0.95
	MinGainLevel = 0.8
)

// GainEstimate is the throughput gain of a config over vLLM's default with
// its uncertainty from the runs of both.
type GainEstimate struct {
	// Pct is the gain of the medians in percent.
	Pct float64 `json:"pct"`
	// LowPct and HighPct bound the shift of the runs (ShiftCI), in percent
	// of the default's median.
	LowPct   float64 `json:"low_pct"`
	HighPct  float64 `json:"high_pct"`
	Level    float64 `json:"level"`
	Runs     int     `json:"runs"`
	BaseRuns int     `json:"base_runs"`
	// Significant is true when the interval lies above zero at a coverage
	// of at least MinGainLevel.
	Significant bool `json:"significant"`
}

// EstimateGain compares c's throughput runs with base's; ok is false when
// either has no measurement.
func EstimateGain(c, base *Candidate) (GainEstimate, bool) {
	pct, ok := Gain(c, base)
	if !ok {
		return GainEstimate{}, false
	}
	g := GainEstimate{Pct: pct, Runs: len(c.Runs), BaseRuns: len(base.Runs)}
	if iv, ok := ShiftCI(c.Runs, base.Runs, GainLevel); ok {
		b := base.Throughput.Median
		g.LowPct, g.HighPct, g.Level = iv.Low/b*100, iv.High/b*100, iv.Level
		g.Significant = iv.Level >= MinGainLevel && iv.Low > 0
	}
	return g, true
}

// String is the gain as the summary prints it, e.g. "+4.2% (90% CI +1.0%
// to +7.5%, 3 vs 3 runs)"; below MinGainLevel the interval says nothing
// and is left out.
func (g GainEstimate) String() string {
	if g.Level < MinGainLevel {
		return fmt.Sprintf("%+.1f%% (%d vs %d runs)", g.Pct, g.Runs, g.BaseRuns)
	}
	return fmt.Sprintf("%+.1f%% (%.0f%% CI %+.1f%% to %+.1f%%, %d vs %d runs)", g.Pct, g.Level*100, g.LowPct, g.HighPct, g.Runs, g.BaseRuns)
}

// Verdict says what the gain means for a user: a significant gain, none
// (keep the default), or too few runs to tell.
func (g GainEstimate) Verdict() string {
	switch {
	case g.Significant:
		return "significant gain"
	case g.Level < MinGainLevel:
		return fmt.Sprintf("too few runs to tell a gain from noise (%d vs %d; re-measure with --repeats 3 or more)", g.Runs, g.BaseRuns)
	}
	return "no significant gain: keep the default"
}
