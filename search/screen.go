package search

import (
	"context"
	"math"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
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

// acquisition ranks predictions: feasibility probability x hypervolume
// improvement of the optimistic prediction (mean + k std in the improving
// direction) over the current feasible front, in normalised space. When no
// candidate improves the front, the augmented Chebyshev value of the
// optimistic prediction under the ask's weights, scaled by the feasibility
// probability, breaks the tie. It returns the index of the best candidate.
func acquisition(preds []Prediction, front [][]float64, sc scalariser, k float64) int {
	d := len(sc.weights)
	dirs := minDirs(d)
	ref := make([]float64, d)
	for j := range ref {
		ref[j] = hvRef
	}
	base, _ := pareto.Hypervolume(front, dirs, ref)
	best, bestHVI, bestTie := -1, 0.0, math.Inf(-1)
	for i, p := range preds {
		if len(p.Mean) != d {
			continue
		}
		y := sc.norm.apply(p.Mean)
		for j := range y {
			if j < len(p.Std) && p.Std[j] > 0 {
				y[j] -= k * p.Std[j] / (sc.norm.hi[j] - sc.norm.lo[j])
			}
		}
		pf := math.Max(0, math.Min(1, p.PFeasible))
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
		tie := pf * (failScore - (cheb + parEGORho*sum))
		if hvi > bestHVI || (hvi == bestHVI && tie > bestTie) {
			best, bestHVI, bestTie = i, hvi, tie
		}
	}
	return best
}
