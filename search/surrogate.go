package search

import (
	"context"
	"errors"
	"fmt"
	"math"
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
// P(starts) x P(meets every SLO bound), the latter from the ensemble mean
// and spread (the spread floored at SpreadFloor of the mean, as a bagged
// ensemble underestimates its error on few samples).
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
			o = surrogate.Objective{Name: strings.ReplaceAll(metric, ":", "_"), Metric: metric, Transform: "log"}
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

// Fit retrains on the history.
func (s *SurrogateScorer) Fit(ctx context.Context, history []Observation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	samples := make([]surrogate.Sample, 0, len(history))
	for _, o := range history {
		if o.Result != nil && o.Result.Failure == trial.FailInterrupted {
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
	m, err := surrogate.Train(s.schema, samples, s.opts)
	if err != nil {
		return fmt.Errorf("train surrogate on %d trials: %w", len(samples), err)
	}
	s.mu.Lock()
	s.model = m
	s.mu.Unlock()
	return nil
}

// Score predicts the candidates in the study's context.
func (s *SurrogateScorer) Score(ctx context.Context, cands []spaces.Config) ([]Prediction, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	m := s.model
	s.mu.Unlock()
	if m == nil {
		return nil, ErrNotFitted
	}
	preds := m.PredictConfigs(s.target, s.workload, cands)
	out := make([]Prediction, len(preds))
	for i, p := range preds {
		q := Prediction{PFeasible: p.PFeasible, Mean: make([]float64, len(s.objIdx)), Std: make([]float64, len(s.objIdx))}
		for j, k := range s.objIdx {
			q.Mean[j], q.Std[j] = p.Mean[k], p.Std[k]
		}
		for j, b := range s.slo {
			k := s.sloIdx[j]
			q.PFeasible *= boundProb(b, p.Mean[k], math.Max(p.Std[k], s.SpreadFloor*math.Abs(p.Mean[k])))
		}
		out[i] = q
	}
	return out, nil
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
