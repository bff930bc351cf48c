package eval

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/vllm-tuner/tuner/pareto"
	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/spaces"
)

// Report is the benchmark's outcome.
type Report struct {
	Settings  Settings         `json:"settings"`
	Scenarios []ScenarioReport `json:"scenarios"`
	Summaries []Summary        `json:"summaries"`
	Pruning   []PruneQuality   `json:"pruning"`
	Goals     []Goal           `json:"goals"`
	WallS     float64          `json:"wall_s"`
	runs      []*Run
}

// Settings echo the run's configuration.
type Settings struct {
	Seeds       int        `json:"seeds"`
	Trials      int        `json:"trials"`
	Checkpoints []int      `json:"checkpoints"`
	Plan        SamplePlan `json:"plan"`
	Strategies  []string   `json:"strategies"`
	Threshold   float64    `json:"threshold"`
	// NoiseFree: every trial measured without noise (--noise-free); absent
	// from reports measured with noise, as all before the flag were.
	NoiseFree bool `json:"noise_free,omitempty"`
}

// ScenarioReport describes a scenario and its ground truth.
type ScenarioReport struct {
	Name         string         `json:"name"`
	Target       string         `json:"target"`
	GPUs         int            `json:"gpus"` // GPUs the target has (pruning's volume goal is for one)
	Workload     string         `json:"workload"`
	SLO          string         `json:"slo"`
	Objectives   []string       `json:"objectives"`
	Key          string         `json:"key"`
	Cached       bool           `json:"cached"`
	EvalMS       float64        `json:"eval_ms"` // wall ms per noise-free evaluation (machine dependent)
	Sampled      int            `json:"sampled"`
	Feasible     int            `json:"feasible"`
	FailedByCls  map[string]int `json:"failed"`
	SampledFront int            `json:"sampled_front"`
	SampledHV    float64        `json:"sampled_hv"`
	// The reference front is the truth's front alone; TrueHV is its
	// hypervolume against Ref. JoinedHV is the hypervolume of the truth's
	// front joined with every truly feasible config any run tried, over
	// TrueHV, and FromRuns the members of that joined front that came from
	// runs: above 1 + TruthSlack the truth was beaten (ErrTruthBeaten).
	// BeyondTruth are those members, where they were tried: what the
	// truth's optimiser missed.
	Front          int         `json:"front"`
	FromRuns       int         `json:"front_from_runs"`
	BeyondTruth    []RunConfig `json:"beyond_truth,omitempty"`
	JoinedHV       float64     `json:"joined_hv_ratio"`
	Polished       int         `json:"polished"`  // the truth's polish evaluations
	Converged      bool        `json:"converged"` // the polish refined every front member to convergence
	TrueHV         float64     `json:"true_hv"`
	Ref            []float64   `json:"ref"`
	TrueHVStrict   float64     `json:"true_hv_strict"`
	RefStrict      []float64   `json:"ref_strict"`
	BestThroughput float64     `json:"best_throughput"`
	Default        Truth       `json:"default"`
	DefaultFlags   string      `json:"default_flags"`
	frontVecs      [][]float64
}

// Summary is one strategy on one scenario over the seeds.
type Summary struct {
	Scenario string               `json:"scenario"`
	Strategy string               `json:"strategy"`
	HV       map[string]Quantiles `json:"hv_ratio"` // by checkpoint
	// HVStrict is the HV ratio against the strict reference point.
	HVStrict map[string]Quantiles `json:"hv_ratio_strict"`
	Curve    []float64            `json:"median_curve"`
	CurveQ1  []float64            `json:"q1_curve"`
	CurveQ3  []float64            `json:"q3_curve"`
	// TrialsToThreshold per seed (Trials+1 when never reached).
	TrialsToThreshold []int   `json:"trials_to_threshold"`
	TrialsToMedian    float64 `json:"trials_to_threshold_median"`
	// TrialsToLow is the same for LowThreshold.
	TrialsToLow       []int     `json:"trials_to_low_threshold"`
	TrialsToLowMedian float64   `json:"trials_to_low_threshold_median"`
	BestRatio         Quantiles `json:"best_ratio"` // best truly feasible throughput / true best
	// Ideal is, per objective, how close the best truly feasible value found
	// comes to the reference front's best (1 = reached; found/true for
	// maximised objectives, true/found for minimised ones).
	Ideal           []Quantiles          `json:"ideal_coverage"`
	BestAt          map[string]Quantiles `json:"best_throughput"`   // by checkpoint, tok/s
	GainOverDefault Quantiles            `json:"gain_over_default"` // best / default throughput - 1
	Failed          Quantiles            `json:"failed_trials"`
	OOM             Quantiles            `json:"oom_trials"`
	GPUHours        Quantiles            `json:"gpu_hours"`
	// GPUHoursTo is, per GPUThresholds entry ("0.80", "0.90"), the GPU time
	// (simulated engine start-up + measurement, x GPUs) of the search trials
	// up to the one that brought the HV ratio there, over the seeds that got
	// there; ReachedTo counts those seeds.
	GPUHoursTo map[string]Quantiles `json:"gpu_hours_to"`
	ReachedTo  map[string]int       `json:"reached_to"`
	Repeats    Quantiles            `json:"repeat_trials"`
	// ScreenedOut counts the search trials measured only on a short run
	// (tuner-sh): paid for in GPU time, never found.
	ScreenedOut Quantiles `json:"screened_out"`
	BelievedHV  Quantiles `json:"believed_hv_ratio"` // measured front's HV / true HV (may exceed 1)
	// PickTrueRatio is the picked config's true throughput over what the
	// strategy measured for it; PickFeasible the share of seeds whose pick
	// truly meets the SLO.
	PickTrueRatio Quantiles `json:"pick_true_over_measured"`
	PickFeasible  float64   `json:"pick_truly_feasible"`
	PickBestRatio Quantiles `json:"pick_true_over_true_best"`
	// HVStreams is StreamFigures.HVRatio over the seeds.
	HVStreams Quantiles `json:"hv_other_streams"`
	// PickStreams is StreamFigures.Ratio over the seeds with a pick;
	// PickStreamsMet and BestStreamsMet the shares of their streams on
	// which the picks and the truth's best config meet the SLO.
	PickStreams    Quantiles `json:"pick_other_streams"`
	PickStreamsMet float64   `json:"pick_other_streams_slo_met"`
	BestStreamsMet float64   `json:"best_other_streams_slo_met"`
	// Seeds are each run's own figures, in seed order: what Compare pairs
	// seed by seed against another report of the same scenarios.
	Seeds []SeedFigures `json:"per_seed,omitempty"`
}

// SeedFigures are one run's figures.
type SeedFigures struct {
	Seed uint64             `json:"seed"`
	HV   map[string]float64 `json:"hv_ratio"` // by checkpoint
	// Pick is the picked config's true throughput over the true best (0
	// when it truly misses the SLO); absent when the run picked nothing.
	Pick *float64 `json:"pick_true_over_true_best,omitempty"`
}

// PruneQuality judges search.Prune on a history.
type PruneQuality struct {
	Scenario      string    `json:"scenario"`
	History       string    `json:"history"`
	VolumeRemoved Quantiles `json:"volume_removed"`
	FrontKept     Quantiles `json:"front_kept"` // share of reference-front configs the pruned space admits
	HVKept        Quantiles `json:"hv_kept"`    // HV of the admitted front members / true HV
}

// Goal is one target of issue 8, met or not.
type Goal struct {
	Goal     string `json:"goal"`
	Scenario string `json:"scenario"`
	Value    string `json:"value"`
	Met      bool   `json:"met"`
}

// GPUThresholds are the HV ratios the "GPU h to" figures count to.
var GPUThresholds = []float64{0.80, 0.90}

// gpuHoursTo is the GPU time of a run's search trials up to the first whose
// HV ratio (curve c) reaches thr; ok is false when the run never does.
func gpuHoursTo(trials []Trial, c []float64, thr float64) (float64, bool) {
	k := trialsTo(c, thr)
	if k == 0 {
		return 0, false
	}
	var s float64
	for _, t := range trials {
		if t.Phase == PhaseSearch && t.Number <= k {
			s += t.GPUSeconds
		}
	}
	return s / 3600, true
}

// Threshold is the HV ratio the "trials to" figures count to;
// LowThreshold a second, lower one that slower strategies still reach, so
// their speeds can be compared.
const (
	Threshold    = 0.95
	LowThreshold = 0.80
)

func ck(k int) string { return strconv.Itoa(k) }

func buildReport(ctx context.Context, cfg Config, states []*scenarioState, strategies []Strategy, runs map[string]*Run,
	runKey func(string, string, uint64) string) (*Report, error) {
	rep := &Report{Settings: Settings{Seeds: cfg.Seeds, Trials: cfg.Trials, Checkpoints: cfg.Checkpoints, Plan: cfg.Plan, Threshold: Threshold, NoiseFree: cfg.NoiseFree}}
	for _, s := range strategies {
		rep.Settings.Strategies = append(rep.Settings.Strategies, s.Name())
	}
	for _, st := range states {
		p, gt := st.prob, st.truth
		var scRuns []*Run
		for _, s := range strategies {
			for seed := uint64(1); seed <= uint64(cfg.Seeds); seed++ {
				if r := runs[runKey(p.Scenario.Name, s.Name(), seed)]; r != nil {
					scRuns = append(scRuns, r)
					rep.runs = append(rep.runs, r)
				}
			}
		}
		// The reference front is the truth's alone, whatever strategies ran;
		// the runs' truly feasible configs joined with it measure whether
		// the truth still holds (TruthCheck).
		type member struct {
			cfg spaces.Config
			vec []float64
			run *Run   // nil: the truth's
			t   *Trial // the run's trial
		}
		// A run's config that ties a truth point is not from the runs: the
		// truth keeps one config per point (distinctPoints), its twins tie.
		var all []member
		seen := map[string]bool{}
		for _, f := range gt.Front {
			seen[f.ID], seen[vecKey(f.Vec)] = true, true
			all = append(all, member{f.Config, f.Vec, nil, nil})
		}
		for _, r := range scRuns {
			for i := range r.Trials {
				t := &r.Trials[i]
				if t.found() && !seen[t.ConfigID] && !seen[vecKey(t.True.Vec)] {
					seen[t.ConfigID] = true
					all = append(all, member{t.Config, t.True.Vec, r, t})
				}
			}
		}
		vecs := make([][]float64, len(all))
		for i, m := range all {
			vecs[i] = m.vec
		}
		var front, joined []member
		for _, i := range frontIdx(vecs, p) {
			joined = append(joined, all[i])
		}
		for _, m := range all {
			if m.run == nil {
				front = append(front, m)
			}
		}
		if cfg.JoinRuns {
			front = joined
		}
		fvecs := make([][]float64, len(front))
		sr := ScenarioReport{Name: p.Scenario.Name, Target: p.Target.Describe(), GPUs: p.Target.GPUCount, SLO: p.SLO.String(), Key: gt.Key, Cached: st.cached,
			EvalMS: st.evalMS, Sampled: gt.Evaluated, Feasible: gt.Feasible, FailedByCls: gt.Failed, SampledFront: len(gt.Front),
			SampledHV: gt.SampledHV, Front: len(front), Ref: gt.Ref, Default: gt.Default,
			DefaultFlags: strings.Join(p.Space.DefaultConfig().Flags(), " "),
			Workload: fmt.Sprintf("%s: %d requests + %d warm-up, closed loop at %d, prompt ~%.0f, output ~%.0f tokens",
				p.Workload.Name, p.Workload.NumRequests, p.Workload.Warmup, p.Workload.Arrival.Concurrency, p.Workload.Prompt.MeanValue(), p.Workload.Output.MeanValue())}
		for _, o := range p.Objectives {
			sr.Objectives = append(sr.Objectives, o.String())
		}
		for i, m := range front {
			fvecs[i] = m.vec
			sr.BestThroughput = math.Max(sr.BestThroughput, m.vec[0])
		}
		var jvecs [][]float64
		for _, m := range joined {
			jvecs = append(jvecs, m.vec)
			if m.run != nil {
				sr.FromRuns++
				// Flags rendered here, for the few on the joined front only.
				sr.BeyondTruth = append(sr.BeyondTruth, RunConfig{Strategy: m.run.Strategy, Seed: m.run.Seed, Trial: m.t.Number,
					ConfigID: m.t.ConfigID, Flags: strings.Join(m.cfg.Flags(), " "), Vec: m.vec})
			}
		}
		sr.TrueHV, sr.frontVecs = hvOf(fvecs, p, gt.Ref), fvecs
		sr.JoinedHV = hvOf(jvecs, p, gt.Ref) / sr.TrueHV
		if cfg.JoinRuns {
			sr.JoinedHV = 1 // the reference holds the runs: nothing to check
		}
		sr.Polished, sr.Converged = gt.Polished, gt.Converged
		sr.RefStrict, sr.TrueHVStrict = gt.RefStrict, hvOf(fvecs, p, gt.RefStrict)
		rep.Scenarios = append(rep.Scenarios, sr)

		for _, s := range strategies {
			sum := summarize(cfg, p, sr, s.Name(), scRuns)
			rep.Summaries = append(rep.Summaries, sum)
		}
		// Pruning quality from the tuner's own first trials and from the
		// warm-start history.
		cfgs := make([]spaces.Config, len(front))
		for i, m := range front {
			cfgs[i] = m.cfg
		}
		var own, other []PruneSample
		for seed := uint64(1); seed <= uint64(cfg.Seeds); seed++ {
			if r := runs[runKey(p.Scenario.Name, StratTuner, seed)]; r != nil {
				own = append(own, pruneSample(p, observations(r.Trials, cfg.PruneHistory, 1, nil), cfgs, fvecs, gt.Ref, sr.TrueHV))
			}
			if src := p.Scenario.WarmFrom; src != "" {
				if r := runs[runKey(src, StratTuner, seed)]; r != nil {
					sp, err := findProblem(states, src)
					if err == nil {
						other = append(other, pruneSample(p, observations(r.Trials, cfg.Trials, WarmWeight, sp), cfgs, fvecs, gt.Ref, sr.TrueHV))
					}
				}
			}
		}
		if len(own) > 0 {
			rep.Pruning = append(rep.Pruning, pruneQuality(p.Scenario.Name, fmt.Sprintf("tuner's first %d trials", cfg.PruneHistory), own))
		}
		if len(other) > 0 {
			rep.Pruning = append(rep.Pruning, pruneQuality(p.Scenario.Name, fmt.Sprintf("%s tuner's %d trials (weight %.1f)", p.Scenario.WarmFrom, cfg.Trials, WarmWeight), other))
		}
	}
	rep.Goals = goals(cfg, rep)
	return rep, ctx.Err()
}

func findProblem(states []*scenarioState, name string) (*Problem, error) {
	for _, st := range states {
		if st.prob.Scenario.Name == name {
			return st.prob, nil
		}
	}
	return nil, fmt.Errorf("scenario %s not in this run", name)
}

// frontIdx returns the indexes of the non-dominated vectors.
func frontIdx(vecs [][]float64, p *Problem) []int {
	if len(vecs) == 0 {
		return nil
	}
	return pareto.Front(vecs, p.Objectives.Directions())
}

// observations turns the first n search trials of a run into history.
func observations(trials []Trial, n int, weight float64, ctxOf *Problem) []search.Observation {
	var out []search.Observation
	for _, t := range trials {
		if t.Phase != PhaseSearch || t.Number > n || t.result == nil {
			continue
		}
		o := search.Observation{Config: t.Config, Result: t.result, Weight: weight}
		if ctxOf != nil {
			tg, w := ctxOf.Target, ctxOf.Workload
			o.Target, o.Workload = &tg, &w
		}
		out = append(out, o)
	}
	return out
}

// PruneSample is the pruning of one history.
type PruneSample struct{ Removed, Kept, HVKept float64 }

func pruneSample(p *Problem, hist []search.Observation, front []spaces.Config, fvecs [][]float64, ref []float64, trueHV float64) PruneSample {
	po := search.DefaultPruneOptions()
	po.Objectives, po.SLO = p.Objectives, p.SLO
	pruned, pr := search.Prune(p.Space, hist, po)
	var kept [][]float64
	for i, c := range front {
		if pruned.Validate(c) == nil {
			kept = append(kept, fvecs[i])
		}
	}
	s := PruneSample{Removed: pr.VolumeRemoved}
	if len(front) > 0 {
		s.Kept = float64(len(kept)) / float64(len(front))
	}
	if trueHV > 0 {
		s.HVKept = hvOf(kept, p, ref) / trueHV
	}
	return s
}

func pruneQuality(scen, hist string, ss []PruneSample) PruneQuality {
	var r, k, h []float64
	for _, s := range ss {
		r, k, h = append(r, s.Removed), append(k, s.Kept), append(h, s.HVKept)
	}
	return PruneQuality{Scenario: scen, History: hist, VolumeRemoved: quantiles(r), FrontKept: quantiles(k), HVKept: quantiles(h)}
}

func summarize(cfg Config, p *Problem, sr ScenarioReport, strat string, runs []*Run) Summary {
	s := Summary{Scenario: p.Scenario.Name, Strategy: strat, HV: map[string]Quantiles{}, HVStrict: map[string]Quantiles{}, BestAt: map[string]Quantiles{},
		GPUHoursTo: map[string]Quantiles{}, ReachedTo: map[string]int{}}
	gpuTo := map[string][]float64{}
	var curves, stricts [][]float64
	var best, gain, failed, oom, gpuh, reps, screened, believed, pickRatio, pickBest, pickStreams, hvStreams []float64
	var streamsMet, bestMet int
	ideal := make([][]float64, len(p.Objectives))
	trueIdeal := make([]float64, len(p.Objectives))
	for j, o := range p.Objectives {
		trueIdeal[j] = math.NaN()
		for _, v := range sr.frontVecs {
			if math.IsNaN(trueIdeal[j]) || o.Direction.Better(v[j], trueIdeal[j]) {
				trueIdeal[j] = v[j]
			}
		}
	}
	bestAt := map[int][]float64{}
	pickFeas, picks := 0, 0
	for _, r := range runs {
		if r.Strategy != strat {
			continue
		}
		c := curve(r.Trials, cfg.Trials, p, sr.Ref, sr.TrueHV)
		curves = append(curves, c)
		sf := SeedFigures{Seed: r.Seed, HV: map[string]float64{}}
		for _, cp := range cfg.Checkpoints {
			sf.HV[ck(cp)] = c[cp-1]
		}
		stricts = append(stricts, curve(r.Trials, cfg.Trials, p, sr.RefStrict, sr.TrueHVStrict))
		k := trialsTo(c, Threshold)
		if k == 0 {
			k = cfg.Trials + 1
		}
		s.TrialsToThreshold = append(s.TrialsToThreshold, k)
		kl := trialsTo(c, LowThreshold)
		if kl == 0 {
			kl = cfg.Trials + 1
		}
		s.TrialsToLow = append(s.TrialsToLow, kl)
		for _, thr := range GPUThresholds {
			if h, ok := gpuHoursTo(r.Trials, c, thr); ok {
				gpuTo[thrKey(thr)] = append(gpuTo[thrKey(thr)], h)
				s.ReachedTo[thrKey(thr)]++
			}
		}
		b := 0.0
		nf, no, rp, ns := 0, 0, 0, 0
		var hours float64
		byID := map[string]Trial{}
		for _, t := range r.Trials {
			hours += t.GPUSeconds / 3600
			byID[t.ConfigID] = t
			if t.Phase == PhaseRepeat {
				rp++
				continue
			}
			if t.ScreenedOut {
				ns++
				continue
			}
			if t.Status == "failed" {
				nf++
				if t.Failure.Memory() {
					no++
				}
			}
			if t.found() {
				b = math.Max(b, t.True.Vec[0])
			}
		}
		for _, cp := range cfg.Checkpoints {
			bb := 0.0
			for _, t := range r.Trials {
				if t.Phase == PhaseSearch && t.Number <= cp && t.found() {
					bb = math.Max(bb, t.True.Vec[0])
				}
			}
			bestAt[cp] = append(bestAt[cp], bb)
		}
		best = append(best, b/sr.BestThroughput)
		for j, o := range p.Objectives {
			found := math.NaN()
			for _, t := range r.Trials {
				if t.Phase == PhaseSearch && t.found() && (math.IsNaN(found) || o.Direction.Better(t.True.Vec[j], found)) {
					found = t.True.Vec[j]
				}
			}
			cov := 0.0
			switch {
			case math.IsNaN(found):
			case o.Direction == pareto.Maximize:
				cov = found / trueIdeal[j]
			default:
				cov = trueIdeal[j] / found
			}
			ideal[j] = append(ideal[j], cov)
		}
		if d := sr.Default; d.Vec != nil && d.Vec[0] > 0 {
			gain = append(gain, b/d.Vec[0]-1)
		}
		failed, oom, gpuh, reps = append(failed, float64(nf)), append(oom, float64(no)), append(gpuh, hours), append(reps, float64(rp))
		screened = append(screened, float64(ns))
		believed = append(believed, hvOf(r.Belief.Front, p, sr.Ref)/sr.TrueHV)
		if t, ok := byID[r.Belief.ConfigID]; ok && r.Belief.Throughput > 0 {
			picks++
			if t.True.Feasible {
				pickFeas++
			}
			if t.True.Vec != nil {
				pickRatio = append(pickRatio, t.True.Vec[0]/r.Belief.Throughput)
				tb := 0.0
				if t.True.Feasible {
					tb = t.True.Vec[0] / sr.BestThroughput
				}
				pickBest = append(pickBest, tb)
				sf.Pick = &tb
			}
		}
		if f := r.Streams; f != nil {
			hvStreams = append(hvStreams, f.HVRatio)
			if f.Pick {
				pickStreams = append(pickStreams, f.Ratio)
				streamsMet, bestMet = streamsMet+f.Met, bestMet+f.BestMet
			}
		}
		s.Seeds = append(s.Seeds, sf)
	}
	slices.SortFunc(s.Seeds, func(a, b SeedFigures) int { return cmp.Compare(a.Seed, b.Seed) })
	for _, cp := range cfg.Checkpoints {
		var xs []float64
		for _, c := range curves {
			xs = append(xs, c[cp-1])
		}
		s.HV[ck(cp)] = quantiles(xs)
		var ys []float64
		for _, c := range stricts {
			ys = append(ys, c[cp-1])
		}
		s.HVStrict[ck(cp)] = quantiles(ys)
		s.BestAt[ck(cp)] = quantiles(bestAt[cp])
	}
	for i := range cfg.Trials {
		var xs []float64
		for _, c := range curves {
			xs = append(xs, c[i])
		}
		q := quantiles(xs)
		s.Curve, s.CurveQ1, s.CurveQ3 = append(s.Curve, q.Median), append(s.CurveQ1, q.Q1), append(s.CurveQ3, q.Q3)
	}
	var tt []float64
	for _, k := range s.TrialsToThreshold {
		tt = append(tt, float64(k))
	}
	s.TrialsToMedian = quantiles(tt).Median
	var tl []float64
	for _, k := range s.TrialsToLow {
		tl = append(tl, float64(k))
	}
	s.TrialsToLowMedian = quantiles(tl).Median
	for _, thr := range GPUThresholds {
		s.GPUHoursTo[thrKey(thr)] = quantiles(gpuTo[thrKey(thr)])
	}
	s.BestRatio, s.GainOverDefault = quantiles(best), quantiles(gain)
	for j := range ideal {
		s.Ideal = append(s.Ideal, quantiles(ideal[j]))
	}
	s.Failed, s.OOM, s.GPUHours, s.Repeats, s.ScreenedOut = quantiles(failed), quantiles(oom), quantiles(gpuh), quantiles(reps), quantiles(screened)
	s.BelievedHV, s.PickTrueRatio, s.PickBestRatio, s.PickStreams = quantiles(believed), quantiles(pickRatio), quantiles(pickBest), quantiles(pickStreams)
	s.HVStreams = quantiles(hvStreams)
	if picks > 0 {
		s.PickFeasible = float64(pickFeas) / float64(picks)
	}
	if n := len(pickStreams) * cfg.Streams; n > 0 {
		s.PickStreamsMet, s.BestStreamsMet = float64(streamsMet)/float64(n), float64(bestMet)/float64(n)
	}
	return s
}

func (r *Report) summary(scen, strat string) *Summary {
	for i := range r.Summaries {
		if r.Summaries[i].Scenario == scen && r.Summaries[i].Strategy == strat {
			return &r.Summaries[i]
		}
	}
	return nil
}

// Goal thresholds (issues 18 and 28): the tuner's median HV ratio at 24
// and at 8 trials, the warm start's at 8, the recommended config's true
// throughput over the true best at the last trial, four workers' HV ratio
// over one worker's at equal trials, and pruning's volume removed on
// single-GPU scenarios while keeping 98% of the front's configs and
// hypervolume.
const (
	GoalHV24      = 0.90
	GoalHV8       = 0.70
	GoalWarmHV8   = 0.85
	GoalPick      = 0.99
	GoalParallel  = 0.95
	GoalPruneFrac = 0.40
	GoalPruneKept = 0.98
)

// goals states each target per scenario.
func goals(cfg Config, r *Report) []Goal {
	var out []Goal
	at := min(24, cfg.Trials)
	at8 := min(8, cfg.Trials)
	for _, sc := range r.Scenarios {
		tu, rnd, grid, warm := r.summary(sc.Name, StratTuner), r.summary(sc.Name, StratRandom), r.summary(sc.Name, StratGrid), r.summary(sc.Name, StratWarm)
		if tu != nil {
			for _, g := range []struct {
				k   int
				thr float64
			}{{at, GoalHV24}, {at8, GoalHV8}} {
				q := hvAt(tu, g.k)
				v := fmt.Sprintf("%.3f", q)
				if qs := tu.HVStreams; g.k == HVStreamTrials && qs.N > 0 {
					v += fmt.Sprintf("; on %d other request streams %.3f of what the truth's front configs hold there", cfg.Streams, qs.Median)
				}
				out = append(out, Goal{Goal: fmt.Sprintf("tuner median HV ratio >= %.2f within %d trials", g.thr, g.k), Scenario: sc.Name,
					Value: v, Met: q >= g.thr})
			}
			if q := tu.PickBestRatio; q.N > 0 {
				v := fmt.Sprintf("%.3f", q.Median)
				if qs := tu.PickStreams; qs.N > 0 {
					v += fmt.Sprintf("; on %d other request streams %.3f of the true best config, SLO met on %.0f%% of them (the true best: %.0f%%)", cfg.Streams, qs.Median, 100*tu.PickStreamsMet, 100*tu.BestStreamsMet)
				}
				out = append(out, Goal{Goal: fmt.Sprintf("recommended config >= %.2f of the true best throughput at the SLO by trial %d", GoalPick, cfg.Trials),
					Scenario: sc.Name, Value: v, Met: q.Median >= GoalPick})
			}
		}
		if p1, p4 := r.summary(sc.Name, StratPar1), r.summary(sc.Name, StratPar4); p1 != nil && p4 != nil {
			h1, h4 := hvAt(p1, at), hvAt(p4, at)
			out = append(out, Goal{Goal: fmt.Sprintf("4 workers' median HV ratio >= %.2fx one worker's at %d trials", GoalParallel, at), Scenario: sc.Name,
				Value: fmt.Sprintf("%.3f / %.3f = %.3f", h4, h1, h4/h1), Met: h4 >= GoalParallel*h1})
		}
		if tu != nil && rnd != nil {
			tt, rt := tu.TrialsToMedian, rnd.TrialsToMedian
			met := tt <= 0.3*rt && tt <= float64(cfg.Trials)
			v := fmt.Sprintf("tuner %s vs random %s", fmtTrials(tt, cfg.Trials), fmtTrials(rt, cfg.Trials))
			if rt > float64(cfg.Trials) && tt <= float64(cfg.Trials) {
				v += fmt.Sprintf(" (random never reached it: ratio < %.2f)", tt/float64(cfg.Trials+1))
			}
			v += fmt.Sprintf("; to %.2f: tuner %s vs random %s", LowThreshold, fmtTrials(tu.TrialsToLowMedian, cfg.Trials), fmtTrials(rnd.TrialsToLowMedian, cfg.Trials))
			out = append(out, Goal{Goal: "tuner trials to 0.95 <= 0.3x random search's", Scenario: sc.Name, Value: v, Met: met})
		}
		if tu != nil && grid != nil {
			ratio := func(k int) (float64, float64, float64) {
				tb, gb := tu.BestAt[ck(k)].Median, grid.BestAt[ck(k)].Median
				switch {
				case gb <= 0 && tb <= 0:
					return tb, gb, 0 // neither found a feasible config: no gain
				case gb <= 0:
					return tb, gb, math.Inf(1)
				}
				return tb, gb, tb / gb
			}
			tb, gb, rN := ratio(cfg.Trials)
			v := fmt.Sprintf("%.0f vs %.0f tok/s (%.2fx)", tb, gb, rN)
			var at []string
			for _, k := range cfg.Checkpoints {
				_, _, r := ratio(k)
				at = append(at, fmt.Sprintf("@%d %.2fx", k, r))
			}
			v += "; " + strings.Join(at, ", ")
			if gb <= 0 {
				v += " (the grid found no SLO-feasible config)"
			}
			out = append(out, Goal{Goal: fmt.Sprintf("best feasible throughput >= 1.2x grid at %d trials", cfg.Trials), Scenario: sc.Name,
				Value: v, Met: rN >= 1.2})
		}
		if warm != nil {
			q := hvAt(warm, at8)
			out = append(out, Goal{Goal: fmt.Sprintf("warm start HV ratio >= %.2f within %d trials", GoalWarmHV8, at8), Scenario: sc.Name,
				Value: fmt.Sprintf("%.3f", q), Met: q >= GoalWarmHV8})
		}
		for _, pq := range r.Pruning {
			if pq.Scenario != sc.Name || !strings.HasPrefix(pq.History, "tuner's") {
				continue
			}
			// Both halves per scenario: the front kept (configs and
			// hypervolume) everywhere, the volume removed on one GPU.
			kept := pq.FrontKept.Median >= GoalPruneKept && pq.HVKept.Median >= GoalPruneKept
			v := fmt.Sprintf("kept %.1f%% of configs (HV %.1f%%), removed %.1f%%", 100*pq.FrontKept.Median, 100*pq.HVKept.Median, 100*pq.VolumeRemoved.Median)
			if sc.GPUs <= 1 {
				out = append(out, Goal{Goal: fmt.Sprintf("single GPU: pruning keeps >= %.0f%% of the front (configs and HV), removes >= %.0f%% volume", 100*GoalPruneKept, 100*GoalPruneFrac),
					Scenario: sc.Name, Value: v, Met: kept && pq.VolumeRemoved.Median >= GoalPruneFrac})
			} else {
				out = append(out, Goal{Goal: fmt.Sprintf("pruning keeps >= %.0f%% of the front (configs and HV)", 100*GoalPruneKept), Scenario: sc.Name, Value: v, Met: kept})
			}
		}
	}
	return out
}

func hvAt(s *Summary, k int) float64 {
	if k <= 0 || k > len(s.Curve) {
		return math.NaN()
	}
	return s.Curve[k-1]
}

func fmtTrials(v float64, n int) string {
	if v > float64(n) {
		return fmt.Sprintf(">%d", n)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Write puts report.md, report.json, runs.json and hv-<scenario>.svg in dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if b, err = json.Marshal(r.runs); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "runs.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	for _, sc := range r.Scenarios {
		f, err := os.Create(filepath.Join(dir, "hv-"+sc.Name+".svg"))
		if err != nil {
			return err
		}
		werr := r.WriteSVG(f, sc.Name)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return werr
		}
	}
	return nil
}

// Markdown renders the report's tables.
func (r *Report) Markdown() string {
	var b strings.Builder
	st := r.Settings
	fmt.Fprintf(&b, "# Search-quality benchmark\n\n")
	noise := "noise on"
	if st.NoiseFree {
		noise = "noise off (--noise-free: every trial measures the truth)"
	}
	fmt.Fprintf(&b, "%d seeds x %d search trials per strategy and scenario, %s; ground truth from %d random + %d refined noise-free configs per scenario (plus default and grid), then optimised from its front to convergence (every combination of the discrete levels at its best points, a coordinate search of every axis with steps halving to one unit; at most %d evaluations). ",
		st.Seeds, st.Trials, noise, st.Plan.Random, st.Plan.Refine, st.Plan.Polish)
	fmt.Fprintf(&b, "HV ratio = hypervolume of the true objective vectors of the truly SLO-feasible configs a strategy tried / HV of the ground truth's front (fixed: runs never join it; 'truth+runs / truth' checks it was not beaten), reference point = a fixed worst point per scenario (0 tok/s, the SLO's limit of the latency objective or 1.1x its worst feasible value, all GPU memory of the target); strict HV uses the sampled front's nadir pushed 10%% of its range outward instead. Median [Q1-Q3] over seeds. Wall time %.0f s.\n\n", r.WallS)
	fmt.Fprintf(&b, "## Scenarios\n\n| scenario | target | SLO | objectives | evaluated (feasible) | front | sampled HV / truth HV | polish (converged) | truth+runs / truth (configs) | best tok/s | default tok/s (feasible) | ref | strict ref | ms/eval |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, sc := range r.Scenarios {
		def := "failed"
		if sc.Default.Vec != nil {
			def = fmt.Sprintf("%.0f (%v)", sc.Default.Vec[0], sc.Default.Feasible)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d (%d) | %d | %.4f | %d (%v) | %.4f (%d) | %.0f | %s | %s | %s | %.1f |\n", sc.Name, sc.Target, sc.SLO, strings.Join(sc.Objectives, ", "),
			sc.Sampled, sc.Feasible, sc.Front, sc.SampledHV/sc.TrueHV, sc.Polished, sc.Converged, sc.JoinedHV, sc.FromRuns, sc.BestThroughput, def, fmtVec(sc.Ref), fmtVec(sc.RefStrict), sc.EvalMS)
	}
	for _, sc := range r.Scenarios {
		fmt.Fprintf(&b, "\n## %s\n\nWorkload %s. Default: `%s`.\n\n", sc.Name, sc.Workload, sc.DefaultFlags)
		fmt.Fprintf(&b, "| strategy |")
		for _, cp := range st.Checkpoints {
			fmt.Fprintf(&b, " HV@%d |", cp)
		}
		fmt.Fprintf(&b, " strict HV@%d | trials to %.2f | trials to %.2f | GPU h to %.2f (seeds) | GPU h to %.2f (seeds) | best feasible / true best | gain vs default | ideal reached (thr, lat, vram) | failed (OOM) | repeats | GPU h | believed HV | pick: true/measured, feasible, / true best |\n|---|", st.Trials, Threshold, LowThreshold, GPUThresholds[0], GPUThresholds[1])
		for range st.Checkpoints {
			b.WriteString("---|")
		}
		b.WriteString("---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range r.Summaries {
			if s.Scenario != sc.Name {
				continue
			}
			fmt.Fprintf(&b, "| %s |", s.Strategy)
			for _, cp := range st.Checkpoints {
				fmt.Fprintf(&b, " %s |", fmtQ(s.HV[ck(cp)], 3))
			}
			pick := "-"
			if s.PickTrueRatio.N > 0 {
				pick = fmt.Sprintf("%.2f, %.0f%%, %.2f", s.PickTrueRatio.Median, 100*s.PickFeasible, s.PickBestRatio.Median)
			}
			var ideal []string
			for _, q := range s.Ideal {
				ideal = append(ideal, fmt.Sprintf("%.2f", q.Median))
			}
			failed := fmt.Sprintf("%.0f (%.0f)", s.Failed.Median, s.OOM.Median)
			if s.ScreenedOut.Median > 0 {
				failed += fmt.Sprintf(", %.0f screened out", s.ScreenedOut.Median)
			}
			fmt.Fprintf(&b, " %s | %s %v | %s %v | %s | %s | %s | %s | %s | %s | %.0f | %.2f | %s | %s |\n",
				fmtQ(s.HVStrict[ck(st.Trials)], 3), fmtTrials(s.TrialsToMedian, st.Trials), trialsList(s.TrialsToThreshold, st.Trials),
				fmtTrials(s.TrialsToLowMedian, st.Trials), trialsList(s.TrialsToLow, st.Trials),
				fmtReached(s, GPUThresholds[0], st.Seeds), fmtReached(s, GPUThresholds[1], st.Seeds), fmtQ(s.BestRatio, 3), fmtPct(s.GainOverDefault), strings.Join(ideal, ", "),
				failed, s.Repeats.Median, s.GPUHours.Median, fmtQ(s.BelievedHV, 3), pick)
		}
	}
	if len(r.Pruning) > 0 {
		fmt.Fprintf(&b, "\n## Pruning quality (search.Prune)\n\n| scenario | GPUs | history | volume removed | reference-front configs kept | front HV kept |\n|---|---|---|---|---|---|\n")
		gpus := map[string]int{}
		for _, sc := range r.Scenarios {
			gpus[sc.Name] = sc.GPUs
		}
		for _, p := range r.Pruning {
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s |\n", p.Scenario, gpus[p.Scenario], p.History, fmtQ(p.VolumeRemoved, 3), fmtQ(p.FrontKept, 3), fmtQ(p.HVKept, 3))
		}
	}
	if len(r.Goals) > 0 {
		fmt.Fprintf(&b, "\n## Goals\n\n| goal | scenario | value | met |\n|---|---|---|---|\n")
		for _, g := range r.Goals {
			m := "no"
			if g.Met {
				m = "yes"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Goal, g.Scenario, g.Value, m)
		}
	}
	return b.String()
}

func thrKey(thr float64) string { return strconv.FormatFloat(thr, 'f', 2, 64) }

// fmtReached is the median GPU hours to a threshold over the seeds that got
// there, with how many did.
func fmtReached(s Summary, thr float64, seeds int) string {
	k := thrKey(thr)
	if s.ReachedTo[k] == 0 {
		return fmt.Sprintf("- (0/%d)", seeds)
	}
	return fmt.Sprintf("%.2f (%d/%d)", s.GPUHoursTo[k].Median, s.ReachedTo[k], seeds)
}

func fmtQ(q Quantiles, prec int) string {
	if q.N == 0 || math.IsNaN(q.Median) {
		return "-"
	}
	if q.N == 1 {
		return strconv.FormatFloat(q.Median, 'f', prec, 64)
	}
	return fmt.Sprintf("%.*f [%.*f-%.*f]", prec, q.Median, prec, q.Q1, prec, q.Q3)
}

func fmtPct(q Quantiles) string {
	if q.N == 0 || math.IsNaN(q.Median) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*q.Median)
}

func fmtVec(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'g', 4, 64)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func trialsList(ks []int, n int) string {
	s := slices.Clone(ks)
	slices.Sort(s)
	parts := make([]string, len(s))
	for i, k := range s {
		parts[i] = fmtTrials(float64(k), n)
	}
	return "(" + strings.Join(parts, " ") + ")"
}
