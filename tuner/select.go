package tuner

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// Metrics names the objectives a study is judged by: throughput (maximised),
// a latency metric (minimised) and peak VRAM (minimised).
type Metrics struct {
	Throughput string `json:"throughput"` // e.g. output_throughput
	Latency    string `json:"latency"`    // e.g. tpot_p99
}

// DefaultMetrics are output tokens/s against p99 TPOT.
func DefaultMetrics() Metrics {
	return Metrics{Throughput: "output_throughput", Latency: "tpot_p99"}
}

// Objectives returns the three objectives in the order of Point vectors.
func (m Metrics) Objectives() pareto.Objectives {
	return pareto.Objectives{
		{Name: m.Throughput, Direction: pareto.Maximize},
		{Name: m.Latency, Direction: pareto.Minimize},
		{Name: "peak_vram_gib", Direction: pareto.Minimize},
	}
}

// Vector reads the objectives of one result; ok is false for results without
// a measurement.
func (m Metrics) Vector(r *trial.Result) ([]float64, bool) {
	if r == nil || !r.Usable() {
		return nil, false
	}
	out := make([]float64, 0, 3)
	for _, o := range m.Objectives() {
		v, ok := r.Objective(o.Name)
		if !ok || math.IsNaN(v) {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// Stat is a robust summary of repeated measurements of one metric.
type Stat struct {
	Median float64 `json:"median"`
	MAD    float64 `json:"mad"` // median absolute deviation (unscaled)
	N      int     `json:"n"`
}

// Robust summarises xs (not modified).
func Robust(xs []float64) Stat {
	if len(xs) == 0 {
		return Stat{Median: math.NaN(), MAD: math.NaN()}
	}
	med := trial.Median(xs)
	dev := make([]float64, len(xs))
	for i, x := range xs {
		dev[i] = math.Abs(x - med)
	}
	return Stat{Median: med, MAD: trial.Median(dev), N: len(xs)}
}

// Low is the conservative lower estimate median - k*MAD.
func (s Stat) Low(k float64) float64 { return s.Median - k*s.MAD }

// High is the conservative upper estimate median + k*MAD.
func (s Stat) High(k float64) float64 { return s.Median + k*s.MAD }

// Candidate is one config aggregated over all its finished trials.
type Candidate struct {
	ConfigID string        `json:"config_id"`
	Config   spaces.Config `json:"config"`
	Trials   []int         `json:"trials"`              // numbers of the usable trials
	TrialIDs []string      `json:"trial_ids,omitempty"` // their store IDs
	Failed   int           `json:"failed"`              // failed trials of this config
	// Failure is why the first of them failed (its class: oom, ...).
	Failure  trial.FailureClass `json:"failure,omitempty"`
	Unstable int                `json:"unstable,omitempty"` // usable runs that did not reach steady state
	// Remeasured counts the usable runs of the final re-measurement (phase
	// repeat): what makes a config "re-measured", unlike search runs of the
	// same config in several studies (vLLM's default runs first in each).
	Remeasured int `json:"remeasured,omitempty"`
	// Runs are the throughput values of the usable runs, in trial order.
	Runs []float64 `json:"throughput_runs,omitempty"`
	// Rounds are the usable runs of the interleaved re-measurement, by
	// round, which the gain pairs with the default's (EstimateGains).
	Rounds []RoundRun `json:"rounds,omitempty"`
	// VRAMEstimated is true when some run's peak VRAM was estimated from
	// --gpu-memory-utilization (no NVML and no engine gauge).
	VRAMEstimated bool            `json:"vram_estimated,omitempty"`
	Throughput    Stat            `json:"throughput"`
	Latency       Stat            `json:"latency"`
	VRAM          Stat            `json:"vram_gib"`
	SLOValues     map[string]Stat `json:"slo_values,omitempty"`
	// Score is the conservative throughput median - k*MAD.
	Score float64 `json:"score"`
	// ConservativeLatency is median + k*MAD of the latency metric.
	ConservativeLatency float64  `json:"conservative_latency"`
	Feasible            bool     `json:"feasible"`
	Violations          []string `json:"violations,omitempty"`
	// Requests, FailedRequests and TokenMismatches sum the primary levels'
	// measured requests over the usable runs; Overloaded counts the runs
	// whose engine did not keep up with the offered load (infeasible: their
	// latencies grow with the run, they rank nothing).
	Requests        int `json:"requests,omitempty"`
	FailedRequests  int `json:"failed_requests,omitempty"`
	TokenMismatches int `json:"token_mismatches,omitempty"`
	Overloaded      int `json:"overloaded,omitempty"`
	// excess is the summed relative SLO excess of the conservative values
	// (0 when feasible), used to name the closest candidate.
	excess float64
}

// Vector is the candidate's conservative objective vector (throughput low,
// latency high, VRAM median).
func (c *Candidate) Vector() []float64 {
	return []float64{c.Score, c.ConservativeLatency, c.VRAM.Median}
}

// Aggregate groups finished trials by config and summarises each group with
// the robust statistics above; k is the MAD multiplier of the conservative
// estimates. A config that failed in any of its trials is infeasible, as is
// one whose conservative SLO values break a bound. Candidates come in order
// of their first trial.
func Aggregate(trials []store.Trial, slo trial.SLO, m Metrics, k float64) []Candidate {
	type acc struct {
		c       Candidate
		tp, lat []float64
		vram    []float64
		slo     map[string][]float64
	}
	byID := map[string]*acc{}
	var order []string
	at := roundTimes(trials)
	for i := range trials {
		t := &trials[i]
		if !t.State.Measured() || t.Result == nil {
			continue
		}
		id := t.ConfigKey()
		a := byID[id]
		if a == nil {
			a = &acc{c: Candidate{ConfigID: id, Config: t.Config}, slo: map[string][]float64{}}
			byID[id] = a
			order = append(order, id)
		}
		v, ok := m.Vector(t.Result)
		if !ok {
			a.c.Failed++
			if a.c.Failure == "" {
				a.c.Failure = t.Result.Failure
			}
			continue
		}
		a.c.Trials = append(a.c.Trials, int(t.Seq))
		if t.State == store.StateUnstable {
			a.c.Unstable++
		}
		if t.Repeat > 0 {
			a.c.Remeasured++
			a.c.Rounds = append(a.c.Rounds, RoundRun{Study: studyOfTrial(t.ID), Round: t.Repeat, At: at[i], Throughput: v[0]})
		}
		if t.Result.VRAMSource == VRAMEstimate {
			a.c.VRAMEstimated = true
		}
		if t.ID != "" {
			a.c.TrialIDs = append(a.c.TrialIDs, t.ID)
		}
		a.tp, a.lat, a.vram = append(a.tp, v[0]), append(a.lat, v[1]), append(a.vram, v[2])
		if pm := t.Result.Metrics(); pm != nil {
			a.c.Requests += pm.Completed + pm.Failed
			a.c.FailedRequests += pm.Failed
			a.c.TokenMismatches += pm.TokenMismatches
			if pm.Overloaded {
				a.c.Overloaded++
			}
			for _, b := range slo.Effective() {
				x, _ := pm.Value(b.Metric)
				a.slo[b.Metric] = append(a.slo[b.Metric], x)
			}
		}
	}
	out := make([]Candidate, 0, len(order))
	for _, id := range order {
		a := byID[id]
		c := a.c
		c.Throughput, c.Latency, c.VRAM = Robust(a.tp), Robust(a.lat), Robust(a.vram)
		c.Runs = a.tp
		c.Score, c.ConservativeLatency = c.Throughput.Low(k), c.Latency.High(k)
		c.Feasible = len(c.Trials) > 0 && c.Failed == 0
		if len(c.Trials) == 0 {
			c.Violations = append(c.Violations, "no usable measurement")
			c.excess = math.Inf(1)
		} else if c.Failed > 0 {
			c.Violations = append(c.Violations, fmt.Sprintf("failed in %d of %d trials", c.Failed, c.Failed+len(c.Trials)))
			c.excess += float64(c.Failed)
		}
		if c.Overloaded > 0 {
			c.Feasible = false
			c.Violations = append(c.Violations, fmt.Sprintf("overloaded in %d of %d runs (the offered load exceeds its capacity)", c.Overloaded, len(c.Trials)))
			c.excess += 1
		}
		if len(a.tp) > 0 {
			c.SLOValues = map[string]Stat{}
			for _, b := range slo.Effective() {
				st := Robust(a.slo[b.Metric])
				c.SLOValues[b.Metric] = st
				v := st.High(k)
				if b.Op == ">=" || b.Op == ">" {
					v = st.Low(k)
				}
				if !b.Holds(v) {
					c.Feasible = false
					u := chart.Unit(b.Metric)
					if u != "" {
						u = " " + u
					}
					c.Violations = append(c.Violations, fmt.Sprintf("%s=%.4g%s (want %s %.4g%s)", b.Metric, v, u, b.Op, b.Limit, u))
					c.excess += relExcess(b, v)
				}
			}
		}
		out = append(out, c)
	}
	return out
}

// Warnings name what a recommendation of c should not hide: failed
// requests (allowed by the SLO's error_rate bound but not none) and
// outputs shorter than asked (a server ignoring ignore_eos: the runs
// measured shorter requests than the workload's).
func (c *Candidate) Warnings() []string {
	var out []string
	if c.FailedRequests > 0 {
		out = append(out, fmt.Sprintf("%d of %d measured requests failed (%.2g%%)", c.FailedRequests, c.Requests, 100*float64(c.FailedRequests)/float64(max(1, c.Requests))))
	}
	if c.TokenMismatches > 0 {
		out = append(out, fmt.Sprintf("%d requests returned fewer output tokens than asked for although ignore_eos was set: the server stopped early, the throughput counts shorter requests than the workload's", c.TokenMismatches))
	}
	return out
}

func relExcess(b trial.Bound, v float64) float64 {
	d := math.Abs(v - b.Limit)
	if b.Limit != 0 {
		d /= math.Abs(b.Limit)
	}
	return d
}

// VRAMEstimate is trial.Result.VRAMSource of a peak VRAM estimated from
// --gpu-memory-utilization times the GPU's memory, not measured.
const VRAMEstimate = "estimate"

// Prefer says which feasible config Recommend picks.
type Prefer string

const (
	PreferThroughput Prefer = "throughput" // highest conservative throughput
	PreferLatency    Prefer = "latency"    // lowest conservative latency
	PreferVRAM       Prefer = "vram"       // lowest peak VRAM
	PreferKnee       Prefer = "knee"       // the front's compromise point
)

// ParsePrefer validates a preference name.
func ParsePrefer(s string) (Prefer, error) {
	switch p := Prefer(strings.ToLower(s)); p {
	case PreferThroughput, PreferLatency, PreferVRAM, PreferKnee:
		return p, nil
	case "":
		return PreferThroughput, nil
	}
	return "", fmt.Errorf("--prefer %q: want throughput, latency, vram or knee", s)
}

// ErrNoFeasible is wrapped by InfeasibleError.
var ErrNoFeasible = errors.New("no config meets the SLOs")

// InfeasibleError says that no candidate meets the SLOs and which one came
// closest, with the bounds it breaks.
type InfeasibleError struct {
	SLO     trial.SLO
	Closest *Candidate // nil when no trial produced a measurement
}

func (e *InfeasibleError) Error() string {
	var b strings.Builder
	b.WriteString(ErrNoFeasible.Error())
	if len(e.SLO) > 0 {
		fmt.Fprintf(&b, " %s", e.SLO)
	}
	if e.Closest == nil {
		b.WriteString(": no trial produced a measurement")
		return b.String()
	}
	trials := strings.Join(e.Closest.TrialIDs, ",")
	if len(e.Closest.TrialIDs) != len(e.Closest.Trials) {
		trials = joinInts(e.Closest.Trials)
	}
	fmt.Fprintf(&b, ": closest is config %s (trial %s): %s", e.Closest.ConfigID, trials, strings.Join(e.Closest.Violations, ", "))
	return b.String()
}

func (e *InfeasibleError) Unwrap() error { return ErrNoFeasible }

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// Front returns the indices of the feasible candidates that no other
// feasible candidate dominates on their conservative vectors.
func Front(cands []Candidate, m Metrics) []int {
	pts := make([][]float64, len(cands))
	keep := make([]bool, len(cands))
	for i := range cands {
		pts[i] = cands[i].Vector()
		keep[i] = cands[i].Feasible
	}
	return pareto.FrontMasked(pts, m.Objectives().Directions(), keep)
}

// Recommend picks one feasible candidate by preference. When none is
// feasible the error is an *InfeasibleError naming the closest candidate.
func Recommend(cands []Candidate, m Metrics, slo trial.SLO, prefer Prefer) (*Candidate, error) {
	var feas []int
	for i := range cands {
		if cands[i].Feasible {
			feas = append(feas, i)
		}
	}
	if len(feas) == 0 {
		var closest *Candidate
		for i := range cands {
			c := &cands[i]
			if len(c.Trials) == 0 {
				continue
			}
			if closest == nil || c.excess < closest.excess {
				closest = c
			}
		}
		return nil, &InfeasibleError{SLO: slo, Closest: closest}
	}
	better := func(a, b *Candidate) bool { // a strictly better than b
		switch prefer {
		case PreferLatency:
			if a.ConservativeLatency != b.ConservativeLatency {
				return a.ConservativeLatency < b.ConservativeLatency
			}
		case PreferVRAM:
			if a.VRAM.Median != b.VRAM.Median {
				return a.VRAM.Median < b.VRAM.Median
			}
		}
		if a.Score != b.Score {
			return a.Score > b.Score
		}
		return a.ConservativeLatency < b.ConservativeLatency
	}
	if prefer == PreferKnee {
		front := Front(cands, m)
		pts := make([][]float64, len(front))
		for i, j := range front {
			pts[i] = cands[j].Vector()
		}
		if k := pareto.Knee(pts, m.Objectives().Directions(), nil); k >= 0 {
			return &cands[front[k]], nil
		}
	}
	best := &cands[feas[0]]
	for _, i := range feas[1:] {
		if better(&cands[i], best) {
			best = &cands[i]
		}
	}
	return best, nil
}

// Gain is the relative throughput gain of c over base in percent (median
// against median); ok is false when either has no measurement.
func Gain(c, base *Candidate) (float64, bool) {
	if c == nil || base == nil || base.Throughput.N == 0 || c.Throughput.N == 0 || base.Throughput.Median <= 0 {
		return 0, false
	}
	return (c.Throughput.Median/base.Throughput.Median - 1) * 100, true
}

// RecommendMeasured is Recommend that trusts re-measured configs first: when
// some feasible candidate went through a final re-measurement, only such
// candidates compete (a lucky single run does not win); otherwise all do.
// Several search runs of one config do not count as re-measurement: across
// studies vLLM's default has one per study, and would otherwise be the only
// candidate.
func RecommendMeasured(cands []Candidate, m Metrics, slo trial.SLO, prefer Prefer) (*Candidate, error) {
	var multi []Candidate
	for _, c := range cands {
		if c.Feasible && c.Remeasured > 0 {
			multi = append(multi, c)
		}
	}
	if len(multi) > 0 {
		return Recommend(multi, m, slo, prefer)
	}
	return Recommend(cands, m, slo, prefer)
}

// roundTimes is, for each re-measurement trial of trials (by index), when
// it measured in seconds into its study's re-measurement: the durations of
// the study's re-measurement runs before it (in trial order) plus its own
// startup and half its measurement. A run's duration is the one it
// reports (Result.Phases, simulated time on the virtual clock), else its
// wall time.
func roundTimes(trials []store.Trial) map[int]float64 {
	var idx []int
	for i, t := range trials {
		if t.Repeat > 0 {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(trials[a].Seq, trials[b].Seq) })
	clock := map[string]float64{}
	out := make(map[int]float64, len(idx))
	for _, i := range idx {
		t := &trials[i]
		study := studyOfTrial(t.ID)
		total, startup := 0.0, 0.0
		if t.Result != nil {
			total, startup = t.Result.Phases.TotalS, t.Result.Phases.StartupS
		}
		if total <= 0 && t.Ended.After(t.Started) {
			total = t.Ended.Sub(t.Started).Seconds()
		}
		startup = min(max(startup, 0), total)
		out[i] = clock[study] + (startup+total)/2
		clock[study] += total
	}
	return out
}

// studyOfTrial is the study of a stored trial ID ("" for an ID that is not
// a store's, e.g. a test's).
func studyOfTrial(id string) string {
	sid, _, err := store.ParseTrialID(id)
	if err != nil {
		return ""
	}
	return sid
}
