package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"gonum.org/v1/gonum/floats"

	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/surrogate"
)

// Config configures a benchmark run. DefaultConfig gives the full
// benchmark; QuickConfig the CI variant.
type Config struct {
	Scenarios   []Scenario
	Strategies  []string // names of DefaultStrategies to run (nil: all)
	Seeds       int      // seeds 1..Seeds
	Trials      int      // search trials per run (N)
	Checkpoints []int    // trial counts the report tabulates (those <= Trials)
	Plan        SamplePlan
	// JoinRuns makes the reference front the truth's joined with every
	// truly feasible config the runs tried, and skips the truth check: for
	// a smoke run whose small sample is no truth (QuickConfig). Measured
	// figures come from the fixed truth alone (false).
	JoinRuns bool
	// CacheDir holds the ground-truth cache ("" = compute, do not cache).
	CacheDir string
	// WriteCache stores recomputed ground truth in CacheDir.
	WriteCache bool
	OutDir     string // where the report goes ("" = nowhere)
	Parallel   int    // concurrent jobs (>= 1)
	// PruneHistory is the number of the tuner's first trials pruning is
	// judged from.
	PruneHistory int
	// PriorSamples is the number of noise-free configs of each other
	// scenario the tuner-prior strategy's model is trained on.
	PriorSamples int
	// NoiseFree measures every trial without the simulator's noise: what
	// the search loses by its own choices alone, apart from measurement
	// noise (the report says which).
	NoiseFree bool
	// Streams is how many request streams other than the scenario's the
	// tuner's runs are judged on beside it (Run.Streams; 0: none). Each
	// costs 24 noise-free runs a tuner run: at DefaultStreams the tuner and
	// four workers on the eight example scenarios, 20 seeds, took 849 s
	// instead of 475.
	Streams  int
	Progress io.Writer // progress lines; nil = none
	Logger   *slog.Logger
}

// DefaultConfig is the full benchmark: the four scenarios, 5 seeds, 48
// trials, the committed cache's plan.
func DefaultConfig() Config {
	return Config{
		Scenarios: DefaultScenarios(), Seeds: 5, Trials: 48, Checkpoints: []int{8, 16, 24, 48},
		Plan: DefaultSamplePlan(), CacheDir: "eval/testdata", WriteCache: true, Parallel: 1, PruneHistory: 24,
		PriorSamples: 300, Streams: DefaultStreams,
	}
}

// QuickConfig is the CI variant: one scenario, one seed, 10 trials, a small
// ground-truth sample, nothing cached.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Scenarios = DefaultScenarios()[:1]
	c.Seeds, c.Trials, c.Checkpoints = 1, 10, []int{4, 8, 10}
	c.Plan = SamplePlan{Random: 120, Refine: 40, Seed: 11}
	c.JoinRuns = true
	c.CacheDir, c.WriteCache = "", false
	c.PruneHistory = 8
	return c
}

func (c *Config) validate() error {
	switch {
	case len(c.Scenarios) == 0:
		return fmt.Errorf("%w: no scenarios", ErrConfig)
	case c.Seeds < 1:
		return fmt.Errorf("%w: seeds %d < 1", ErrConfig, c.Seeds)
	case c.Trials < 1:
		return fmt.Errorf("%w: trials %d < 1", ErrConfig, c.Trials)
	case c.Plan.Random < 1:
		return fmt.Errorf("%w: ground-truth sample %d < 1", ErrConfig, c.Plan.Random)
	case c.Streams < 0:
		return fmt.Errorf("%w: other request streams %d < 0", ErrConfig, c.Streams)
	}
	if c.Parallel < 1 {
		c.Parallel = 1
	}
	if c.PriorSamples < 1 {
		c.PriorSamples = DefaultConfig().PriorSamples
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.PruneHistory <= 0 || c.PruneHistory > c.Trials {
		c.PruneHistory = min(24, c.Trials)
	}
	var cps []int
	for _, k := range c.Checkpoints {
		if k >= 1 && k <= c.Trials {
			cps = append(cps, k)
		}
	}
	if len(cps) == 0 || cps[len(cps)-1] != c.Trials {
		cps = append(cps, c.Trials)
	}
	sort.Ints(cps)
	c.Checkpoints = slices.Compact(cps)
	for _, n := range c.Strategies {
		if strategyByName(n) == nil {
			known := StrategyNames()
			for _, x := range ExtraStrategies() {
				known = append(known, x.Name())
			}
			return fmt.Errorf("%w: unknown strategy %q (known: %v)", ErrConfig, n, known)
		}
	}
	return nil
}

// Strategy names.
const (
	StratRandom = "random"
	StratGrid   = "grid"
	StratTPE    = "tpe"
	StratTuner  = "tuner"
	StratWarm   = "tuner-warm"
	StratPrior  = "tuner-prior"
	// StratScreen is the tuner with low-fidelity screening (tuner search
	// --screen-fraction ScreenFraction): run only when named.
	StratScreen = "tuner-sh"
	// StratOracle is the tuner screening with the truth (TunerStrategy.
	// Oracle): run only when named.
	StratOracle = "tuner-oracle"
)

// ScreenFraction is the short run's share of the requests in StratScreen.
const ScreenFraction = 0.25

// DefaultStrategies are the five strategies of the benchmark, in report order.
func DefaultStrategies() []Strategy {
	return []Strategy{
		ProposerStrategy{Label: StratRandom, Sampler: search.SamplerRandom},
		GridStrategy{},
		ProposerStrategy{Label: StratTPE, Sampler: search.SamplerTPE},
		TunerStrategy{Label: StratTuner},
		TunerStrategy{Label: StratWarm, Warm: true},
		TunerStrategy{Label: StratPrior, Prior: true},
	}
}

func usesPrior(s Strategy) bool { ts, ok := s.(TunerStrategy); return ok && ts.Prior }

// StrategyNames lists the strategies' names.
func StrategyNames() []string {
	var out []string
	for _, s := range DefaultStrategies() {
		out = append(out, s.Name())
	}
	return out
}

func strategyByName(n string) Strategy {
	for _, s := range append(DefaultStrategies(), ExtraStrategies()...) {
		if s.Name() == n {
			return s
		}
	}
	return nil
}

// Run is one strategy run on one scenario and seed.
type Run struct {
	Scenario string  `json:"scenario"`
	Strategy string  `json:"strategy"`
	Seed     uint64  `json:"seed"`
	Trials   []Trial `json:"trials"`
	Belief   Belief  `json:"belief"`
	WallS    float64 `json:"wall_s"`
	// Streams judges the run beside the truth on Config.Streams other
	// request streams: the tuner's runs, whose figures the goals state (nil
	// for the other strategies, without streams and when the truth has no
	// front).
	Streams *StreamFigures `json:"other_streams,omitempty"`
}

// StreamFigures compare a run with the truth on other request streams
// (Evaluator.OnStreams): where a run short of the truth on the scenario's
// stream is short in its configs.
type StreamFigures struct {
	// HVRatio is the hypervolume the run's first HVStreamTrials search
	// trials hold on the streams over what the truth's front configs hold
	// there, each summed over the streams (0 when the front holds none).
	HVRatio float64 `json:"hv_ratio"`
	// Pick says whether the run picked a config. Ratio is then the pick's
	// output throughput over the truth's best config's, each summed over
	// the streams, SLO met or not; Met and BestMet count the streams on
	// which the pick and the best config meet the SLO.
	Pick    bool    `json:"pick"`
	Ratio   float64 `json:"throughput_ratio,omitempty"`
	Met     int     `json:"slo_met,omitempty"`
	BestMet int     `json:"best_slo_met,omitempty"`
}

// HVStreamTrials is the search trials StreamFigures.HVRatio counts: the
// HV@24 goal's.
const HVStreamTrials = 24

// scenarioState is what the harness holds per scenario.
type scenarioState struct {
	prob   *Problem
	ev     *Evaluator
	truth  *GroundTruth
	cached bool
	evalMS float64
	prior  *surrogate.Surrogate // trained on the other scenarios (prior strategies only)
	// streamsHV is what the truth's front configs hold on the other
	// request streams (truthOnStreams).
	streamsMu sync.Mutex
	streamsHV []float64
}

// Execute runs the benchmark and returns the report (also written to
// cfg.OutDir when set).
func Execute(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	var mu sync.Mutex
	progress := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(cfg.Progress, "[%6.1fs] "+format+"\n", append([]any{time.Since(start).Seconds()}, args...)...)
	}
	strategies := DefaultStrategies()
	if len(cfg.Scenarios) < 2 {
		// A prior is trained on the other scenarios: with one there are none.
		strategies = slices.DeleteFunc(strategies, usesPrior)
	}
	if len(cfg.Strategies) > 0 {
		strategies = nil
		for _, n := range cfg.Strategies {
			strategies = append(strategies, strategyByName(n))
		}
	}

	// Refused before any ground truth is computed (minutes on a real plan).
	if slices.ContainsFunc(strategies, usesPrior) && len(cfg.Scenarios) < 2 {
		return nil, fmt.Errorf("%w: %s needs at least two scenarios (its prior is trained on the others)", ErrConfig, StratPrior)
	}

	// Phase 1: problems and ground truth, one scenario per job.
	states := make([]*scenarioState, len(cfg.Scenarios))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Parallel)
	for i, sc := range cfg.Scenarios {
		g.Go(func() error {
			st, err := groundTruth(gctx, cfg, sc, progress)
			states[i] = st
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	// Phase 1b: the prior models, when a strategy uses one.
	if slices.ContainsFunc(strategies, usesPrior) {
		g, gctx = errgroup.WithContext(ctx)
		g.SetLimit(cfg.Parallel)
		for i := range states {
			g.Go(func() error {
				t0 := time.Now()
				m, err := trainPrior(gctx, states, i, cfg.PriorSamples, 1)
				if err != nil {
					return err
				}
				states[i].prior = m
				progress("%-22s prior model: %d configs of the other scenarios (%.1fs)", states[i].prob.Scenario.Name, m.Metrics.Samples, time.Since(t0).Seconds())
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}

	// Phase 2, seed by seed: every run except warm starts, then the warm
	// starts, whose history is the source scenario's tuner run of the same
	// seed. Seed-major, so a benchmark stopped part-way has every scenario
	// and strategy at its first seeds (the progress lines carry the ratios).
	type job struct {
		si    int
		strat Strategy
		seed  uint64
	}
	runs := map[string]*Run{}
	var runsMu sync.Mutex
	runKey := func(scen, strat string, seed uint64) string { return fmt.Sprintf("%s|%s|%d", scen, strat, seed) }
	do := func(ctx context.Context, j job, hist []search.Observation) error {
		st := states[j.si]
		r, err := runOne(ctx, cfg, st, j.strat, j.seed, hist)
		if err != nil {
			return fmt.Errorf("%s/%s seed %d: %w", st.prob.Scenario.Name, j.strat.Name(), j.seed, err)
		}
		c := curve(r.Trials, cfg.Trials, st.prob, st.truth.Ref, st.truth.HV)
		progress("%-22s %-10s seed %d: %d trials, HV ratio %.3f vs the truth (%.1fs)", st.prob.Scenario.Name, j.strat.Name(), j.seed, len(r.Trials), c[len(c)-1], r.WallS)
		runsMu.Lock()
		runs[runKey(st.prob.Scenario.Name, j.strat.Name(), j.seed)] = r
		runsMu.Unlock()
		return nil
	}
	for seed := uint64(1); seed <= uint64(cfg.Seeds); seed++ {
		var first, warm []job
		for si := range states {
			for _, s := range strategies {
				j := job{si, s, seed}
				if ts, ok := s.(TunerStrategy); ok && ts.Warm {
					warm = append(warm, j)
				} else {
					first = append(first, j)
				}
			}
		}
		g, gctx = errgroup.WithContext(ctx)
		g.SetLimit(cfg.Parallel)
		for _, j := range first {
			g.Go(func() error { return do(gctx, j, nil) })
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		g, gctx = errgroup.WithContext(ctx)
		g.SetLimit(cfg.Parallel)
		for _, j := range warm {
			g.Go(func() error {
				hist, err := warmHistory(gctx, cfg, states[j.si].prob, j.seed, func(scen string) *Run {
					runsMu.Lock()
					defer runsMu.Unlock()
					return runs[runKey(scen, StratTuner, j.seed)]
				}, progress)
				if err != nil {
					return err
				}
				return do(gctx, j, hist)
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}

	rep, err := buildReport(ctx, cfg, states, strategies, runs, runKey)
	if err != nil {
		return nil, err
	}
	rep.WallS = time.Since(start).Seconds()
	if cfg.OutDir != "" {
		if err := rep.Write(cfg.OutDir); err != nil {
			return rep, err
		}
		progress("report written to %s", cfg.OutDir)
	}
	return rep, TruthCheck(rep)
}

// groundTruth loads the scenario's cached truth or computes (and caches) it.
func groundTruth(ctx context.Context, cfg Config, sc Scenario, progress func(string, ...any)) (*scenarioState, error) {
	p, err := sc.Resolve()
	if err != nil {
		return nil, err
	}
	ev, err := NewEvaluator(p)
	if err != nil {
		return nil, err
	}
	st := &scenarioState{prob: p, ev: ev}
	t0 := time.Now()
	keys, err := KeysOf(ctx, p, cfg.Plan)
	if err != nil {
		return nil, err
	}
	key := keys.Truth
	st.evalMS = time.Since(t0).Seconds() * 1000 / fingerprintProbes
	var sampled *SampleStage
	if cfg.CacheDir != "" {
		gt, err := LoadTruth(cfg.CacheDir, cacheName(sc.Name, cfg.Plan), key)
		switch {
		case err == nil:
			progress("%-22s ground truth from cache (key %s): %d configs sampled, front %d, HV %.4g", sc.Name, key, gt.Evaluated, len(gt.Front), gt.HV)
			st.truth, st.cached = gt, true
			return st, nil
		case errors.Is(err, ErrStaleCache), errors.Is(err, errOldFormat):
			// A file of the same sample stage (the same simulator, space,
			// scenario and sample plan: another polish or format) is a
			// front of that sample's configs: the polish starts from it,
			// so a recomputed truth holds at least the old one's
			// hypervolume.
			sampled = loadSampled(cfg.CacheDir, cacheName(sc.Name, cfg.Plan), keys.Sample)
			progress("%-22s ground-truth cache is stale or an older format (%v): recomputing (sample stage reused: %v)", sc.Name, err, sampled != nil)
		case errors.Is(err, fs.ErrNotExist):
			progress("%-22s no ground-truth cache: computing", sc.Name)
		default:
			return nil, err
		}
	}
	t0 = time.Now()
	gt, err := ComputeTruth(ctx, p, ev, cfg.Plan, keys, sampled, func(done, total int) {
		if done%500 == 0 {
			progress("%-22s ground truth %d/%d", sc.Name, done, total)
		}
	})
	if err != nil {
		return nil, err
	}
	if n := ev.Evals(); n > 0 {
		st.evalMS = time.Since(t0).Seconds() * 1000 / float64(n)
	}
	progress("%-22s ground truth: %d configs (%d feasible), front %d (sampled %d), HV %.4g (sampled x%.4f), polish %d evaluations (converged %v), %.1f ms/eval",
		sc.Name, gt.Evaluated, gt.Feasible, len(gt.Front), gt.SampledFront, gt.HV, gt.HV/gt.SampledHV, gt.Polished, gt.Converged, st.evalMS)
	st.truth = gt
	if cfg.CacheDir != "" && cfg.WriteCache {
		if err := SaveTruth(cfg.CacheDir, gt, cacheName(sc.Name, cfg.Plan)); err != nil {
			return nil, fmt.Errorf("cache ground truth: %w", err)
		}
	}
	return st, nil
}

// cacheName names a scenario's cache file: the scenario for the default
// sample plan, with the plan's sizes otherwise (the polish budget is in the
// key, not the name: another budget recomputes the polish from the file's
// sample stage).
func cacheName(scenario string, plan SamplePlan) string {
	if plan.samplePart() == DefaultSamplePlan().samplePart() {
		return scenario
	}
	return fmt.Sprintf("%s-r%d-f%d-s%d", scenario, plan.Random, plan.Refine, plan.Seed)
}

// env is what every run of p under cfg shares (a warm start's source run
// too): its trials, logger and noise.
func (c Config) env(p *Problem, seed uint64, dir string) Env {
	return Env{Problem: p, Seed: seed, Trials: c.Trials, TempDir: dir, Logger: c.Logger, NoiseFree: c.NoiseFree}
}

// runOne runs a strategy and judges its trials against the truth.
func runOne(ctx context.Context, cfg Config, st *scenarioState, s Strategy, seed uint64, hist []search.Observation) (*Run, error) {
	dir, err := os.MkdirTemp("", "tuner-eval-*")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	t0 := time.Now()
	env := cfg.env(st.prob, seed, dir)
	env.History, env.Prior = hist, st.prior
	trials, belief, err := s.Run(ctx, env)
	if err != nil {
		return nil, err
	}
	wall := time.Since(t0).Seconds()
	for i := range trials {
		if trials[i].True, err = st.ev.Truth(ctx, trials[i].Config); err != nil {
			return nil, err
		}
	}
	r := &Run{Scenario: st.prob.Scenario.Name, Strategy: s.Name(), Seed: seed, Trials: trials, Belief: belief, WallS: wall}
	if s.Name() == StratTuner && cfg.Streams > 0 { // the goals' strategy
		if r.Streams, err = onStreams(ctx, st, r, cfg.Streams); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// onStreams is Run.Streams.
func onStreams(ctx context.Context, st *scenarioState, r *Run, n int) (*StreamFigures, error) {
	best, ok := st.truth.Best()
	if !ok {
		return nil, nil
	}
	var f StreamFigures
	var cfgs []spaces.Config
	for _, t := range r.Trials {
		if t.Phase == PhaseSearch && t.Number <= HVStreamTrials && !t.ScreenedOut {
			cfgs = append(cfgs, t.Config)
		}
	}
	hv, err := st.hvOnStreams(ctx, cfgs, n)
	if err != nil {
		return nil, err
	}
	ref, err := st.truthOnStreams(ctx, n)
	if err != nil {
		return nil, err
	}
	if s := floats.Sum(ref); s > 0 {
		f.HVRatio = floats.Sum(hv) / s
	}
	i := slices.IndexFunc(r.Trials, func(t Trial) bool { return t.ConfigID == r.Belief.ConfigID })
	if r.Belief.ConfigID == "" || i < 0 {
		return &f, nil
	}
	pick, err := st.ev.OnStreams(ctx, r.Trials[i].Config, n)
	if err != nil {
		return nil, err
	}
	bt, err := st.ev.OnStreams(ctx, best.Config, n)
	if err != nil {
		return nil, err
	}
	f.Pick = true
	sp, met := streamTotals(pick)
	sb, bestMet := streamTotals(bt)
	f.Met, f.BestMet = met, bestMet
	if sb > 0 {
		f.Ratio = sp / sb
	}
	return &f, nil
}

// streamTotals sums a config's output throughput over its streams, SLO met
// or not, and counts the streams on which it meets the SLO.
func streamTotals(ts []Truth) (throughput float64, met int) {
	for _, t := range ts {
		if t.Vec != nil {
			throughput += t.Vec[0]
		}
		if t.Feasible {
			met++
		}
	}
	return throughput, met
}

// hvOnStreams is the hypervolume cfgs hold on each of n other request
// streams: their front there, of the configs that meet the SLO on it,
// against the truth's reference point.
func (st *scenarioState) hvOnStreams(ctx context.Context, cfgs []spaces.Config, n int) ([]float64, error) {
	pts := make([][][]float64, n)
	for _, c := range cfgs {
		ts, err := st.ev.OnStreams(ctx, c, n)
		if err != nil {
			return nil, err
		}
		for k, t := range ts {
			if t.Feasible {
				pts[k] = append(pts[k], t.Vec)
			}
		}
	}
	out := make([]float64, n)
	for k := range pts {
		out[k] = hvOf(pts[k], st.prob, st.truth.Ref) // dominated points add nothing
	}
	return out, nil
}

// truthOnStreams is hvOnStreams of the truth's front configs, computed once
// for each n.
func (st *scenarioState) truthOnStreams(ctx context.Context, n int) ([]float64, error) {
	st.streamsMu.Lock()
	defer st.streamsMu.Unlock()
	if len(st.streamsHV) != n {
		hv, err := st.hvOnStreams(ctx, st.truth.FrontConfigs(), n)
		if err != nil {
			return nil, err
		}
		st.streamsHV = hv
	}
	return st.streamsHV, nil
}

// warmHistory is the warm-start history of a problem: the source
// scenario's tuner trials of the same seed (run here when the benchmark
// does not include that scenario), weighted WarmWeight, with their context.
func warmHistory(ctx context.Context, cfg Config, p *Problem, seed uint64, lookup func(string) *Run, progress func(string, ...any)) ([]search.Observation, error) {
	src := p.Scenario.WarmFrom
	if src == "" {
		return nil, nil
	}
	scs, err := FindScenarios(append(slices.Clone(cfg.Scenarios), DefaultScenarios()...), src)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: warm start: %w", p.Scenario.Name, err)
	}
	sp, err := scs[0].Resolve()
	if err != nil {
		return nil, err
	}
	r := lookup(src)
	if r == nil {
		dir, err := os.MkdirTemp("", "tuner-eval-warm-*")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		trials, _, err := TunerStrategy{Label: StratTuner}.Run(ctx, cfg.env(sp, seed, dir))
		if err != nil {
			return nil, fmt.Errorf("warm-start source %s: %w", src, err)
		}
		progress("%-22s warm-start history: ran the tuner on %s (%d trials)", p.Scenario.Name, src, len(trials))
		r = &Run{Trials: trials}
	}
	var hist []search.Observation
	for _, t := range r.Trials {
		if t.Phase != PhaseSearch || t.result == nil {
			continue
		}
		tg, w := sp.Target, sp.Workload
		hist = append(hist, search.Observation{Config: t.Config, Result: t.result, Weight: WarmWeight, Target: &tg, Workload: &w})
	}
	return hist, nil
}
