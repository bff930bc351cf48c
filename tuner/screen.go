package tuner

import (
	"context"
	"fmt"
	"math"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// Screening is low-fidelity screening of the proposals, successive-halving
// style: each proposed config is first measured on a short run (Fraction
// of the workload's measured requests, same warm-up and load levels), and
// only a promising one is measured in full. A screened-out config ends its
// trial as failed with trial.FailScreenedOut (never in a front, never
// recommended, never a finalist), and the short stage is kept in the
// trial's Result.Screen either way. The proposer learns the short run's
// figures of a screened-out config (told): a verdict "failed" alone
// would leave TPE and the surrogate nothing to steer by when most
// proposals miss the SLO.
//
// The first Calibrate short stages are promoted whatever they
// read. After them a short stage is promising when its measurement,
// corrected by the
// study's own short/full pairs (screenBias), meets the SLO relaxed by
// Margin, is not dominated, even with a Margin handicap in its favour on
// throughput and latency, by
// the short stage of a config whose full run is SLO-feasible (short runs
// compare with short runs: they share their bias), and is dominated by
// fewer than a Keep share of the short stages of the configs so far
// (asynchronous successive halving's rung: about Keep of the configs go
// on).
type Screening struct {
	// Fraction is the short stage's share of the measured requests; 0 =
	// no screening.
	Fraction float64 `json:"fraction,omitempty"`
	// Keep is the share of the rung a promoted config may be dominated by
	// at most (0: DefaultScreenKeep).
	Keep float64 `json:"keep,omitempty"`
	// Margin is the relative slack of the SLO and front tests (0:
	// DefaultScreenMargin; negative: none).
	Margin float64 `json:"margin,omitempty"`
	// Calibrate is the number of short runs promoted whatever they read,
	// so that the study has short/full pairs to correct the next ones by
	// (0: DefaultScreenCalibrate; negative: none).
	Calibrate int `json:"calibrate,omitempty"`
}

// Defaults of Screening.
const (
	DefaultScreenKeep      = 0.5
	DefaultScreenMargin    = 0.10
	DefaultScreenCalibrate = 3
)

// On reports whether proposals are screened.
func (s Screening) On() bool { return s.Fraction > 0 }

func (s Screening) keep() float64   { return knob(s.Keep, DefaultScreenKeep) } // Validate refuses a negative one
func (s Screening) calibrate() int  { return knob(s.Calibrate, DefaultScreenCalibrate) }
func (s Screening) margin() float64 { return knob(s.Margin, DefaultScreenMargin) }

// knob reads a setting whose zero value means its default and a negative
// one "none".
func knob[T int | float64](v, def T) T {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return def
	}
	return v
}

// Validate checks the knobs; messages name the CLI flags.
func (s Screening) Validate() error {
	switch {
	case math.IsNaN(s.Fraction) || s.Fraction < 0 || s.Fraction >= 1:
		return fmt.Errorf("--screen-fraction %v: want 0 (off) or a share in (0, 1)", s.Fraction)
	case math.IsNaN(s.Keep) || s.Keep < 0 || s.Keep > 1:
		return fmt.Errorf("--screen-keep %v: want a share in (0, 1]", s.Keep)
	case math.IsNaN(s.Margin) || s.Margin > 1:
		return fmt.Errorf("screen margin %v: want at most 1", s.Margin)
	}
	return nil
}

// StagedRunner is a Runner that measures both stages of a screened trial
// on one engine start (start-up is a large part of a trial's cost): the
// short stage, then, when promote says so, the full one on the engine
// that is already up, ideally by continuing the short stage's run to the
// full workload (sim.Runner reads the short stage as a checkpoint of the
// full run). second's Phases count only what the second stage added;
// second is the zero Result when the config was not promoted. A Runner
// without it (trial.Runner today) pays a second engine start and a second
// warm-up for a promotion.
type StagedRunner interface {
	RunStaged(ctx context.Context, cfg spaces.Config, short, full trial.Workload, promote func(*trial.Result) bool) (first, second trial.Result, err error)
}

// screens reports whether a search trial of cfg is screened: screening
// is on and cfg is neither vLLM's default nor an enqueued config (the
// baselines the gain compares with are measured in full).
func (l *Loop) screens(cfg spaces.Config) bool {
	if !l.cfg.Screen.On() {
		return false
	}
	id := cfg.ID()
	if l.cfg.Default.Len() > 0 && id == l.cfg.Default.ID() {
		return false
	}
	for _, c := range l.cfg.Enqueue {
		if c.ID() == id {
			return false
		}
	}
	return true
}

// measure runs a search or repeat trial's measurement: the full workload,
// or, for a screened config, the short stage first and the full workload
// only when promote says so. The Result is the full run with the short
// stage in Screen and both stages' Phases, the short stage's failure, or
// a trial.FailScreenedOut result.
func (l *Loop) measure(ctx context.Context, cfg spaces.Config, screen bool) (trial.Result, error) {
	full := l.cfg.Workload
	if !screen {
		return l.runner.Run(ctx, cfg, full)
	}
	f := l.cfg.Screen.Fraction
	short, err := full.Shortened(f)
	if err != nil {
		return trial.Result{}, err
	}
	var promoted bool
	var reason string
	decide := func(r *trial.Result) bool {
		promoted, reason = l.promote(r)
		return promoted
	}
	var first, second trial.Result
	if sr, ok := l.runner.(StagedRunner); ok {
		first, second, err = sr.RunStaged(ctx, cfg, short, full, decide)
	} else {
		first, err = l.runner.Run(ctx, cfg, short)
		if err == nil && first.Usable() && decide(&first) {
			second, err = l.runner.Run(ctx, cfg, full)
		}
	}
	stage := trial.NewScreenStage(f, &first)
	stage.Promoted, stage.Reason = promoted, reason
	switch {
	case !first.Usable() || err != nil && !promoted:
		// The short stage failed (the full run would have too) or was
		// stopped: its result is the trial's.
		first.Screen = stage
		return first, err
	case !promoted:
		res := first
		res.Levels, res.Primary, res.Capacity, res.Feedback = nil, 0, 0, nil
		res.Status, res.Failure = trial.StatusFailed, trial.FailScreenedOut
		res.Error = fmt.Sprintf("screened out after a short run (%.0f%% of the requests): %s", f*100, reason)
		res.Screen = stage
		return res, nil
	}
	second.Screen = stage
	second.Phases.Add(first.Phases)
	return second, err
}

// promote decides whether a usable short stage is measured in full, and
// says why.
func (l *Loop) promote(r *trial.Result) (bool, string) {
	stage := trial.NewScreenStage(l.cfg.Screen.Fraction, r)
	v, ok := l.screenVector(stage)
	if !ok {
		return false, "no objective values"
	}
	m := l.cfg.Screen.margin()
	l.mu.Lock()
	bias, pairs := l.screenBias()
	l.mu.Unlock()
	if n := l.cfg.Screen.calibrate(); pairs < n {
		return true, fmt.Sprintf("calibrating short runs against full ones (%d of %d)", pairs+1, n)
	}
	if stage.Metrics.Overloaded {
		return false, stage.Metrics.OverloadText()
	}
	for _, b := range l.cfg.SLO.Effective().Relaxed(m) {
		x, ok := stage.Metrics.Value(b.Metric)
		if r, ok := bias[b.Metric]; ok {
			x *= r
		}
		if !ok || !b.Holds(x) {
			return false, fmt.Sprintf("misses the SLO by more than %.0f%%: %s=%.4g as a full run would measure it (want %s %.4g)", m*100, b.Metric, x, b.Op, b.Limit)
		}
	}
	objs := l.cfg.Metrics.Objectives()
	dirs := objs.Directions()
	// The handicap in the config's favour: m better on every measured
	// objective (peak VRAM is the engine's reservation, not noisy).
	h := make([]float64, len(v))
	for i, x := range v {
		switch {
		case objs[i].Name == "peak_vram_gib":
			h[i] = x
		case dirs[i] == pareto.Maximize:
			h[i] = x * (1 + m)
		default:
			h[i] = x * (1 - m)
		}
	}
	l.mu.Lock()
	ref, rung := l.screenRefs()
	l.mu.Unlock()
	for _, f := range ref {
		if pareto.Dominates(f, h, dirs) {
			return false, fmt.Sprintf("dominated by more than %.0f%% by the short run of a front config", m*100)
		}
	}
	by := 0
	for _, x := range rung {
		if pareto.Dominates(x, v, dirs) {
			by++
		}
	}
	if keep := l.cfg.Screen.keep(); len(rung) > 0 && float64(by) > keep*float64(len(rung)) {
		return false, fmt.Sprintf("dominated by %d of the %d short runs so far (promoted: the top %.0f%%)", by, len(rung), keep*100)
	}
	return true, "promising"
}

// screenBias is, per SLO metric, the median ratio of the full run's value
// to its short stage's over the promoted configs of the study: a short
// run reads latencies high and throughput low (the requests that complete
// first are measured, the load still on), by an amount the study's own
// pairs tell. Caller holds mu.
func (l *Loop) screenBias() (bias map[string]float64, pairs int) {
	ratios := map[string][]float64{}
	for _, t := range l.st.trials {
		r := t.Result
		if r == nil || r.Screen == nil || r.Screen.Metrics == nil || !r.Usable() || r.Metrics() == nil {
			continue
		}
		pairs++
		for _, b := range l.cfg.SLO.Effective() {
			short, ok1 := r.Screen.Metrics.Value(b.Metric)
			full, ok2 := r.Metrics().Value(b.Metric)
			if ok1 && ok2 && short > 0 && full > 0 {
				ratios[b.Metric] = append(ratios[b.Metric], full/short)
			}
		}
	}
	bias = map[string]float64{}
	for k, xs := range ratios {
		bias[k] = trial.Median(xs)
	}
	return bias, pairs
}

// screenVector is a short stage's objective vector.
func (l *Loop) screenVector(s *trial.ScreenStage) ([]float64, bool) {
	if s == nil || s.Metrics == nil {
		return nil, false
	}
	var out []float64
	for _, o := range l.cfg.Metrics.Objectives() {
		x, ok := s.Objective(o.Name)
		if !ok || math.IsNaN(x) {
			return nil, false
		}
		out = append(out, x)
	}
	return out, true
}

// screenRefs are, from the study's trials, the short-stage vectors of the
// configs whose full run met the SLO (the front test's reference) and of
// every usable short stage that met the relaxed SLO (the rung). Caller
// holds mu.
func (l *Loop) screenRefs() (ref, rung [][]float64) {
	relaxed := l.cfg.SLO.Effective().Relaxed(l.cfg.Screen.margin())
	for _, t := range l.st.trials {
		r := t.Result
		if r == nil || r.Screen == nil || !t.State.Measured() {
			continue
		}
		v, ok := l.screenVector(r.Screen)
		if !ok {
			continue
		}
		if met, _ := relaxed.Check(r.Screen.Metrics); met {
			rung = append(rung, v)
		}
		if pm := r.Metrics(); r.Usable() && pm != nil {
			if met, _ := l.cfg.SLO.Check(pm); met {
				ref = append(ref, v)
			}
		}
	}
	return ref, rung
}

// told is what the proposer learns from a search trial's result: for a
// screened-out config the short run's measurement (low fidelity; the
// Proposer interface has no weight), otherwise the result itself.
func told(r *trial.Result) *trial.Result {
	if r == nil || r.Failure != trial.FailScreenedOut || r.Screen == nil || r.Screen.Metrics == nil {
		return r
	}
	s := r.Screen
	out := *r
	out.Status, out.Failure, out.Error = s.Status, trial.FailNone, ""
	out.Levels, out.Primary = []trial.Level{{Metrics: *s.Metrics}}, 0
	out.PeakVRAMGiB = s.PeakVRAMGiB
	return &out
}
