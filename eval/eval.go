package eval

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// Truth is the noise-free outcome of one config.
type Truth struct {
	Vec      []float64          `json:"vec,omitempty"` // objective vector (nil when failed)
	Feasible bool               `json:"feasible"`      // started, served and met the SLO
	Failure  trial.FailureClass `json:"failure,omitempty"`
	E2EP99   float64            `json:"e2el_p99,omitempty"` // ms, for the grid's cap
	// Violation is how far a served config misses the SLO
	// (trial.SLO.Violation; 0 when it meets it).
	Violation float64 `json:"violation,omitempty"`
}

// Evaluator gives the noise-free truth of configs of one problem, memoised
// by config ID and request stream. Safe for concurrent use.
type Evaluator struct {
	prob   *Problem
	runner *sim.Runner
	mu     sync.Mutex
	memo   map[streamKey]Truth
	evals  int
}

// streamKey names one evaluation: a config on a request stream (0: the
// scenario's own, i: OnStreams' i-th other one).
type streamKey struct {
	id     string
	stream int
}

// NewEvaluator builds the noise-free runner of a problem.
func NewEvaluator(p *Problem) (*Evaluator, error) {
	c := sim.DefaultConfig()
	c.Target = p.Target
	c.Noise = false
	r, err := sim.NewRunner(c)
	if err != nil {
		return nil, fmt.Errorf("ground-truth runner: %w", err)
	}
	return &Evaluator{prob: p, runner: r, memo: map[streamKey]Truth{}}, nil
}

// Evals is the number of simulator runs made on the scenario's own stream
// (memo misses).
func (e *Evaluator) Evals() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.evals
}

// Truth evaluates cfg without noise (once per config ID).
func (e *Evaluator) Truth(ctx context.Context, cfg spaces.Config) (Truth, error) {
	t, err := e.on(ctx, cfg, 0)
	if err != nil {
		return Truth{}, fmt.Errorf("ground truth of %s: %w", cfg.ID(), err)
	}
	return t, nil
}

// DefaultStreams is how many request streams other than the scenario's own
// the benchmark judges the tuner's runs on (Config.Streams).
const DefaultStreams = 8

// OnStreams judges cfg without noise on n request streams other than the
// scenario's: its workload with the seed moved on (new prompt and output
// lengths, the same distributions). The scenario's one stream decides, to
// a few percent, which config of a near-flat top holds the best
// throughput and whether a config on a latency bound meets it (a p99 over
// a few hundred requests moves with their lengths), and a polished truth
// finds the config that stream favours most. Other streams say whether a
// pick short of that best is short on the stream or in the config.
func (e *Evaluator) OnStreams(ctx context.Context, cfg spaces.Config, n int) ([]Truth, error) {
	out := make([]Truth, n)
	for i := range out {
		t, err := e.on(ctx, cfg, i+1)
		if err != nil {
			return nil, fmt.Errorf("%s on request stream %d: %w", cfg.ID(), i+1, err)
		}
		out[i] = t
	}
	return out, nil
}

// on evaluates cfg on a request stream (see streamKey), once.
func (e *Evaluator) on(ctx context.Context, cfg spaces.Config, stream int) (Truth, error) {
	k := streamKey{cfg.ID(), stream}
	e.mu.Lock()
	t, ok := e.memo[k]
	e.mu.Unlock()
	if ok {
		return t, nil
	}
	w := e.prob.Workload
	w.Seed += uint64(stream) * 0x9e3779b97f4a7c15 // far from the scenario's and each other's seeds
	res, err := e.runner.Run(ctx, cfg, w)
	if err != nil {
		return Truth{}, err
	}
	t = e.prob.judge(&res)
	e.mu.Lock()
	e.memo[k] = t
	if stream == 0 {
		e.evals++
	}
	e.mu.Unlock()
	return t, nil
}

// judge reads a result through the problem's objectives and SLO.
func (p *Problem) judge(res *trial.Result) Truth {
	if !res.Usable() || res.Metrics() == nil {
		f := res.Failure
		if f == "" {
			f = trial.FailCrashed
		}
		return Truth{Failure: f}
	}
	vec := make([]float64, len(p.Objectives))
	for i, o := range p.Objectives {
		v, ok := res.Objective(o.Name)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			return Truth{Failure: trial.FailCrashed}
		}
		vec[i] = v
	}
	viol := p.SLO.Violation(res.Metrics()) // 0 exactly where Check holds
	return Truth{Vec: vec, Feasible: viol == 0, E2EP99: res.Metrics().E2EL.P99, Violation: viol}
}

// sampleConfig draws a config uniformly from the space (log-uniform for log
// ranges, uniform over levels); ok is false when it violates a constraint.
func sampleConfig(sp *spaces.Space, r *rand.Rand) (spaces.Config, bool) {
	m := map[string]spaces.Value{}
	for _, p := range sp.Tuned() {
		m[p.Name] = drawParam(p, r)
	}
	return validConfig(sp, spaces.NewConfig(m))
}

func drawParam(p *spaces.Param, r *rand.Rand) spaces.Value {
	if lv := discreteLevels(p); len(lv) > 0 {
		return lv[r.IntN(len(lv))]
	}
	u := r.Float64()
	if p.Log && p.Min > 0 {
		// Integers: widen by half a unit so both ends are as likely as the rest.
		lo, hi := p.Min, p.Max
		if p.Kind == spaces.Int {
			lo, hi = math.Max(p.Min-0.5, p.Min*0.5), p.Max+0.5
		}
		return p.FromFloat(math.Exp(math.Log(lo) + u*(math.Log(hi)-math.Log(lo))))
	}
	lo, hi := p.Min, p.Max
	if p.Kind == spaces.Int {
		lo, hi = p.Min-0.5, p.Max+0.5
	}
	return p.FromFloat(lo + u*(hi-lo))
}

// mutate changes one or two tuned parameters of c: numeric ones by a step
// of up to a quarter of their (log) range, discrete ones to another level.
func mutate(sp *spaces.Space, c spaces.Config, r *rand.Rand) (spaces.Config, bool) {
	tuned := sp.Tuned()
	if len(tuned) == 0 {
		return c, false
	}
	n := 1 + r.IntN(2)
	for range n {
		p := tuned[r.IntN(len(tuned))]
		v, _ := c.Get(p.Name)
		if lv := levelAxis(p); lv != nil {
			c = c.With(p.Name, lv[r.IntN(len(lv))])
			continue
		}
		x := v.Float()
		step := (r.Float64()*2 - 1) * 0.25
		if p.Log && p.Min > 0 && x > 0 {
			x = math.Exp(math.Log(x) + step*(math.Log(p.Max)-math.Log(p.Min)))
		} else {
			x += step * (p.Max - p.Min)
		}
		c = c.With(p.Name, p.FromFloat(x))
	}
	return validConfig(sp, c)
}
