package search

import (
	"context"
	"math"
	"slices"
	"sort"

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
// top (may be nil) keeps the best scores seen across calls: see hviTop.
func acquisition(preds []Prediction, front [][]float64, sc scalariser, k, kf float64, ref []float64, top *hviTop) []acqScore {
	d := len(sc.weights)
	dirs := minDirs(d)
	if len(ref) != d {
		ref = make([]float64, d)
		for j := range ref {
			ref[j] = hvRef
		}
	}
	out := make([]acqScore, len(preds))
	ys := make([][]float64, len(preds))
	pfs := make([]float64, len(preds))
	bound := make([]float64, len(preds))
	order := make([]int, 0, len(preds))
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
		cheb, sum := math.Inf(-1), 0.0
		for j, x := range y {
			cheb = math.Max(cheb, sc.weights[j]*x)
			sum += sc.weights[j] * x
		}
		out[i] = acqScore{hvi: 0, tie: pf * (failScore - (cheb + parEGORho*sum))}
		ys[i], pfs[i], bound[i] = y, pf, pf*hviBound(front, y, ref)*(1+1e-9)+1e-300
		order = append(order, i)
	}
	// Largest bound first: once a candidate's bound is below the kept best,
	// its gain cannot reach them and the sweep is skipped. On a front of hundreds of members the sweeps were
	// most of an Ask; what the caller reads (the best few) is unchanged.
	sort.SliceStable(order, func(a, b int) bool { return bound[order[a]] > bound[order[b]] })
	for _, i := range order {
		if top.excludes(bound[i]) {
			out[i] = acqScore{hvi: -0.5, tie: math.Inf(-1)}
			continue
		}
		if hvi, err := pareto.Contribution(front, ys[i], dirs, ref); err == nil { // 0 when weakly dominated
			out[i].hvi = hvi * pfs[i]
		}
		top.add(out[i].hvi)
	}
	return out
}

// hviBound bounds the hypervolume y adds to front (minimisation space, ref
// the reference point): the volume of y's own box less the largest part of
// it one front member dominates, O(front) where the sweep is O(front log
// front) with allocations. Zero when a member weakly dominates y.
func hviBound(front [][]float64, y, ref []float64) float64 {
	vol := func(lo func(j int) float64) float64 {
		v := 1.0
		for j := range y {
			v *= math.Max(0, ref[j]-lo(j))
		}
		return v
	}
	own := vol(func(j int) float64 { return y[j] })
	covered := 0.0
	for _, f := range front {
		covered = math.Max(covered, vol(func(j int) float64 { return math.Max(f[j], y[j]) }))
	}
	return math.Max(0, own-covered)
}

// hviTop keeps the n largest gains scored so far in one screening. A
// candidate whose bound is below the n-th cannot enter the n best, which are
// all the screening reads (the refinement's parents and the winner), so its
// sweep can be skipped; it then scores below every swept candidate. A nil
// *hviTop skips nothing.
type hviTop struct {
	n    int
	vals []float64 // ascending, at most n
}

func (t *hviTop) add(v float64) {
	if t == nil {
		return
	}
	i, _ := slices.BinarySearch(t.vals, v)
	t.vals = slices.Insert(t.vals, i, v)
	if len(t.vals) > t.n {
		t.vals = t.vals[1:]
	}
}

// excludes reports whether a gain of at most bound cannot enter the n best.
func (t *hviTop) excludes(bound float64) bool {
	return t != nil && len(t.vals) == t.n && t.n > 0 && bound < t.vals[0]
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
// tighter than hvRef (NaN coordinates are hvRef): the screening's reference.
// Screening against exactRef instead (with bisection on it) lost HV@8 and
// HV@24.
// Measurements: docs/search-log.md, "normRef".
func normRef(raw []float64, norm normaliser) []float64 {
	out := exactRef(raw, norm)
	for j := range out {
		out[j] = math.Max(hvRef, out[j])
	}
	return out
}

// exactRef maps a fixedRef point into the scalariser's normalised space as it
// is (NaN coordinates are hvRef), so a box against it is proportional to the
// box against the raw point: what a study's front is judged by. A latency
// limit inside the history's range (an infeasible trial measured above it)
// stays where it is.
func exactRef(raw []float64, norm normaliser) []float64 {
	if raw == nil {
		return nil
	}
	out := make([]float64, len(raw))
	for j, r := range raw {
		out[j] = hvRef
		if !math.IsNaN(r) {
			out[j] = (r*norm.sign[j] - norm.lo[j]) / (norm.hi[j] - norm.lo[j])
		}
	}
	return out
}
