package search

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// Observation is one measured (or failed) trial of the history.
type Observation struct {
	Config spaces.Config `json:"config"`
	Result *trial.Result `json:"result"`
	// Weight is how much the trial says about this study's context: 1 for
	// the same model, GPU, engine version and workload, less for similar
	// contexts. The zero value counts as 1.
	Weight float64 `json:"weight,omitempty"`
	// Target and Workload name the trial's context when it differs from
	// the study's (nil: the study's own); the surrogate's context features
	// use them to transfer across models, GPUs and workloads.
	Target   *spaces.Target  `json:"target,omitempty"`
	Workload *trial.Workload `json:"workload,omitempty"`
}

func (o Observation) weight() float64 {
	if o.Weight <= 0 {
		return 1
	}
	return min(o.Weight, 1)
}

// Latency metrics a study may minimise.
var LatencyMetrics = []string{"ttft_p99", "tpot_p99", "itl_p99", "e2el_p99"}

// ValidateLatency checks a --latency value.
func ValidateLatency(name string) error {
	for _, m := range LatencyMetrics {
		if m == name {
			return nil
		}
	}
	return fmt.Errorf("latency metric %q: want one of %v", name, LatencyMetrics)
}

// outcome is an observation seen through the study's objectives and SLO.
type outcome struct {
	vals      []float64 // objective values in their own units (nil when failed)
	failed    bool      // no usable measurement
	failure   trial.FailureClass
	feasible  bool    // usable and SLO met
	violation float64 // relative SLO excess, summed over bounds (0 when met)
}

// evaluate reads an observation's objectives and SLO verdict.
func evaluate(o Observation, objs pareto.Objectives, slo trial.SLO) outcome {
	r := o.Result
	if r == nil || !r.Usable() || r.Metrics() == nil {
		out := outcome{failed: true}
		if r != nil {
			out.failure = r.Failure
		}
		return out
	}
	vals := make([]float64, len(objs))
	for i, ob := range objs {
		v, ok := r.Objective(ob.Name)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			return outcome{failed: true, failure: r.Failure}
		}
		vals[i] = v
	}
	viol := slo.Violation(r.Metrics()) // 0 exactly where Check holds
	return outcome{vals: vals, feasible: viol == 0, violation: viol}
}

// normaliser maps objective vectors to minimisation space scaled to [0, 1]
// over a reference set (0 best, 1 worst of the set).
type normaliser struct {
	sign   []float64
	lo, hi []float64
}

func newNormaliser(objs pareto.Objectives, vecs [][]float64) normaliser {
	n := normaliser{sign: make([]float64, len(objs)), lo: make([]float64, len(objs)), hi: make([]float64, len(objs))}
	for j, o := range objs {
		n.sign[j] = 1
		if o.Direction == pareto.Maximize {
			n.sign[j] = -1
		}
		n.lo[j], n.hi[j] = math.Inf(1), math.Inf(-1)
	}
	for _, v := range vecs {
		for j := range objs {
			x := v[j] * n.sign[j]
			n.lo[j], n.hi[j] = min(n.lo[j], x), max(n.hi[j], x)
		}
	}
	for j := range objs {
		if math.IsInf(n.lo[j], 0) {
			n.lo[j], n.hi[j] = 0, 1
		}
		if n.hi[j]-n.lo[j] < 1e-12*math.Max(1, math.Abs(n.hi[j])) {
			// A constant objective: give it a unit span so it neither divides
			// by zero nor dominates the scalarisation.
			n.hi[j] = n.lo[j] + math.Max(1e-9, math.Abs(n.lo[j])*1e-3)
		}
	}
	return n
}

// apply returns v normalised (may leave [0, 1] for points outside the set).
func (n normaliser) apply(v []float64) []float64 {
	out := make([]float64, len(v))
	for j := range v {
		out[j] = (v[j]*n.sign[j] - n.lo[j]) / (n.hi[j] - n.lo[j])
	}
	return out
}

// minDirs is "minimise everything", the directions of normalised vectors.
func minDirs(d int) []pareto.Direction {
	out := make([]pareto.Direction, d)
	for i := range out {
		out[i] = pareto.Minimize
	}
	return out
}

// Penalties of the scalarisation: every feasible point scores at most
// 1 + rho, an SLO violation adds feasibleCap + min(violation, maxViolation),
// a failure scores worse than any violation.
const (
	parEGORho    = 0.05
	feasibleCap  = 1 + parEGORho
	maxViolation = 10.0
	failScore    = feasibleCap + maxViolation + 1
)

// scalariser is one ParEGO draw: an augmented Chebyshev function of the
// normalised objectives with a weight vector on the simplex.
type scalariser struct {
	norm    normaliser
	weights []float64
}

// randomWeights draws a weight vector uniformly from the simplex.
func randomWeights(r *rand.Rand, d int) []float64 {
	w := make([]float64, d)
	sum := 0.0
	for i := range w {
		w[i] = r.ExpFloat64()
		sum += w[i]
	}
	for i := range w {
		w[i] /= sum
	}
	return w
}

// value scalarises one outcome (lower is better).
func (s scalariser) value(o outcome) float64 {
	if o.failed {
		return failScore
	}
	cheb, sum := math.Inf(-1), 0.0
	for j, v := range o.vals {
		x := (v*s.norm.sign[j] - s.norm.lo[j]) / (s.norm.hi[j] - s.norm.lo[j])
		x = math.Max(0, math.Min(1, x))
		cheb = math.Max(cheb, s.weights[j]*x)
		sum += s.weights[j] * x
	}
	v := cheb + parEGORho*sum
	if !o.feasible {
		v = feasibleCap + math.Min(o.violation, maxViolation)
	}
	return v
}
