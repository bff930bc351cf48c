package search

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
)

// ErrNotFitted is returned by SurrogateScorer.Score before a successful Fit.
var ErrNotFitted = errors.New("surrogate not trained yet")

// SurrogateScorer screens candidates with package surrogate: each Fit
// retrains the bagged GBDT ensemble (one model per objective and SLO
// metric, plus the start-up feasibility classifier) on the whole history,
// other contexts included through their Target and Workload. PFeasible is
// P(starts) x P(meets every SLO bound): P(starts) the classifier's times
// memoryFit's (from the study's own memory failures), P(meets a bound) from
// the ensemble mean and spread (the spread floored at SpreadFloor of the
// mean, as a bagged ensemble underestimates its error on few samples).
//
// What a better model could gain is measured by tuner eval search
// --strategies tuner-oracle (the same proposals screened with the truth).
// Measurements: docs/search-log.md, "SurrogateScorer".
type SurrogateScorer struct {
	target     spaces.Target
	workload   trial.Workload
	schema     *surrogate.Schema
	objectives pareto.Objectives
	slo        trial.SLO
	opts       surrogate.Options
	// SpreadFloor is the minimum relative std used for SLO probabilities.
	SpreadFloor float64

	mu     sync.Mutex
	model  *surrogate.Surrogate
	objIdx []int // surrogate objective index per study objective
	sloIdx []int // surrogate objective index per SLO bound
	own    int   // measured trials of the study's own context at the last fit
	mem    memoryFit

	prior *priorModel
}

// priorModel is a model trained elsewhere (a fleet's history, XGBoost in
// Python) that steers the search until the study's own history outweighs it.
type priorModel struct {
	model  *surrogate.Surrogate
	weight float64 // in trials of the study's own context
	objIdx []int   // prior objective index per study objective (-1: not predicted)
	sloIdx []int   // prior objective index per SLO bound (-1: not predicted)
}

var (
	_ Scorer = (*SurrogateScorer)(nil)
	_ Fitter = (*SurrogateScorer)(nil)
)

// NewSurrogateScorer builds a scorer for a resolved space's target and the
// study's workload, objectives and SLO. opts.Objectives is replaced: the
// surrogate predicts exactly the study objectives and the SLO metrics
// (throughput, TPOT p99 and VRAM as log-ratios to their roofline estimates,
// other metrics as logs).
func NewSurrogateScorer(space *spaces.Space, w trial.Workload, objs pareto.Objectives, slo trial.SLO, opts surrogate.Options) (*SurrogateScorer, error) {
	t := space.Target()
	if t == nil {
		return nil, fmt.Errorf("%w: the surrogate needs a resolved space", ErrConfig)
	}
	if len(objs) == 0 {
		objs = store.DefaultObjectives("")
	}
	s := &SurrogateScorer{target: *t, workload: w, schema: surrogate.NewSchema(space), objectives: objs, slo: slo, opts: opts, SpreadFloor: 0.1}
	known := map[string]surrogate.Objective{}
	for _, o := range surrogate.DefaultObjectives() {
		known[o.Metric] = o
	}
	var sobjs []surrogate.Objective
	index := func(metric string) int {
		for i, o := range sobjs {
			if o.Metric == metric {
				return i
			}
		}
		o, ok := known[metric]
		if !ok {
			o = surrogate.ObjectiveFor(metric)
		}
		sobjs = append(sobjs, o)
		return len(sobjs) - 1
	}
	for _, o := range objs {
		s.objIdx = append(s.objIdx, index(o.Name))
	}
	for _, b := range slo {
		s.sloIdx = append(s.sloIdx, index(b.Metric))
	}
	s.opts.Objectives = sobjs
	if s.opts.Members <= 0 {
		d := surrogate.DefaultOptions()
		d.Objectives = sobjs
		d.Seed = opts.Seed
		s.opts = d
	}
	return s, nil
}

// ErrPriorSchema is returned by SetPrior for a model that cannot read this
// study's configs.
var ErrPriorSchema = errors.New("prior model does not fit the search space")

// DefaultPriorWeight is the number of the study's own measured trials at
// which a prior model and the study's own surrogate weigh the same.
const DefaultPriorWeight = 8

// SetPrior makes m the scorer's prior: until the first fit it scores alone;
// afterwards each prediction is the mix weight/(weight+n) prior and
// n/(weight+n) own surrogate, n being the study's own measured trials, so the
// prior steers the first trials and fades as the history grows. The prior
// must read this space: every parameter feature of its schema names a
// parameter of the space, and it must predict every objective and SLO
// metric of the study to score alone (otherwise it only joins the mix for
// the metrics it has, once the study's own model exists).
func (s *SurrogateScorer) SetPrior(m *surrogate.Surrogate, weight float64, space *spaces.Space) error {
	if m == nil || m.Schema == nil {
		return fmt.Errorf("%w: no model", ErrPriorSchema)
	}
	if m.Schema.Version != surrogate.SchemaVersion {
		return fmt.Errorf("%w: schema version %d, this tuner's is %d", ErrPriorSchema, m.Schema.Version, surrogate.SchemaVersion)
	}
	for _, f := range m.Schema.Features {
		name, ok := strings.CutPrefix(f.Source, "param:")
		if !ok {
			continue
		}
		if _, ok := space.Param(name); !ok {
			return fmt.Errorf("%w: feature %q reads parameter %q, which the space does not have", ErrPriorSchema, f.Name, name)
		}
	}
	if weight <= 0 {
		weight = DefaultPriorWeight
	}
	pm := &priorModel{model: m, weight: weight}
	find := func(metric string) int {
		for i, o := range m.Objectives {
			if o.Metric == metric {
				return i
			}
		}
		return -1
	}
	covered := 0
	for _, o := range s.objectives {
		pm.objIdx = append(pm.objIdx, find(o.Name))
		if pm.objIdx[len(pm.objIdx)-1] < 0 {
			continue
		}
		covered++
	}
	for _, b := range s.slo {
		pm.sloIdx = append(pm.sloIdx, find(b.Metric))
	}
	if covered == 0 {
		return fmt.Errorf("%w: it predicts none of the study's objectives (%s)", ErrPriorSchema, objectiveNames(s.objectives))
	}
	s.mu.Lock()
	s.prior = pm
	s.mu.Unlock()
	return nil
}

func objectiveNames(objs pareto.Objectives) string {
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
	}
	return strings.Join(names, ", ")
}

// complete reports whether the prior predicts every objective and SLO metric.
func (pm *priorModel) complete() bool {
	return !slices.Contains(pm.objIdx, -1) && !slices.Contains(pm.sloIdx, -1)
}

// OtherContextAfter is the number of the study's own measured trials from
// which Fit trains on other contexts' observations too.
const OtherContextAfter = 8

// Fit retrains on the history. With a prior, too little history to train
// on is not an error: the prior scores alone.
//
// Observations of another context (a Target or Workload of their own, or a
// weight below 1: another study's trials) join the training set only once
// the study has OtherContextAfter measured trials of its own. Before, they
// outnumber the own ones and stand in for them (warm-started from
// 8B-H100-chat, the tuner proposed tensor_parallel_size 1, out of memory,
// for Mixtral on two H100s); later they help, as the trees learn from the
// context features how the other context differs, given enough own trials.
// Measurements: docs/search-log.md, "SurrogateScorer.Fit".
func (s *SurrogateScorer) Fit(ctx context.Context, history []Observation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	samples := make([]surrogate.Sample, 0, len(history))
	own := 0
	for _, o := range history {
		if !otherContext(o) && o.Result != nil && o.Result.Usable() {
			own++
		}
	}
	for _, o := range history {
		if o.Result != nil && o.Result.Failure == trial.FailInterrupted {
			continue
		}
		if own < OtherContextAfter && otherContext(o) {
			continue
		}
		sm := surrogate.Sample{Target: s.target, Workload: s.workload, Config: o.Config, Result: o.Result}
		if o.Target != nil {
			sm.Target = *o.Target
		}
		if o.Workload != nil {
			sm.Workload = *o.Workload
		}
		samples = append(samples, sm)
	}
	mem := fitMemory(s.target, history)
	mx, err := surrogate.BuildMatrix(s.schema, s.opts.Objectives, samples)
	if err != nil {
		return fmt.Errorf("encode %d trials: %w", len(samples), err)
	}
	m, err := surrogate.TrainMatrix(mx, s.opts)
	s.mu.Lock()
	defer s.mu.Unlock()
	if errors.Is(err, surrogate.ErrNoData) {
		if s.prior != nil && s.prior.complete() {
			s.mem = mem
			return nil
		}
		// Too few trials for trees: the roofline, scaled to what was measured.
		m, err = surrogate.Scaled(mx, s.opts)
	}
	if err != nil {
		return fmt.Errorf("train surrogate on %d trials: %w", len(samples), err)
	}
	s.model, s.own, s.mem = m, own, mem
	return nil
}

// otherContext reports whether o was measured in another context than the
// study's own.
func otherContext(o Observation) bool {
	return o.Target != nil || o.Workload != nil || o.weight() < 1
}

// Score predicts the candidates in the study's context.
func (s *SurrogateScorer) Score(ctx context.Context, cands []spaces.Config) ([]Prediction, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	m, own, pm, mem := s.model, s.own, s.prior, s.mem
	s.mu.Unlock()
	if m == nil && (pm == nil || !pm.complete()) {
		return nil, ErrNotFitted
	}
	// w is the prior's share of each prediction it covers.
	var ownPreds, priorPreds []surrogate.Prediction
	w := 0.0
	priorObj, priorSLO := none(len(s.objIdx)), none(len(s.slo))
	if m != nil {
		ownPreds = m.PredictConfigs(s.target, s.workload, cands)
	}
	if pm != nil {
		priorPreds = pm.model.PredictConfigs(s.target, s.workload, cands)
		priorObj, priorSLO = pm.objIdx, pm.sloIdx
		w = 1
		if m != nil {
			w = pm.weight / (pm.weight + float64(own))
		}
	}
	// metric returns the mixed mean and std of surrogate objective k (own)
	// and prior objective pk (-1: none) for candidate i.
	metric := func(i, k, pk int) (float64, float64) {
		var mean, vr, ow float64
		if ownPreds != nil {
			ow = 1 - w
			if pk < 0 {
				ow = 1
			}
			mean, vr = ow*ownPreds[i].Mean[k], ow*ownPreds[i].Std[k]*ownPreds[i].Std[k]
		}
		if pk >= 0 && priorPreds != nil {
			pw := 1 - ow
			pmn, psd := priorPreds[i].Mean[pk], priorPreds[i].Std[pk]
			mean += pw * pmn
			vr += pw * psd * psd
			if ownPreds != nil {
				// The models' disagreement is uncertainty too.
				d := ownPreds[i].Mean[k] - pmn
				vr += ow * pw * d * d
			}
		}
		return mean, math.Sqrt(vr)
	}
	out := make([]Prediction, len(cands))
	for i := range cands {
		q := Prediction{Mean: make([]float64, len(s.objIdx)), Std: make([]float64, len(s.objIdx))}
		switch {
		case ownPreds == nil:
			q.PFeasible = priorPreds[i].PFeasible
		case priorPreds == nil:
			q.PFeasible = ownPreds[i].PFeasible
		default:
			q.PFeasible = w*priorPreds[i].PFeasible + (1-w)*ownPreds[i].PFeasible
		}
		if mem.informs() {
			q.PFeasible *= mem.pStart(surrogate.StartHeadroomGiB(s.target, cands[i]))
		}
		for j, k := range s.objIdx {
			q.Mean[j], q.Std[j] = metric(i, k, priorObj[j])
		}
		for j, b := range s.slo {
			mean, sd := metric(i, s.sloIdx[j], priorSLO[j])
			q.PFeasible *= boundProb(b, mean, math.Max(sd, s.SpreadFloor*math.Abs(mean)))
		}
		out[i] = q
	}
	return out, nil
}

// none is n indexes of "not predicted".
func none(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = -1
	}
	return out
}

// boundProb is P(bound holds) for a normal metric with mean m and std sd.
func boundProb(b trial.Bound, m, sd float64) float64 {
	if sd <= 0 {
		sd = 1e-9
	}
	z := (b.Limit - m) / sd
	switch b.Op {
	case ">=", ">":
		z = -z
	}
	return normCDF(z)
}
