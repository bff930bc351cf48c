package tuner

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"
)

// RoundRun is one throughput measurement of the final re-measurement: the
// round it ran in (Trial.Repeat of a repeat trial) within its study, and
// when. Each round runs vLLM's default first and then every other config
// once (roundOrder), and a last run of the default closes the last round,
// so every other config's run lies between two runs of the default.
type RoundRun struct {
	Study string `json:"study,omitempty"`
	Round int    `json:"round"`
	// At is when the run measured, in seconds into its study's
	// re-measurement: the runs' own durations summed in run order, to the
	// middle of this run's measurement (Aggregate). It is the time axis
	// of the host's drift (EstimateGains).
	At         float64 `json:"at_s"`
	Throughput float64 `json:"throughput"`
}

// GainLevel is the confidence of the gain's verdict over all the configs
// compared with vLLM's default: each config's interval is at
// 1 - (1-GainLevel)/k for k compared configs (Bonferroni), because the
// recommendation is the best of several and the best of several noisy
// estimates looks better than it is.
const GainLevel = 0.95

// GainEstimate is the throughput gain of a config over vLLM's default from
// the interleaved rounds, drift removed (EstimateGains); the interval is
// Student's at Level.
type GainEstimate struct {
	// Pct is the gain in percent: the fitted ratio over the default at
	// the same moment, or the ratio of the medians when no round pairs
	// them.
	Pct float64 `json:"pct"`
	// LowPct and HighPct bound the gain at Level (0 when no interval).
	LowPct  float64 `json:"low_pct"`
	HighPct float64 `json:"high_pct"`
	Level   float64 `json:"level"`
	// Rounds is the number of the config's runs paired with the default's;
	// Compared the configs whose gains were judged together (the
	// interval's Bonferroni divisor).
	Rounds   int `json:"rounds"`
	Compared int `json:"compared,omitempty"`
	// Runs and BaseRuns count the usable runs of the config and the
	// default (search trials included).
	Runs     int `json:"runs"`
	BaseRuns int `json:"base_runs"`
	// Significant is true when the interval lies above zero.
	Significant bool `json:"significant"`
}

// EstimateGains judges the configs cs against base together, from their
// re-measurement runs (Candidate.Rounds). The host's speed drifts, and
// within a round the configs run one after another, so a config that ran
// later in a warming host looks faster; pairing each run with the
// default's of its round does not remove that (issue 26: the default ran
// before the winner in all 3 rounds of a seed and the host sped up: a
// "significant" +2.3% on a server that ignores every flag). So the log
// throughput of every run is fitted as its config's effect plus the
// host's speed at that moment, the speed piecewise linear in time through
// the default's runs (one level per run of the default, linear between
// them: a drift that is linear over a round cancels whatever the order).
// The fit is ordinary least squares; each config's interval is Student's
// with the fit's residual degrees of freedom and the level split over the
// compared configs (GainLevel). With every run of a round at one moment
// this is the two-way (round, config) analysis, and with one config the
// paired t over rounds. The result is in cs's order; ok[i] is false when
// cs[i] or base has no measurement.
func EstimateGains(cs []*Candidate, base *Candidate) ([]GainEstimate, []bool) {
	out, ok := make([]GainEstimate, len(cs)), make([]bool, len(cs))
	for i, c := range cs {
		pct, has := Gain(c, base)
		if !has {
			continue
		}
		ok[i] = true
		out[i] = GainEstimate{Pct: pct, Runs: c.Throughput.N, BaseRuns: base.Throughput.N}
	}
	fit, good := fitDrift(cs, base, ok)
	if !good {
		return out, ok
	}
	level := 1 - (1-GainLevel)/float64(fit.compared)
	tq := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(fit.df)}.Quantile(1 - (1-level)/2)
	for i := range cs {
		if fit.runs[i] == 0 {
			continue
		}
		m, h := fit.effect[i], tq*fit.se[i]
		g := &out[i]
		g.Pct, g.LowPct, g.HighPct = math.Expm1(m)*100, math.Expm1(m-h)*100, math.Expm1(m+h)*100
		g.Level, g.Rounds, g.Compared = level, fit.runs[i], fit.compared
		g.Significant = g.Rounds >= 2 && g.LowPct > 0
	}
	return out, ok
}

// driftFit is the least-squares fit of EstimateGains: per config of cs its
// log ratio over the default (effect), standard error and paired runs,
// the residual degrees of freedom and how many configs had runs.
type driftFit struct {
	effect, se []float64
	runs       []int
	df         int
	compared   int
}

// fitDrift fits log throughput = config effect + drift(study, At) over
// the round runs of base and of the configs of cs marked use; the drift
// has one level per distinct moment of base's runs in a study (its
// knots), linear between them and flat beyond. Runs of a study where base
// has none are left out. good is false without a residual degree of
// freedom.
func fitDrift(cs []*Candidate, base *Candidate, use []bool) (driftFit, bool) {
	knots := map[string][]float64{}
	for _, r := range base.Rounds {
		if r.Throughput > 0 && !slices.Contains(knots[r.Study], r.At) {
			knots[r.Study] = append(knots[r.Study], r.At)
		}
	}
	studies := slices.Sorted(maps.Keys(knots))
	off := map[string]int{} // the first knot's column of each study
	p := 0
	for _, s := range studies {
		slices.Sort(knots[s])
	}
	f := driftFit{effect: make([]float64, len(cs)), se: make([]float64, len(cs)), runs: make([]int, len(cs))}
	col := make([]int, len(cs)) // each config's column, -1: none
	for i, c := range cs {
		col[i] = -1
		if !use[i] {
			continue
		}
		for _, r := range c.Rounds {
			if _, has := knots[r.Study]; has && r.Throughput > 0 {
				f.runs[i]++
			}
		}
		if f.runs[i] > 0 {
			col[i] = p
			p++
			f.compared++
		}
	}
	if f.compared == 0 {
		return f, false
	}
	for _, s := range studies {
		off[s] = p
		p += len(knots[s])
	}
	var rows [][]float64
	var ys []float64
	add := func(j int, r RoundRun) {
		ks, has := knots[r.Study]
		if !has || r.Throughput <= 0 {
			return
		}
		row := make([]float64, p)
		if j >= 0 {
			row[j] = 1
		}
		k := sort.SearchFloat64s(ks, r.At) // first knot at or after At
		switch {
		case k == len(ks):
			row[off[r.Study]+k-1] = 1
		case k == 0 || ks[k] == r.At:
			row[off[r.Study]+k] = 1
		default:
			w := (r.At - ks[k-1]) / (ks[k] - ks[k-1])
			row[off[r.Study]+k-1], row[off[r.Study]+k] = 1-w, w
		}
		rows, ys = append(rows, row), append(ys, math.Log(r.Throughput))
	}
	for _, r := range base.Rounds {
		add(-1, r)
	}
	for i, c := range cs {
		if col[i] >= 0 {
			for _, r := range c.Rounds {
				add(col[i], r)
			}
		}
	}
	f.df = len(rows) - p
	if f.df < 1 {
		return f, false
	}
	x := mat.NewDense(len(rows), p, nil)
	for i, row := range rows {
		x.SetRow(i, row)
	}
	y := mat.NewVecDense(len(ys), ys)
	var xtx mat.SymDense
	xtx.SymOuterK(1, x.T())
	var ch mat.Cholesky
	if !ch.Factorize(&xtx) {
		return f, false
	}
	var xty, beta, fitted mat.VecDense
	xty.MulVec(x.T(), y)
	if err := ch.SolveVecTo(&beta, &xty); err != nil {
		return f, false
	}
	fitted.MulVec(x, &beta)
	rss := 0.0
	for i, v := range ys {
		d := v - fitted.AtVec(i)
		rss += d * d
	}
	var inv mat.SymDense
	if err := ch.InverseTo(&inv); err != nil {
		return f, false
	}
	s2 := rss / float64(f.df)
	for i, j := range col {
		if j >= 0 {
			f.effect[i], f.se[i] = beta.AtVec(j), math.Sqrt(s2*inv.At(j, j))
		}
	}
	return f, true
}

// EstimateGain is EstimateGains of one config.
func EstimateGain(c, base *Candidate) (GainEstimate, bool) {
	g, ok := EstimateGains([]*Candidate{c}, base)
	return g[0], ok[0]
}

// String is the gain as every door prints it, e.g. "+4.2% (98.3% CI +1.0%
// to +7.5% over 3 paired rounds)"; without an interval it says what the
// figure is.
func (g GainEstimate) String() string {
	if g.Level == 0 {
		return fmt.Sprintf("%+.1f%% (medians of %d vs %d runs, no paired rounds)", g.Pct, g.Runs, g.BaseRuns)
	}
	return fmt.Sprintf("%+.1f%% (%s CI %+.1f%% to %+.1f%% over %d paired rounds)", g.Pct, levelText(g.Level), g.LowPct, g.HighPct, g.Rounds)
}

// levelText prints a confidence level without trailing zeros: 95%, 98.3%.
func levelText(l float64) string {
	s := fmt.Sprintf("%.1f", l*100)
	if s[len(s)-2:] == ".0" {
		s = s[:len(s)-2]
	}
	return s + "%"
}

// Verdict says what the gain means for a user: a significant gain, none
// (keep the default), or too few paired rounds to tell.
func (g GainEstimate) Verdict() string {
	switch {
	case g.Significant:
		return "significant gain"
	case g.Level == 0 || g.Rounds < 2:
		return "too few paired rounds to tell a gain from noise (re-measure with --repeats 3 or more)"
	}
	return "no significant gain"
}

// roundOrder is the order in which round r runs the configs ids: vLLM's
// default def first (when among ids), then the others in a seeded order of
// the study rotated by one place each round, so that over as many rounds
// as there are others each runs once at every place: as often early in a
// round as late, whatever the host's drift does, and never the same config
// first in every round (a random order can put the default before the
// winner in every round: issue 26). Each round's run of the default and
// the next round's (or the closing run, roundPlan.next) bracket the
// others' runs for the drift fit (EstimateGains).
func roundOrder(study string, r int, ids []string, def string) []string {
	var others []string
	for _, id := range ids {
		if id != def {
			others = append(others, id)
		}
	}
	slices.Sort(others)
	h := fnv.New64a()
	h.Write([]byte(study))
	rng := rand.New(rand.NewPCG(h.Sum64(), 0))
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	var out []string
	if len(others) < len(ids) {
		out = append(out, def)
	}
	if n := len(others); n > 0 {
		k := ((r-1)%n + n) % n
		out = append(append(out, others[k:]...), others[:k]...)
	}
	return out
}
