package search

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"github.com/c-bata/goptuna"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// SamplerKind selects the goptuna-side sampler.
type SamplerKind string

const (
	SamplerTPE    SamplerKind = "tpe"
	SamplerCMAES  SamplerKind = "cmaes"
	SamplerRandom SamplerKind = "random"
)

// ParseSampler reads a --sampler value ("" is tpe).
func ParseSampler(s string) (SamplerKind, error) {
	switch SamplerKind(s) {
	case "", SamplerTPE:
		return SamplerTPE, nil
	case SamplerCMAES, "cma-es", "cma":
		return SamplerCMAES, nil
	case SamplerRandom:
		return SamplerRandom, nil
	}
	return "", fmt.Errorf("%w: sampler %q (want tpe, cmaes or random)", ErrConfig, s)
}

// Errors callers branch on.
var (
	// ErrConfig reports an invalid ProposerConfig.
	ErrConfig = errors.New("invalid proposer config")
	// ErrExhausted means no untried valid config could be found.
	ErrExhausted = errors.New("search space exhausted: no untried valid config found")
)

// ProposerConfig configures a Proposer. Space is required; the rest has
// defaults (DefaultProposerConfig).
type ProposerConfig struct {
	Space      *spaces.Space     // resolved (and possibly pruned) space
	Sampler    SamplerKind       // tpe (default), cmaes or random
	Seed       uint64            // every random draw derives from it
	Objectives pareto.Objectives // default store.DefaultObjectives("")
	SLO        trial.SLO
	// History is told before the first ask: observations with Weight >=
	// SamplerMinWeight reach the sampler and count as tried; all of them
	// reach the scorer's Fit (another context's only once the study has
	// measured trials of its own, see SurrogateScorer.Fit), but only this
	// context's count towards MinScreenHistory.
	History          []Observation
	SamplerMinWeight float64 // default 1: only the study's own context
	// Scorer screens candidates (nil: the sampler's own choice).
	Scorer Scorer
	// Candidates is the pool size when screening (default 256). A larger
	// pool was slower and lowered HV@24: the more candidates the model
	// ranks, the more often its best is one it overrates; a smaller one
	// lowered par4's HV.
	// Measurements: docs/search-log.md, "ProposerConfig.Candidates".
	Candidates int
	// MinScreenHistory is the number of usable observations of this
	// context before screening (default 0: before two trials the scorer is
	// the roofline scaled to what was measured, surrogate.Scaled, which
	// steers the workers of a parallel study that ask before their first
	// trials end). On the schema-5 roofline, 0 against 2 raised par4's median
	// HV@8 from 0.70 to 0.82; on the rooflines before schema 4 it did harm.
	// Measurements: docs/search-log.md, "ProposerConfig.MinScreenHistory".
	MinScreenHistory int
	RefitEvery       int // tells between Fit calls at least (default 1)
	// RefitGrowth refits only once the history has grown by this fraction
	// since the last fit (default 0.04; negative: every RefitEvery tells).
	// Training is most of an Ask on a long history and one more trial
	// barely moves the model there: with 0.04 the surrogate is still refit
	// after every trial below 50 trials of history (what the search-quality
	// evaluation measures) and every 20 trials at 500.
	RefitGrowth float64
	// RandomFraction is the share of the pool drawn uniformly (default 0.1;
	// negative: none).
	RandomFraction float64
	// MutationFraction is the share of the pool made by mutating the
	// current feasible front of this context: local search the surrogate
	// can exploit (default 0.6; negative: none). A larger share (0.8) lowered
	// the HV sums.
	// Measurements: docs/search-log.md, "ProposerConfig.MutationFraction".
	MutationFraction float64
	// Optimism is k in mean + k*std (default 1); late, both k = 2 and
	// k = 0.5 lowered HV@24.
	// Measurements: docs/search-log.md, "ProposerConfig.Optimism".
	Optimism float64
	// RefineRounds is the number of rounds in which the best screened
	// candidates are mutated and the mutants scored (default 2; negative:
	// none). Without them HV@8 and HV@24 fell; 4 rounds lowered HV@24.
	// Measurements: docs/search-log.md, "ProposerConfig.RefineRounds".
	RefineRounds int
	// FeasibilityExponent raises the probability of feasibility in the
	// acquisition (hypervolume gain x P(feasible)^k; default 3, negative:
	// 1). A candidate past a bound costs a whole trial and adds nothing,
	// and the ensemble's probabilities are loose: with k = 1 the search
	// kept choosing configs far past a bound (TTFT at max_num_seqs below
	// the client count) whose optimistic gain outweighed even odds.
	// Measurements: docs/search-log.md, "ProposerConfig.FeasibilityExponent".
	FeasibilityExponent float64
	// LateFeasibilityExponent replaces FeasibilityExponent once the search
	// is late (see LateAfter; default 2, or FeasibilityExponent where that
	// is lower; negative: FeasibilityExponent throughout). The opening needs
	// the caution (k = 2 throughout cost HV@8); late, the incumbent sits at a
	// bound and the gains left are past configs the ensemble gives even odds,
	// so less caution finds them.
	// Measurements: docs/search-log.md, "ProposerConfig.LateFeasibilityExponent".
	LateFeasibilityExponent float64
	// BisectEvery makes every n-th ask a boundary bisection (default 3;
	// negative: never): see Proposer.bisect.
	BisectEvery int
	// LateAfter is the number of this context's trials after which the
	// search refines: mutations take a step drawn from lateSteps (fine,
	// medium or coarse) instead of always 0.1, and every
	// LateBisectEvery-th ask is a boundary bisection (default 8;
	// negative: never). Most of a front's hypervolume often sits in one
	// config at an SLO's edge, a spike a few percent wide in
	// max_num_batched_tokens or max_num_seqs that 0.1-wide steps jump
	// across; multi-scale steps from the first trial on cost the opening's
	// spread.
	// Measurements: docs/search-log.md, "ProposerConfig.LateAfter".
	LateAfter int
	// LateBisectEvery is BisectEvery once late (default 2; negative:
	// BisectEvery throughout); a late bisection ask with no pair to bisect
	// probes a predicted bound instead (see Proposer.probe). The less
	// cautious late screening does not replace the bisections.
	// Measurements: docs/search-log.md, "ProposerConfig.LateBisectEvery".
	LateBisectEvery int
	StartupTrials   int // TPE: random trials before modelling (default 8)
	EICandidates    int // TPE: candidates per suggestion (default 24; 8 for screening pools)
	MaxAttempts     int // draws per returned candidate before ErrExhausted (default 64)
	Logger          *slog.Logger
}

// DefaultProposerConfig returns the defaults (Space still to be set).
func DefaultProposerConfig() ProposerConfig {
	return ProposerConfig{
		Sampler:                 SamplerTPE,
		Objectives:              store.DefaultObjectives(""),
		SamplerMinWeight:        1,
		Candidates:              256,
		MinScreenHistory:        0,
		RefitEvery:              1,
		RefitGrowth:             0.04,
		RandomFraction:          0.1,
		MutationFraction:        0.6,
		Optimism:                1,
		RefineRounds:            2,
		FeasibilityExponent:     3,
		LateFeasibilityExponent: 2,
		BisectEvery:             3,
		LateAfter:               8,
		LateBisectEvery:         2,
		StartupTrials:           8,
		EICandidates:            24,
		MaxAttempts:             64,
	}
}

func (c *ProposerConfig) fill() error {
	d := DefaultProposerConfig()
	if c.Space == nil {
		return fmt.Errorf("%w: no space", ErrConfig)
	}
	if c.Sampler == "" {
		c.Sampler = d.Sampler
	}
	if _, err := ParseSampler(string(c.Sampler)); err != nil {
		return err
	}
	if len(c.Objectives) == 0 {
		c.Objectives = d.Objectives
	}
	if err := c.Objectives.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	// Unset fields take the default: cmp.Or(max(0, v), d) where any v <= 0
	// is unset, cmp.Or(v, d) where zero is unset and a negative value means
	// something (none, or another field's value).
	c.SamplerMinWeight = cmp.Or(max(0, c.SamplerMinWeight), d.SamplerMinWeight)
	c.Candidates = cmp.Or(max(0, c.Candidates), d.Candidates)
	c.MinScreenHistory = cmp.Or(max(0, c.MinScreenHistory), d.MinScreenHistory)
	c.RefitEvery = cmp.Or(max(0, c.RefitEvery), d.RefitEvery)
	c.RefitGrowth = cmp.Or(c.RefitGrowth, d.RefitGrowth)
	c.RandomFraction = max(0, cmp.Or(c.RandomFraction, d.RandomFraction))
	c.MutationFraction = max(0, cmp.Or(c.MutationFraction, d.MutationFraction))
	if c.RandomFraction+c.MutationFraction > 1 {
		return fmt.Errorf("%w: random fraction %v + mutation fraction %v outside [0, 1]", ErrConfig, c.RandomFraction, c.MutationFraction)
	}
	if c.Optimism < 0 {
		return fmt.Errorf("%w: optimism %v < 0", ErrConfig, c.Optimism)
	}
	c.RefineRounds = max(0, cmp.Or(c.RefineRounds, d.RefineRounds))
	c.FeasibilityExponent = cmp.Or(c.FeasibilityExponent, d.FeasibilityExponent)
	if c.FeasibilityExponent < 0 {
		c.FeasibilityExponent = 1
	}
	c.LateFeasibilityExponent = cmp.Or(c.LateFeasibilityExponent, min(d.LateFeasibilityExponent, c.FeasibilityExponent))
	if c.LateFeasibilityExponent < 0 {
		c.LateFeasibilityExponent = c.FeasibilityExponent
	}
	c.BisectEvery = max(0, cmp.Or(c.BisectEvery, d.BisectEvery))
	c.LateAfter = cmp.Or(c.LateAfter, d.LateAfter)
	c.LateBisectEvery = cmp.Or(c.LateBisectEvery, d.LateBisectEvery)
	if c.LateBisectEvery < 0 {
		c.LateBisectEvery = c.BisectEvery
	}
	c.StartupTrials = cmp.Or(max(0, c.StartupTrials), d.StartupTrials)
	c.EICandidates = cmp.Or(max(0, c.EICandidates), d.EICandidates)
	c.MaxAttempts = cmp.Or(max(0, c.MaxAttempts), d.MaxAttempts)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Proposer proposes configs: trial 0 is vLLM's default config, then each ask
// rebuilds a ParEGO scalarisation of the whole history (a fresh random
// weight vector), tells it to a fresh in-memory goptuna study (TPE or
// random; CMA-ES keeps one optimizer across asks), asks it for candidates,
// and, with a scorer and enough history, runs the candidate with the best
// feasibility x expected hypervolume improvement. It never proposes a
// config already tried or pending; configs in flight on other workers
// (SetPending) steer the sampler and the screening away from themselves.
// Safe for concurrent use (one mutex serialises everything, CMA-ES
// included).
type Proposer struct {
	mu      sync.Mutex
	cfg     ProposerConfig
	dims    []dim
	rng     *rand.Rand
	history []Observation
	// outs[i] is history[i] seen through the objectives and SLO, and
	// sampler lists the indexes the sampler learns from: both computed once
	// per tell, not once per ask.
	outs    []outcome
	sampler []int
	front   []int           // indexes of the sampler's feasible front, ascending (kept per tell)
	flags   []string        // flags[k] is otherFlags(history[k].Config) (see relayout)
	units   [][]float64     // units[k] is unitVector(history[k].Config): bisection reads all of them each late ask
	params  []*trialParams  // history[k] in goptuna's representation (built on first use)
	tried   map[string]bool // config IDs of this context's observations
	pending map[string]spaces.Config
	others  map[string]spaces.Config // in flight on other workers (SetPending)
	// layouts reports whether the space admits more than one parallel
	// layout (see relayout); fixed with the space, so found once.
	layouts  bool
	incMemo  incumbentMemo // see incumbent
	cma      *cmaState
	told     int // tells since the last Fit
	fitted   bool
	asks     int
	admitted bool
}

// NewProposer validates the config and tells it the history.
func NewProposer(cfg ProposerConfig) (*Proposer, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	p := &Proposer{
		cfg:     cfg,
		dims:    dimsOf(cfg.Space),
		rng:     rand.New(rand.NewPCG(cfg.Seed, 0x5ea4c4)),
		tried:   map[string]bool{},
		pending: map[string]spaces.Config{},
		layouts: len(cfg.Space.Resplits(cfg.Space.DefaultConfig())) > 0,
	}
	for _, o := range cfg.History {
		p.add(o)
	}
	if cfg.Sampler == SamplerCMAES {
		p.cma = &cmaState{}
	}
	return p, nil
}

func (p *Proposer) add(o Observation) {
	if o.Result == nil {
		o.Result = &trial.Result{Status: trial.StatusFailed, Failure: trial.FailCrashed}
	}
	p.history = append(p.history, o)
	p.outs = append(p.outs, evaluate(o, p.cfg.Objectives, p.cfg.SLO))
	p.flags = append(p.flags, otherFlags(o.Config))
	p.units = append(p.units, p.unitVector(o.Config))
	if o.weight() >= p.cfg.SamplerMinWeight {
		p.tried[o.Config.ID()] = true
		p.sampler = append(p.sampler, len(p.history)-1)
		p.insertFront(len(p.history) - 1)
	}
	p.told++
}

// Tell records a finished trial (a nil result counts as a failure). Telling
// a config again (a repeat) adds another observation of it.
func (p *Proposer) Tell(cfg spaces.Config, res *trial.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pending, cfg.ID())
	o := Observation{Config: cfg, Result: res, Weight: 1}
	p.add(o)
	if p.cma != nil {
		p.cma.tell(p, o)
	}
}

// History returns a copy of the observations the proposer holds.
func (p *Proposer) History() []Observation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Observation(nil), p.history...)
}

// Ask returns the next config to run. The first is the space's default
// config unless it was tried already.
func (p *Proposer) Ask(ctx context.Context) (spaces.Config, error) {
	if err := ctx.Err(); err != nil {
		return spaces.Config{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asks++
	def := p.cfg.Space.DefaultConfig()
	if id := def.ID(); !p.tried[id] && !p.isPending(id) {
		p.pending[id] = def
		return def, nil
	}
	sc := p.scalariser()
	screen := p.cfg.Scorer != nil && p.usable() >= p.cfg.MinScreenHistory
	every := p.cfg.BisectEvery
	if p.late() && every > 0 {
		every = p.cfg.LateBisectEvery
	}
	if screen && p.late() {
		if c, ok := p.relayout(sc); ok {
			p.cfg.Logger.Debug("relayout", "config", c.ID())
			p.pending[c.ID()] = c
			return c, nil
		}
		if c, ok := p.admit(ctx, sc); ok {
			p.cfg.Logger.Debug("admit", "config", c.ID())
			p.pending[c.ID()] = c
			return c, nil
		}
	}
	if screen && every > 0 && p.asks%every == 0 {
		if c, ok := p.bisect(sc); ok {
			p.cfg.Logger.Debug("boundary bisection", "config", c.ID())
			p.pending[c.ID()] = c
			return c, nil
		}
		if p.late() {
			if c, ok := p.probe(ctx, sc); ok {
				p.cfg.Logger.Debug("boundary probe", "config", c.ID())
				p.pending[c.ID()] = c
				return c, nil
			}
		}
	}
	n := 1
	if screen {
		n = p.cfg.Candidates
	}
	pool, err := p.pool(sc, n, screen)
	if err != nil {
		return spaces.Config{}, err
	}
	c := pool[0]
	if screen && len(pool) > 1 {
		c = p.screen(ctx, pool, sc)
		if err := ctx.Err(); err != nil {
			return spaces.Config{}, err
		}
	}
	p.pending[c.ID()] = c
	return c, nil
}

// usable counts observations of this context (p.sampler: weight at least
// SamplerMinWeight) with a measurement. Another context's history does not start
// screening: with it counted, a warm-started study screened from its second
// trial on a surrogate that knew almost only the other context (see
// SurrogateScorer.Fit).
func (p *Proposer) usable() int {
	n := 0
	for _, k := range p.sampler {
		if p.history[k].Result.Usable() {
			n++
		}
	}
	return n
}

// insertFront adds history[k] to the feasible front when no member
// dominates it, dropping the members it dominates (pareto.Front's rule:
// equal vectors are all kept).
func (p *Proposer) insertFront(k int) {
	e := p.outs[k]
	if !e.feasible {
		return
	}
	vecs := make([][]float64, len(p.front))
	for i, f := range p.front {
		vecs[i] = p.outs[f].vals
	}
	add, drop := pareto.Insert(vecs, e.vals, p.cfg.Objectives.Directions())
	if !add {
		return
	}
	for _, i := range slices.Backward(drop) {
		p.front = slices.Delete(p.front, i, i+1)
	}
	p.front = append(p.front, k)
}

// normFront returns the feasible front normalised by norm.
func (p *Proposer) normFront(norm normaliser) [][]float64 {
	if len(p.front) == 0 {
		return nil
	}
	out := make([][]float64, len(p.front))
	for i, k := range p.front {
		out[i] = norm.apply(p.outs[k].vals)
	}
	return out
}

// samplerOuts returns the outcomes of samplerObs, in the same order.
func (p *Proposer) samplerOuts() []outcome {
	out := make([]outcome, len(p.sampler))
	for i, k := range p.sampler {
		out[i] = p.outs[k]
	}
	return out
}

// samplerObs returns the observations the sampler learns from.
func (p *Proposer) samplerObs() []Observation {
	out := make([]Observation, len(p.sampler))
	for i, k := range p.sampler {
		out[i] = p.history[k]
	}
	return out
}

// scalariser draws this ask's ParEGO weights and normalises over the
// sampler's usable observations.
func (p *Proposer) scalariser() scalariser {
	var vecs [][]float64
	for _, k := range p.sampler {
		if e := p.outs[k]; !e.failed {
			vecs = append(vecs, e.vals)
		}
	}
	return scalariser{norm: newNormaliser(p.cfg.Objectives, vecs), weights: randomWeights(p.rng, len(p.cfg.Objectives))}
}

// accept normalises and validates a drawn config; ok is false for invalid,
// tried, pending or already pooled configs.
func (p *Proposer) accept(m map[string]spaces.Value, seen map[string]bool) (spaces.Config, bool) {
	c, err := p.cfg.Space.Normalize(spaces.NewConfig(m))
	if err != nil || p.cfg.Space.Validate(c) != nil {
		return spaces.Config{}, false
	}
	id := c.ID()
	if p.tried[id] || p.isPending(id) || seen[id] {
		return spaces.Config{}, false
	}
	seen[id] = true
	return c, true
}

// acceptConfig is accept for a config built outside the unit cube (a
// relayout move, a level neighbour): it goes through the cube first, so
// its values are clamped and snapped to this space's ranges and levels as
// every drawn candidate's are.
func (p *Proposer) acceptConfig(c spaces.Config, seen map[string]bool) (spaces.Config, bool) {
	return p.accept(p.fromUnitVector(p.unitVector(c)), seen)
}

// pool draws up to n distinct, valid, untried candidates: sampler draws and,
// when screening, a MutationFraction share of mutated front members and a
// RandomFraction share of uniform draws; once the search is late, the
// incumbent's level neighbours join them (levelNeighbours).
func (p *Proposer) pool(sc scalariser, n int, screen bool) ([]spaces.Config, error) {
	seen := map[string]bool{}
	var out []spaces.Config
	nRandom, nMut := 0, 0
	if screen {
		nRandom = int(float64(n) * p.cfg.RandomFraction)
		nMut = int(float64(n) * p.cfg.MutationFraction)
	}
	var draw func() (map[string]spaces.Value, error)
	switch p.cfg.Sampler {
	case SamplerCMAES:
		draw = p.cma.drawer(p, sc)
	default:
		var err error
		draw, err = p.studyDrawer(sc, screen)
		if err != nil {
			return nil, err
		}
	}
	budget := p.cfg.MaxAttempts * n
	fill := func(want int, draw func() (map[string]spaces.Value, error)) error {
		for attempts := 0; len(out) < want && attempts < budget; attempts++ {
			m, err := draw()
			if err != nil {
				return err
			}
			if c, ok := p.accept(m, seen); ok {
				out = append(out, c)
			}
		}
		return nil
	}
	if err := fill(n-nRandom-nMut, draw); err != nil {
		return nil, err
	}
	if parents := p.parents(); len(parents) > 0 {
		_ = fill(n-nRandom, func() (map[string]spaces.Value, error) {
			return p.mutate(parents[p.rng.IntN(len(parents))]), nil
		})
	}
	_ = fill(n, func() (map[string]spaces.Value, error) {
		m := map[string]spaces.Value{}
		for _, d := range p.dims {
			m[d.p.Name] = d.fromUnit(p.rng.Float64())
		}
		return m, nil
	})
	if screen && p.late() {
		out = append(out, p.levelNeighbours(sc, seen)...)
	}
	if len(out) == 0 {
		return nil, ErrExhausted
	}
	return out, nil
}

// parents are the unit vectors of the feasible front of this context
// (p.front, kept per tell). Other contexts' fronts are not mutated: as
// parents they made a warm start spend its opening next to another model's
// or GPU's best configs; the other context still reaches the pruning and
// the surrogate. A late crossover of front members was tried and dropped.
// Measurements: docs/search-log.md, "Proposer.parents".
func (p *Proposer) parents() [][]float64 {
	out := make([][]float64, len(p.front))
	for i, k := range p.front {
		out[i] = p.units[k]
	}
	return out
}

// lateSteps are the scales of a late search's mutation steps (one drawn per
// coordinate): fine enough to approach a bound, coarse enough to leave a
// local front.
// Measurements: docs/search-log.md, "lateSteps".
var lateSteps = []float64{0.02, 0.1, 0.3}

// late reports whether the search is past its opening (ProposerConfig.LateAfter
// trials of this context, counting the configs in flight on other workers:
// four workers that have claimed LateAfter trials have spent the opening's
// budget, though up to three results are still to come).
func (p *Proposer) late() bool {
	return p.cfg.LateAfter > 0 && len(p.sampler)+len(p.others) >= p.cfg.LateAfter
}

// feasibilityExponent is the acquisition's exponent of P(feasible) for this
// ask (see LateFeasibilityExponent).
func (p *Proposer) feasibilityExponent() float64 {
	if p.late() {
		return p.cfg.LateFeasibilityExponent
	}
	return p.cfg.FeasibilityExponent
}

// mutate perturbs a unit vector: each coordinate with probability 2/d (at
// least one), numeric ones by a normal step (0.1, or one of lateSteps once
// the search is late), levels to a random level.
//
// TP and DP change one at a time, which cannot re-split the GPUs (from
// TP 8 x DP 1 on 8 GPUs: 4 x 1 idles half, 8 x 2 is invalid): the late
// search's relayout moves the incumbent to each other layout once; a
// relayout move among the mutations did not help.
//
// A mutant that violates a constraint is dropped (accept), not repaired:
// repairing it lowered the HV sums, and the surrogate does not rank the
// repaired low-budget configs high, so the picks never moved.
// Measurements: docs/search-log.md, "Proposer.mutate".
func (p *Proposer) mutate(x []float64) map[string]spaces.Value {
	late := p.late()
	y := append([]float64(nil), x...)
	rate := 2 / float64(max(2, len(p.dims)))
	changed := false
	for !changed {
		for i, d := range p.dims {
			if p.rng.Float64() >= rate {
				continue
			}
			changed = true
			if d.levels != nil {
				y[i] = p.rng.Float64()
			} else {
				step := 0.1
				if late {
					step = lateSteps[p.rng.IntN(len(lateSteps))]
				}
				y[i] = math.Max(0, math.Min(1, y[i]+step*p.rng.NormFloat64()))
			}
		}
		if len(p.dims) == 0 {
			break
		}
	}
	return p.fromUnitVector(y)
}

// studyDrawer builds a fresh in-memory goptuna study, tells it the sampler
// observations under this ask's scalarisation, and returns a function that
// asks it for one candidate (a new running trial each time).
func (p *Proposer) studyDrawer(sc scalariser, screen bool) (func() (map[string]spaces.Value, error), error) {
	var sampler goptuna.Sampler
	seed := p.rng.Uint64()
	r := rand.New(rand.NewPCG(seed, seed^0x7e57))
	switch p.cfg.Sampler {
	case SamplerRandom:
		sampler = newRandomSampler(r)
	default:
		ei := p.cfg.EICandidates
		if screen {
			ei = min(ei, 8) // a more exploratory pool; the scorer exploits
		}
		sampler = newTPESampler(r, p.cfg.StartupTrials, ei)
	}
	study, err := goptuna.CreateStudy("search",
		goptuna.StudyOptionStorage(goptuna.NewInMemoryStorage()),
		goptuna.StudyOptionSampler(sampler),
		goptuna.StudyOptionDirection(goptuna.StudyDirectionMinimize),
		goptuna.StudyOptionLogger(nil))
	if err != nil {
		return nil, fmt.Errorf("create goptuna study: %w", err)
	}
	var told []float64
	for _, k := range p.toldIdx(sc, r) {
		ft, ok := p.frozen(k, sc)
		if !ok {
			continue
		}
		told = append(told, ft.Value)
		if _, err := study.Storage.CloneTrial(study.ID, ft); err != nil {
			return nil, fmt.Errorf("tell goptuna study: %w", err)
		}
	}
	for _, c := range p.inFlight() {
		tp, ok := p.paramsOf(c)
		if !ok || len(told) == 0 {
			continue
		}
		ft := completeTrial(tp, liarValue(told))
		if _, err := study.Storage.CloneTrial(study.ID, ft); err != nil {
			return nil, fmt.Errorf("tell goptuna study: %w", err)
		}
	}
	return func() (map[string]spaces.Value, error) {
		id, err := study.Storage.CreateNewTrial(study.ID)
		if err != nil {
			return nil, fmt.Errorf("goptuna trial: %w", err)
		}
		t := goptuna.Trial{Study: study, ID: id}
		m := make(map[string]spaces.Value, len(p.dims))
		for _, d := range p.dims {
			v, err := d.suggest(t)
			if err != nil {
				return nil, fmt.Errorf("suggest %s: %w", d.p.Name, err)
			}
			m[d.p.Name] = v
		}
		// Leave the trial out of later draws' models: only complete trials
		// are read, and this one stays running (the study is dropped after
		// the ask).
		return m, nil
	}, nil
}

// maxTold bounds the trials told to the goptuna study of one ask, and
// toldBest is how many of the best of them are always told. TPE models the
// best 24 (tpe.DefaultGamma) against the rest, so the best 25 keep its
// "below" group exact and a uniform sample of the others stands for the
// "above" density; reading and modelling every trial of a 10,000-trial
// history was most of an Ask.
const (
	maxTold  = 1000
	toldBest = 25
)

// toldIdx returns the history indexes this ask tells the sampler: all of
// them up to maxTold, else the toldBest best under sc and a sample of the
// rest drawn from r, in history order.
func (p *Proposer) toldIdx(sc scalariser, r *rand.Rand) []int {
	if len(p.sampler) <= maxTold {
		return p.sampler
	}
	type kv struct {
		k int
		v float64
	}
	all := make([]kv, len(p.sampler))
	for i, k := range p.sampler {
		all[i] = kv{k, sc.value(p.outs[k])}
	}
	slices.SortStableFunc(all, func(a, b kv) int { return cmp.Compare(a.v, b.v) })
	idx := make([]int, len(all))
	for i, e := range all {
		idx[i] = e.k
	}
	rest := idx[toldBest:]
	r.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	out := idx[:maxTold]
	slices.Sort(out)
	return out
}

// trialParams is a config in goptuna's representation: what a frozen
// trial of it holds besides its value (which depends on the ask's
// scalarisation). Built once per observation; the maps are shared by every
// study it is told to, which only reads them.
type trialParams struct {
	internal map[string]float64
	params   map[string]interface{}
	dists    map[string]interface{}
}

// paramsOf returns c's trialParams. Values outside the (pruned) space are
// clamped to it; ok is false when one cannot be represented.
func (p *Proposer) paramsOf(c spaces.Config) (*trialParams, bool) {
	tp := &trialParams{internal: map[string]float64{}, params: map[string]interface{}{}, dists: map[string]interface{}{}}
	for _, d := range p.dims {
		v, ok := c.Get(d.p.Name)
		if !ok {
			v = d.p.Default
		}
		x, ok := d.toInternal(v)
		if !ok && d.levels != nil {
			continue // a level pruned away: this trial says nothing about the rest
		}
		dist := d.distribution()
		ext, err := goptuna.ToExternalRepresentation(dist, x)
		if err != nil {
			return nil, false
		}
		tp.internal[d.p.Name] = x
		tp.params[d.p.Name] = ext
		tp.dists[d.p.Name] = dist
	}
	return tp, true
}

// frozen returns history[k] as a complete goptuna trial whose value is its
// scalarisation under sc.
func (p *Proposer) frozen(k int, sc scalariser) (goptuna.FrozenTrial, bool) {
	for len(p.params) <= k {
		p.params = append(p.params, nil)
	}
	if p.params[k] == nil {
		tp, ok := p.paramsOf(p.history[k].Config)
		if !ok {
			return goptuna.FrozenTrial{}, false
		}
		p.params[k] = tp
	}
	return completeTrial(p.params[k], sc.value(p.outs[k])), true
}

func completeTrial(tp *trialParams, value float64) goptuna.FrozenTrial {
	return goptuna.FrozenTrial{
		State:              goptuna.TrialStateComplete,
		Value:              value,
		IntermediateValues: map[int]float64{},
		InternalParams:     tp.internal,
		Params:             tp.params,
		Distributions:      tp.dists,
		UserAttrs:          map[string]string{},
		SystemAttrs:        map[string]string{},
	}
}

// screen fits the scorer when due, scores the pool, refines the best
// candidates by mutating them and scoring the mutants (RefineRounds times),
// and returns the config to run; on a scorer error it logs and returns the
// sampler's first choice.
//
// Scoring late asks by the best feasible throughput alone, and four
// refinement rounds instead of two, were measured and dropped.
// Measurements: docs/search-log.md, "Proposer.screen".
func (p *Proposer) screen(ctx context.Context, pool []spaces.Config, sc scalariser) spaces.Config {
	if !p.fit(ctx) {
		return pool[0]
	}
	front := append(p.normFront(sc.norm), p.believed(ctx, sc.norm)...)
	ref := normRef(fixedRef(p.cfg.Objectives, p.cfg.SLO, p.cfg.Space.Target()), sc.norm)
	top := &hviTop{n: refineParents}
	score := func(cands []spaces.Config) ([]acqScore, bool) {
		preds, err := p.cfg.Scorer.Score(ctx, cands)
		if err != nil || len(preds) != len(cands) {
			p.cfg.Logger.Warn("surrogate scoring failed; using the sampler's choice", "err", err, "predictions", len(preds), "candidates", len(cands))
			return nil, false
		}
		return acquisition(preds, front, sc, p.cfg.Optimism, p.feasibilityExponent(), ref, top), true
	}
	scores, ok := score(pool)
	if !ok {
		return pool[0]
	}
	seen := map[string]bool{}
	for _, c := range pool {
		seen[c.ID()] = true
	}
	for range p.cfg.RefineRounds {
		// Mutate the top few; keep everything scored so far.
		order := make([]int, len(pool))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return scores[order[a]].better(scores[order[b]]) })
		top := order[:min(len(order), refineParents)]
		var mutants []spaces.Config
		per := max(1, len(pool)/(refineParents*(p.cfg.RefineRounds+1)))
		for _, i := range top {
			x := p.unitVector(pool[i])
			for got, attempts := 0, 0; got < per && attempts < 4*per; attempts++ {
				if c, ok := p.accept(p.mutate(x), seen); ok {
					mutants = append(mutants, c)
					got++
				}
			}
		}
		if len(mutants) == 0 {
			break
		}
		ms, ok := score(mutants)
		if !ok {
			break
		}
		pool, scores = append(pool, mutants...), append(scores, ms...)
	}
	if i := best(scores); i >= 0 {
		p.cfg.Logger.Debug("screened", "config", pool[i].ID(), "hvi", scores[i].hvi, "pool", len(pool))
		return pool[i]
	}
	return pool[0]
}

// fit refits the scorer when due (see RefitEvery, RefitGrowth); false when
// the fit failed (logged: the caller falls back to the sampler's choice).
func (p *Proposer) fit(ctx context.Context) bool {
	if f, ok := p.cfg.Scorer.(Fitter); ok && (!p.fitted || p.told >= p.refitAfter()) {
		if err := f.Fit(ctx, append([]Observation(nil), p.history...)); err != nil {
			p.cfg.Logger.Warn("surrogate fit failed; using the sampler's choice", "err", err)
			return false
		}
		p.fitted, p.told = true, 0
	}
	return true
}

// believed returns the scorer's mean prediction of each config in flight
// on other workers that it expects to be feasible, normalised by norm: a
// "kriging believer" front. The acquisition then measures a candidate's
// gain against what those configs will most likely add, so a candidate
// next to one in flight gains little; without it parallel workers
// screened toward one spot. Nil when nothing is in flight or scoring fails.
// Measurements: docs/search-log.md, "Proposer.believed".
func (p *Proposer) believed(ctx context.Context, norm normaliser) [][]float64 {
	if len(p.others) == 0 {
		return nil
	}
	cfgs := p.inFlight()
	preds, err := p.cfg.Scorer.Score(ctx, cfgs)
	if err != nil || len(preds) != len(cfgs) {
		return nil
	}
	var out [][]float64
	for _, pr := range preds {
		if len(pr.Mean) == len(p.cfg.Objectives) && pr.PFeasible >= believeFeasible {
			out = append(out, norm.apply(pr.Mean))
		}
	}
	return out
}

// believeFeasible is the feasibility probability from which a config in
// flight counts as a front member in believed.
const believeFeasible = 0.5

// refitAfter is the number of tells since the last fit that makes the
// surrogate due for a refit.
func (p *Proposer) refitAfter() int {
	return max(p.cfg.RefitEvery, int(p.cfg.RefitGrowth*float64(len(p.history))))
}

// refineParents is how many of the best candidates each refinement round
// mutates.
const refineParents = 8

func (p *Proposer) isPending(id string) bool {
	_, ok := p.pending[id]
	_, other := p.others[id]
	return ok || other
}

// liarValue is the value a pending config is told with: the median of the
// values observed so far. The worst value (the classic constant liar) kept
// workers apart but also away from the good region; the best crowds them.
// Measurements: docs/search-log.md, "liarValue".
func liarValue(told []float64) float64 {
	s := slices.Sorted(slices.Values(told))
	return s[len(s)/2]
}

// inFlight is the configs other workers run now (SetPending), by ID: the
// order the sampler and the scorer are told them in, the same every ask.
func (p *Proposer) inFlight() []spaces.Config {
	out := make([]spaces.Config, 0, len(p.others))
	for _, id := range slices.Sorted(maps.Keys(p.others)) {
		out = append(out, p.others[id])
	}
	return out
}

// SetPending replaces the configs that other workers of the study run now:
// they are never proposed, the TPE sampler sees each as a finished trial
// with the median value observed so far (a constant liar, liarValue), and
// screening counts each the scorer expects to be feasible as a front
// member at its predicted mean (believed), so proposals do not crowd one
// region. Without configs in flight the proposer does exactly what it
// does alone (the sequential tuner's figures are unchanged).
// Measurements: docs/search-log.md, "Proposer.SetPending".
func (p *Proposer) SetPending(cfgs []spaces.Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.others = make(map[string]spaces.Config, len(cfgs))
	for _, c := range cfgs {
		p.others[c.ID()] = c
	}
}
