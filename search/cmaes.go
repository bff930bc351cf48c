package search

import (
	"fmt"
	"math"
	"slices"

	"github.com/c-bata/goptuna/cmaes"
	"gonum.org/v1/gonum/mat"

	"github.com/vllm-tuner/tuner/spaces"
)

// cmaState drives goptuna's cmaes.Optimizer (its own Ask/Tell) over the unit
// cube of the tuned parameters. goptuna's CMA-ES is not safe for concurrent
// use; every call here runs under Proposer.mu.
//
// Multi-objective handling per generation: each generation has one ParEGO
// weight vector; when popsize trials of it are told, they are scalarised
// (normalised over the whole history at that moment) and told to the
// optimizer, and a new weight vector is drawn. Trials told before the
// optimizer exists (the default config, warm-start history) place its
// initial mean at the best of them.
type cmaState struct {
	opt     *cmaes.Optimizer
	weights []float64
	gen     []cmaMember
}

type cmaMember struct {
	x []float64
	o Observation
}

const (
	cmaSigmaCold = 0.3  // initial step size in the unit cube without history
	cmaSigmaWarm = 0.15 // ... with history to start from
)

// init creates the optimizer, its mean at the best sampler observation
// under sc (the cube's centre without one).
func (c *cmaState) init(p *Proposer, sc scalariser) error {
	d := len(p.dims)
	mean := make([]float64, d)
	for i := range mean {
		mean[i] = 0.5
	}
	sigma := cmaSigmaCold
	best := math.Inf(1)
	for _, k := range p.sampler {
		if v := sc.value(p.outs[k]); v < best {
			best = v
			mean = slices.Clone(p.units[k])
			sigma = cmaSigmaWarm
		}
	}
	for i := range mean {
		mean[i] = math.Max(0.02, math.Min(0.98, mean[i]))
	}
	bounds := mat.NewDense(d, 2, nil)
	for i := range d {
		bounds.Set(i, 0, 0)
		bounds.Set(i, 1, 1)
	}
	opt, err := cmaes.NewOptimizer(mean, sigma,
		cmaes.OptimizerOptionBounds(bounds),
		cmaes.OptimizerOptionSeed(int64(p.rng.Uint64()>>1)))
	if err != nil {
		return fmt.Errorf("cma-es: %w", err)
	}
	c.opt = opt
	c.weights = sc.weights
	return nil
}

func (p *Proposer) unitVector(cfg spaces.Config) []float64 {
	x := make([]float64, len(p.dims))
	for i, d := range p.dims {
		v, ok := cfg.Get(d.p.Name)
		if !ok {
			v = d.p.Default
		}
		x[i] = d.unit(v)
	}
	return x
}

func (p *Proposer) fromUnitVector(x []float64) map[string]spaces.Value {
	m := make(map[string]spaces.Value, len(p.dims))
	for i, d := range p.dims {
		m[d.p.Name] = d.fromUnit(x[i])
	}
	return m
}

// drawer returns a function that asks the optimizer for one candidate. The
// ask's scalariser keeps its normalisation, but the weights are the
// generation's.
func (c *cmaState) drawer(p *Proposer, sc scalariser) func() (map[string]spaces.Value, error) {
	var initErr error
	if c.opt == nil {
		initErr = c.init(p, sc)
	}
	return func() (map[string]spaces.Value, error) {
		if initErr != nil {
			return nil, initErr
		}
		x, err := c.opt.Ask()
		if err != nil {
			return nil, fmt.Errorf("cma-es ask: %w", err)
		}
		return p.fromUnitVector(append([]float64(nil), x...)), nil
	}
}

// tell adds a finished trial to the current generation and, when it is
// full, updates the optimizer.
func (c *cmaState) tell(p *Proposer, o Observation) {
	if c.opt == nil {
		return
	}
	c.gen = append(c.gen, cmaMember{x: p.unitVector(o.Config), o: o})
	if len(c.gen) < c.opt.PopulationSize() {
		return
	}
	sc := p.scalariser() // fresh normalisation over the whole history
	sc.weights = c.weights
	sols := make([]*cmaes.Solution, len(c.gen))
	for i, m := range c.gen {
		sols[i] = &cmaes.Solution{Params: m.x, Value: sc.value(evaluate(m.o, p.cfg.Objectives, p.cfg.SLO))}
	}
	if err := c.opt.Tell(sols); err != nil {
		p.cfg.Logger.Warn("cma-es tell failed; restarting the optimizer", "err", err)
		c.opt = nil
	}
	c.gen = c.gen[:0]
	c.weights = randomWeights(p.rng, len(p.cfg.Objectives))
}
