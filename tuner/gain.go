package tuner

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"
)

// RoundRun is one throughput measurement of the final re-measurement: the
// round it ran in (Trial.Repeat of a repeat trial) within its study. Every
// config of a round runs once, in a random order, so the runs of one round
// saw the same stretch of the host's time and pair up.
type RoundRun struct {
	Study      string  `json:"study,omitempty"`
	Round      int     `json:"round"`
	Throughput float64 `json:"throughput"`
}

// GainLevel is the confidence of the gain's verdict over all the configs
// compared with vLLM's default: each config's interval is at
// 1 - (1-GainLevel)/k for k compared configs (Bonferroni), because the
// recommendation is the best of several and the best of several noisy
// estimates looks better than it is.
const GainLevel = 0.95

// GainEstimate is the throughput gain of a config over vLLM's default, a
// paired analysis of the interleaved rounds: in each round both ran, close
// in time, in a random order, so the ratio of their throughputs cancels
// the host's drift; the interval is Student's over the rounds' log ratios
// with the spread pooled over every compared config.
type GainEstimate struct {
	// Pct is the gain in percent: the geometric mean of the rounds'
	// ratios, or of the medians when no round pairs them.
	Pct float64 `json:"pct"`
	// LowPct and HighPct bound the gain at Level (0 when no interval).
	LowPct  float64 `json:"low_pct"`
	HighPct float64 `json:"high_pct"`
	Level   float64 `json:"level"`
	// Rounds is the number of paired rounds; Compared the configs whose
	// gains were judged together (the interval's Bonferroni divisor).
	Rounds   int `json:"rounds"`
	Compared int `json:"compared,omitempty"`
	// Runs and BaseRuns count the usable runs of the config and the
	// default (search trials included).
	Runs     int `json:"runs"`
	BaseRuns int `json:"base_runs"`
	// Significant is true when the interval lies above zero.
	Significant bool `json:"significant"`
}

// pairedLogRatios are the log throughput ratios of c over base in the
// rounds both measured (one per study and round; a round a config ran
// twice in, after an interrupted claim, keeps its last run).
func pairedLogRatios(c, base *Candidate) []float64 {
	type key struct {
		study string
		round int
	}
	b := map[key]float64{}
	for _, r := range base.Rounds {
		b[key{r.Study, r.Round}] = r.Throughput
	}
	seen := map[key]int{}
	var out []float64
	for _, r := range c.Rounds {
		k := key{r.Study, r.Round}
		y, ok := b[k]
		if !ok || y <= 0 || r.Throughput <= 0 {
			continue
		}
		x := math.Log(r.Throughput / y)
		if i, dup := seen[k]; dup {
			out[i] = x
			continue
		}
		seen[k] = len(out)
		out = append(out, x)
	}
	return out
}

// EstimateGains judges the configs cs against base together: the paired
// log ratios of each, their spread pooled over all (the host's noise is
// the same for every config), each interval at GainLevel split over the
// configs that have paired rounds. The result is in cs's order; ok[i] is
// false when cs[i] or base has no measurement.
func EstimateGains(cs []*Candidate, base *Candidate) ([]GainEstimate, []bool) {
	out, ok := make([]GainEstimate, len(cs)), make([]bool, len(cs))
	logs := make([][]float64, len(cs))
	var ss float64 // pooled sum of squares about each config's mean
	df, compared := 0, 0
	for i, c := range cs {
		pct, has := Gain(c, base)
		if !has {
			continue
		}
		ok[i] = true
		out[i] = GainEstimate{Pct: pct, Runs: c.Throughput.N, BaseRuns: base.Throughput.N}
		logs[i] = pairedLogRatios(c, base)
		if n := len(logs[i]); n > 0 {
			m := mean(logs[i])
			for _, x := range logs[i] {
				ss += (x - m) * (x - m)
			}
			df += n - 1
			compared++
		}
	}
	if df == 0 {
		return out, ok
	}
	sd := math.Sqrt(ss / float64(df))
	level := 1 - (1-GainLevel)/float64(compared)
	tq := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(df)}.Quantile(1 - (1-level)/2)
	for i, xs := range logs {
		n := len(xs)
		if n == 0 {
			continue
		}
		m := mean(xs)
		h := tq * sd / math.Sqrt(float64(n))
		g := &out[i]
		g.Pct, g.LowPct, g.HighPct = math.Expm1(m)*100, math.Expm1(m-h)*100, math.Expm1(m+h)*100
		g.Level, g.Rounds, g.Compared = level, n, compared
		g.Significant = n >= 2 && g.LowPct > 0
	}
	return out, ok
}

// EstimateGain is EstimateGains of one config.
func EstimateGain(c, base *Candidate) (GainEstimate, bool) {
	g, ok := EstimateGains([]*Candidate{c}, base)
	return g[0], ok[0]
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
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

// roundOrder is the order in which round r runs the configs ids: a
// permutation seeded by the study and the round, so that no config always
// runs first (after the engine of another) or in the same stretch of the
// host's time as the default.
func roundOrder(study string, r int, ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	h := fnv.New64a()
	h.Write([]byte(study))
	rng := rand.New(rand.NewPCG(h.Sum64(), uint64(r)))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
