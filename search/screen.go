package search

import (
	"context"
	"math"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// Prediction is a model's view of one candidate config.
type Prediction struct {
	// Mean and Std are per objective, in the objectives' own units and in
	// ProposerConfig.Objectives order (Std is the ensemble spread).
	Mean []float64 `json:"mean"`
	Std  []float64 `json:"std"`
	// PFeasible is the probability that the config starts and meets the SLO.
	PFeasible float64 `json:"p_feasible"`
}

// Scorer predicts candidates; the surrogate implements it (see
// SurrogateScorer). One prediction per candidate, in order.
type Scorer interface {
	Score(ctx context.Context, cands []spaces.Config) ([]Prediction, error)
}

// Fitter is implemented by scorers that learn from the history; Proposer
// calls Fit before scoring when new observations arrived
// (ProposerConfig.RefitEvery).
type Fitter interface {
	Fit(ctx context.Context, history []Observation) error
}

// ScorerFunc adapts a function to Scorer.
type ScorerFunc func(ctx context.Context, cands []spaces.Config) ([]Prediction, error)

func (f ScorerFunc) Score(ctx context.Context, cands []spaces.Config) ([]Prediction, error) {
	return f(ctx, cands)
}

var _ Scorer = ScorerFunc(nil)

// hvRef is the reference point of hypervolumes in normalised space (the
// worst point of the history is 1 in every coordinate).
const hvRef = 1.1

// acqScore is a candidate's acquisition value: hvi first, tie second.
type acqScore struct{ hvi, tie float64 }

func (a acqScore) better(b acqScore) bool {
	return a.hvi > b.hvi || (a.hvi == b.hvi && a.tie > b.tie)
}

// acquisition scores predictions: feasibility probability to the power kf x
// hypervolume improvement of the optimistic prediction (mean + k std in the
// improving direction) over the current feasible front, in normalised space. When no
// candidate improves the front, the augmented Chebyshev value of the
// optimistic prediction under the ask's weights, scaled by the feasibility
// probability, breaks the tie. Predictions of the wrong length score worst.
// ref is the normalised reference point (nil: hvRef in every coordinate).
func acquisition(preds []Prediction, front [][]float64, sc scalariser, k, kf float64, ref []float64) []acqScore {
	d := len(sc.weights)
	dirs := minDirs(d)
	if len(ref) != d {
		ref = make([]float64, d)
		for j := range ref {
			ref[j] = hvRef
		}
	}
	base, _ := pareto.Hypervolume(front, dirs, ref)
	out := make([]acqScore, len(preds))
	for i, p := range preds {
		out[i] = acqScore{hvi: -1, tie: math.Inf(-1)}
		if len(p.Mean) != d {
			continue
		}
		y := sc.norm.apply(p.Mean)
		for j := range y {
			if j < len(p.Std) && p.Std[j] > 0 {
				y[j] -= k * p.Std[j] / (sc.norm.hi[j] - sc.norm.lo[j])
			}
		}
		pf := math.Pow(math.Max(0, math.Min(1, p.PFeasible)), kf)
		hv, err := pareto.Hypervolume(append(front[:len(front):len(front)], y), dirs, ref)
		hvi := 0.0
		if err == nil {
			hvi = math.Max(0, hv-base) * pf
		}
		cheb, sum := math.Inf(-1), 0.0
		for j, x := range y {
			cheb = math.Max(cheb, sc.weights[j]*x)
			sum += sc.weights[j] * x
		}
		out[i] = acqScore{hvi: hvi, tie: pf * (failScore - (cheb + parEGORho*sum))}
	}
	return out
}

// best returns the index of the best score (-1 for none).
func best(scores []acqScore) int {
	b := -1
	for i, s := range scores {
		if b < 0 || s.better(scores[b]) {
			b = i
		}
	}
	return b
}

// fixedRef is the natural worst point of the objectives, in their own units
// (NaN where there is none): 0 for a maximised objective, the loosest SLO
// limit of a minimised one, all GPU memory of the target for peak VRAM.
// Hypervolume gains measured against it (rather than against the worst
// trial seen so far) value the ends of the front, the low-latency and
// low-memory configs, as the final front's hypervolume does.
func fixedRef(objs pareto.Objectives, slo trial.SLO, t *spaces.Target) []float64 {
	ref := make([]float64, len(objs))
	for j, o := range objs {
		ref[j] = math.NaN()
		switch {
		case o.Direction == pareto.Maximize:
			ref[j] = 0
		case o.Name == "peak_vram_gib":
			if t != nil && t.GPU.MemoryGiB > 0 {
				ref[j] = t.GPU.MemoryGiB * float64(max(1, t.GPUCount))
			}
		default:
			for _, b := range slo {
				if b.Metric == o.Name && (b.Op == "<=" || b.Op == "<") && !(ref[j] >= b.Limit) {
					ref[j] = b.Limit
				}
			}
		}
	}
	return ref
}

// normRef maps a fixedRef point into the scalariser's normalised space, never
// tighter than hvRef (NaN coordinates are hvRef).
func normRef(raw []float64, norm normaliser) []float64 {
	if raw == nil {
		return nil
	}
	out := make([]float64, len(raw))
	for j, r := range raw {
		out[j] = hvRef
		if !math.IsNaN(r) {
			out[j] = math.Max(hvRef, (r*norm.sign[j]-norm.lo[j])/(norm.hi[j]-norm.lo[j]))
		}
	}
	return out
}
