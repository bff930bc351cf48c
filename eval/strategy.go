package eval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"

	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

// Phases of a run's engine starts.
const (
	PhaseSearch = "search" // a trial the strategy chose (counted in N)
	PhaseRepeat = "repeat" // a final re-measurement (not counted in N)
)

// Trial is one engine start of a strategy run, judged against the truth.
type Trial struct {
	Number   int                `json:"n"` // 1-based among the run's search trials (0 for repeats)
	Phase    string             `json:"phase"`
	ConfigID string             `json:"config_id"`
	Config   spaces.Config      `json:"config"`
	Status   trial.Status       `json:"status"`
	Failure  trial.FailureClass `json:"failure,omitempty"`
	// Measured is the noisy objective vector the strategy saw (nil when
	// failed) and MeasuredFeasible whether the measurement met the SLO.
	Measured         []float64 `json:"measured,omitempty"`
	MeasuredFeasible bool      `json:"measured_feasible"`
	MeasuredE2EP99   float64   `json:"measured_e2el_p99,omitempty"`
	True             Truth     `json:"true"`
	// GPUSeconds is (simulated startup + measurement) x GPUs the engine used.
	GPUSeconds float64 `json:"gpu_seconds"`
	// ScreenedOut: the config was measured only on a short run (low
	// fidelity) and not promoted; the run paid for it, but holds no
	// measurement of it.
	ScreenedOut bool `json:"screened_out,omitempty"`
	result      *trial.Result
}

// Belief is what a strategy would report to its user.
type Belief struct {
	// ConfigID is the recommended config (the grid: best measured
	// throughput under the E2E cap; proposer strategies: best measured
	// feasible throughput; the tuner: its loop's recommendation).
	ConfigID   string  `json:"config_id,omitempty"`
	Throughput float64 `json:"throughput,omitempty"` // as measured
	// Front are the measured vectors the strategy holds as its feasible front.
	Front [][]float64 `json:"front,omitempty"`
}

// Env is everything a strategy run gets.
type Env struct {
	Problem *Problem
	Seed    uint64
	Trials  int // search trials
	// History warm-starts the run (other contexts' observations); only
	// strategies that use history read it.
	History []search.Observation
	// Prior is a model trained on other scenarios (prior strategies only).
	Prior   *surrogate.Surrogate
	TempDir string
	Logger  *slog.Logger
	// NoiseFree measures without the simulator's noise (Config.NoiseFree).
	NoiseFree bool
}

// Strategy is one way of choosing trials.
type Strategy interface {
	Name() string
	Run(ctx context.Context, env Env) ([]Trial, Belief, error)
}

// measureRunner is the virtual-clock runner a strategy measures with, noise
// on as `tuner search --engine sim-virtual` builds it: every run draws
// fresh noise (the simulator seeds its noise by config, so the seed moves
// per run and re-measurements vary as real ones do), deterministic for the
// run seed; noise off with env.NoiseFree.
func measureRunner(env Env) (*sim.FreshNoiseRunner, error) {
	c := sim.DefaultConfig()
	c.Target = env.Problem.Target
	c.Noise = !env.NoiseFree
	c.Seed = env.Seed
	return sim.NewFreshNoiseRunner(c)
}

// record makes a Trial from a result (truth filled in later).
func (p *Problem) record(n int, phase string, cfg spaces.Config, res *trial.Result) Trial {
	t := Trial{Number: n, Phase: phase, ConfigID: cfg.ID(), Config: cfg, Status: res.Status, Failure: res.Failure, result: res}
	j := p.judge(res)
	t.Measured, t.MeasuredFeasible, t.MeasuredE2EP99 = j.Vec, j.Feasible, j.E2EP99
	t.GPUSeconds = (res.Phases.StartupS + res.Phases.MeasureS) * float64(spaces.LayoutOf(cfg).GPUs())
	t.ScreenedOut = res.Failure == trial.FailScreenedOut
	return t
}

// found reports whether the run holds the config as a truly SLO-feasible
// measurement (a screened-out config was paid for, not found).
func (t *Trial) found() bool { return t.True.Feasible && !t.ScreenedOut }

// bestMeasured is the belief of a strategy that trusts its measurements.
func bestMeasured(trials []Trial, p *Problem) Belief {
	var b Belief
	var pts [][]float64
	for _, t := range trials {
		if !t.MeasuredFeasible {
			continue
		}
		pts = append(pts, t.Measured)
		if t.Measured[0] > b.Throughput {
			b.ConfigID, b.Throughput = t.ConfigID, t.Measured[0]
		}
	}
	b.Front = frontOf(pts, p)
	return b
}

// --- proposer-driven baselines

// ProposerStrategy asks a search.Proposer (no pruning, no surrogate) and
// runs each proposal: random search and plain goptuna TPE.
type ProposerStrategy struct {
	Label   string
	Sampler search.SamplerKind
}

func (s ProposerStrategy) Name() string { return s.Label }

func (s ProposerStrategy) Run(ctx context.Context, env Env) ([]Trial, Belief, error) {
	p := env.Problem
	pc := search.DefaultProposerConfig()
	pc.Space, pc.Sampler, pc.Seed = p.Space, s.Sampler, env.Seed
	pc.Objectives, pc.SLO, pc.Logger = p.Objectives, p.SLO, env.Logger
	prop, err := search.NewProposer(pc)
	if err != nil {
		return nil, Belief{}, err
	}
	r, err := measureRunner(env)
	if err != nil {
		return nil, Belief{}, err
	}
	var out []Trial
	for n := 1; n <= env.Trials; n++ {
		cfg, err := prop.Ask(ctx)
		if errors.Is(err, search.ErrExhausted) {
			break
		}
		if err != nil {
			return nil, Belief{}, fmt.Errorf("%s ask: %w", s.Label, err)
		}
		res, err := r.Run(ctx, cfg, p.Workload)
		if err != nil {
			return nil, Belief{}, err
		}
		prop.Tell(cfg, &res)
		out = append(out, p.record(n, PhaseSearch, cfg, &res))
	}
	return out, bestMeasured(out, p), nil
}

// --- the auto_tune-style grid

// GridStrategy is vLLM's benchmarks/auto_tune method: find the highest
// gpu-memory-utilization from 0.98 down in 0.01 steps at which the engine
// starts with the largest max-num-seqs and max-num-batched-tokens (every
// failed start counts as a trial), then sweep the max-num-seqs x
// max-num-batched-tokens grid at that utilisation (coarse to fine, so any
// prefix of N trials covers both ranges), every other flag at its default;
// the pick is the best measured throughput whose P99 E2E latency is under
// the scenario's cap.
type GridStrategy struct{}

func (GridStrategy) Name() string { return "grid" }

func (GridStrategy) Run(ctx context.Context, env Env) ([]Trial, Belief, error) {
	p := env.Problem
	r, err := measureRunner(env)
	if err != nil {
		return nil, Belief{}, err
	}
	def := p.Space.DefaultConfig()
	var out []Trial
	n := 0
	run := func(cfg spaces.Config) (*trial.Result, error) {
		n++
		res, err := r.Run(ctx, cfg, p.Workload)
		if err != nil {
			return nil, err
		}
		out = append(out, p.record(n, PhaseSearch, cfg, &res))
		return &res, nil
	}
	seqs, toks := gridSeqs[len(gridSeqs)-1], gridTokens[len(gridTokens)-1]
	util := def.Float("gpu_memory_utilization")
	done := map[string]bool{}
	if up, ok := p.Space.Param("gpu_memory_utilization"); ok {
		for u := math.Min(0.98, up.Max); u >= 0.90-1e-9 && n < env.Trials; u -= 0.01 {
			cfg, err := p.Space.Normalize(def.With("gpu_memory_utilization", spaces.FloatValue(math.Round(u*100)/100)).
				With("max_num_seqs", spaces.IntValue(seqs)).With("max_num_batched_tokens", spaces.IntValue(toks)))
			if err != nil || p.Space.Validate(cfg) != nil {
				continue
			}
			res, err := run(cfg)
			if err != nil {
				return nil, Belief{}, err
			}
			done[cfg.ID()] = true
			if res.Usable() {
				util = cfg.Float("gpu_memory_utilization")
				break
			}
		}
	}
	base := def.With("gpu_memory_utilization", spaces.FloatValue(util))
	for _, cfg := range gridConfigs(p, base) {
		if n >= env.Trials {
			break
		}
		if done[cfg.ID()] {
			continue
		}
		if _, err := run(cfg); err != nil {
			return nil, Belief{}, err
		}
	}
	var b Belief
	var pts [][]float64
	for _, t := range out {
		if t.Measured == nil {
			continue
		}
		if t.MeasuredFeasible {
			pts = append(pts, t.Measured)
		}
		if t.MeasuredE2EP99 <= p.Scenario.E2ECapMS && t.Measured[0] > b.Throughput {
			b.ConfigID, b.Throughput = t.ConfigID, t.Measured[0]
		}
	}
	b.Front = frontOf(pts, p)
	return out, b, nil
}

// --- the full tuner

// TunerStrategy is the tuner as `tuner search --engine sim-virtual` runs
// it: search.Prune over the history (static memory facts when there is
// none), a TPE search.Proposer with surrogate screening
// (search.SurrogateScorer), and tuner.Loop over the virtual-clock runner and
// a bbolt store in a temporary file, with the loop's final re-measurement
// of its best configs. Warm reads Env.History (other contexts, weight
// WarmWeight) for pruning and the surrogate.
type TunerStrategy struct {
	Label string
	Warm  bool
	// Prior steers the search with Env.Prior as tuner search --surrogate does.
	Prior bool
	// Finalists and Repeats of the final re-measurement (0: the loop's defaults).
	Finalists, Repeats int
	// Screen is the loop's low-fidelity screening (tuner search
	// --screen-fraction); zero = off.
	Screen tuner.Screening
	// Oracle screens candidates with their noise-free truth in place of the
	// surrogate (truthScorer): the same proposals, bisections and probes
	// with a perfect model, so the gap between it and the tuner is what a
	// better model could gain and its own gap to the truth is the
	// proposals'. Each candidate costs a simulator run (about 80 s a run of
	// 24 trials where the tuner takes 2-3 s).
	Oracle bool
}

// truthScorer predicts each candidate's noise-free truth, without spread:
// P(feasible) is 1 or 0; a config that fails predicts zeros (it scores
// nothing, being infeasible).
type truthScorer struct{ ev *Evaluator }

func (o truthScorer) Score(ctx context.Context, cands []spaces.Config) ([]search.Prediction, error) {
	out := make([]search.Prediction, len(cands))
	n := len(o.ev.prob.Objectives)
	for i, c := range cands {
		t, err := o.ev.Truth(ctx, c)
		if err != nil {
			return nil, err
		}
		q := search.Prediction{Mean: make([]float64, n), Std: make([]float64, n)}
		copy(q.Mean, t.Vec)
		if t.Feasible {
			q.PFeasible = 1
		}
		out[i] = q
	}
	return out, nil
}

// WarmWeight is the weight of another scenario's trials, as `tuner search`
// gives trials of other studies.
const WarmWeight = 0.5

func (s TunerStrategy) Name() string { return s.Label }

// proposer builds the tuner's proposer: pruning over hist, TPE with
// surrogate screening (the truth's with s.Oracle), steered by Env.Prior
// when s.Prior.
func (s TunerStrategy) proposer(env Env, hist []search.Observation) (*search.Proposer, error) {
	p := env.Problem
	po := search.DefaultPruneOptions()
	po.Objectives, po.SLO = p.Objectives, p.SLO
	pruned, _ := search.Prune(p.Space, hist, po)

	pc := search.DefaultProposerConfig()
	pc.Space, pc.Sampler, pc.Seed = pruned, search.SamplerTPE, env.Seed
	pc.Objectives, pc.SLO, pc.History, pc.Logger = p.Objectives, p.SLO, hist, env.Logger
	if s.Oracle {
		ev, err := NewEvaluator(p)
		if err != nil {
			return nil, err
		}
		pc.Scorer = truthScorer{ev}
		return search.NewProposer(pc)
	}
	so := surrogate.DefaultOptions()
	so.Seed = env.Seed
	so.Threads = 1
	sc, err := search.NewSurrogateScorer(p.Space, p.Workload, p.Objectives, p.SLO, so)
	if err != nil {
		return nil, err
	}
	if s.Prior {
		if env.Prior == nil {
			return nil, fmt.Errorf("%w: %s without a prior model", ErrConfig, s.Label)
		}
		if err := sc.SetPrior(env.Prior, search.DefaultPriorWeight, p.Space); err != nil {
			return nil, err
		}
		pc.MinScreenHistory = 1
	}
	pc.Scorer = sc
	return search.NewProposer(pc)
}

func (s TunerStrategy) Run(ctx context.Context, env Env) ([]Trial, Belief, error) {
	p := env.Problem
	var hist []search.Observation
	if s.Warm {
		hist = env.History
	}
	prop, err := s.proposer(env, hist)
	if err != nil {
		return nil, Belief{}, err
	}
	r, err := measureRunner(env)
	if err != nil {
		return nil, Belief{}, err
	}

	st, err := boltstore.Open(ctx, filepath.Join(env.TempDir, "tuner.db"), boltstore.Options{NoSync: true, Timeout: 10e9, Logger: env.Logger})
	if err != nil {
		return nil, Belief{}, err
	}
	defer st.Close()
	metrics := tuner.Metrics{Throughput: p.Objectives[0].Name, Latency: p.Objectives[1].Name}
	key := store.StudyKey{Model: p.Target.Model.Name, GPU: p.Target.GPU.Name, GPUCount: p.Target.GPUCount,
		Engine: "sim-virtual", EngineVersion: p.Target.EngineVersion, Workload: p.Workload.Name,
		Objectives: metrics.Objectives(), SLO: p.SLO.String(), SpaceHash: p.Space.Hash()}
	study, err := st.EnsureStudy(ctx, key)
	if err != nil {
		return nil, Belief{}, err
	}
	ls := tuner.StudyStore{Store: st, Study: study.ID}
	lc := tuner.DefaultConfig()
	lc.Study, lc.Workload, lc.SLO, lc.Metrics, lc.Default = study.ID, p.Workload, p.SLO, metrics, p.Space.DefaultConfig()
	lc.MaxTrials, lc.Budget, lc.TrialTimeout, lc.Patience = env.Trials, 0, 0, 0
	if s.Finalists > 0 {
		lc.Finalists = s.Finalists
	}
	if s.Repeats > 0 {
		lc.Repeats = s.Repeats
	}
	lc.Screen = s.Screen
	lc.Logger = env.Logger
	loop, err := tuner.New(lc, r, tuner.SearchProposer{Proposer: prop}, ls)
	if err != nil {
		return nil, Belief{}, err
	}
	rep, err := loop.Run(ctx)
	if err != nil {
		return nil, Belief{}, fmt.Errorf("tuner loop: %w", err)
	}
	trials, err := ls.Trials(ctx)
	if err != nil {
		return nil, Belief{}, err
	}
	var out []Trial
	n := 0
	for _, t := range trials {
		if t.Result == nil || !t.State.Finished() {
			continue
		}
		phase, num := PhaseRepeat, 0
		if t.Repeat == 0 { // a search trial
			n++
			phase, num = PhaseSearch, n
		}
		out = append(out, p.record(num, phase, t.Config, t.Result))
	}
	var b Belief
	if rc := rep.Recommended; rc != nil {
		b.ConfigID, b.Throughput = rc.ConfigID, rc.Throughput.Median
	}
	for _, c := range rep.Front {
		b.Front = append(b.Front, []float64{c.Throughput.Median, c.Latency.Median, c.VRAM.Median})
	}
	return out, b, nil
}
