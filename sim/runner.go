package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// Config configures the virtual-clock runner.
type Config struct {
	Target spaces.Target
	// Noise switches on the seeded ~2% step noise and rare jitter; off, a
	// run is the exact, noise-free ground truth of a config and workload.
	Noise bool
	Seed  uint64
	// StartupScale multiplies the simulated startup phases (1 = realistic).
	StartupScale float64
	// Calib overrides the GPU's calibration (nil: CalibFor(Target.GPU)).
	Calib *Calib
	// MaxClosedRequests caps the requests a duration-bound closed-loop
	// workload (NumRequests 0) may issue.
	MaxClosedRequests int
	// Capacity bounds capacity mode, the live runner's search
	// (trial.FindCapacity; zero: trial.DefaultCapacityConfig).
	Capacity trial.CapacityConfig
	// Feedback tunes feedback mode, the live runner's controller
	// (trial.HoldSLO; zero: trial.DefaultFeedbackConfig).
	Feedback trial.FeedbackConfig
	// Host is the simulated machine (flags ignored, a known gain, drift).
	Host Host
	// HostStart is the host's clock, in simulated seconds, when the run
	// starts: the drift is read there (FreshNoiseRunner advances it run by
	// run).
	HostStart float64
}

// DefaultConfig is a noise-free runner with realistic startup times; the
// caller sets Target.
func DefaultConfig() Config {
	return Config{StartupScale: 1, MaxClosedRequests: 20000, Capacity: trial.DefaultCapacityConfig()}
}

// Runner evaluates a config on a workload on the virtual clock: the
// simulated engine starts (memory accounting, failures), serves the
// workload's requests at each load level and the measured records go
// through package trial's vLLM-bench metrics. It implements the trial
// runner contract used by the tuner's --engine sim-virtual. A Runner is
// safe for concurrent use.
type Runner struct {
	cfg      Config
	calib    Calib
	base     *spaces.Space // the default space, parsed once
	resolved *spaces.Space // resolved for the target (defaults)
}

// ErrBadInput is wrapped by errors about the runner's own input (not
// engine failures, which are Results).
var ErrBadInput = errors.New("sim: bad input")

// NewRunner checks the target and builds a runner.
func NewRunner(c Config) (*Runner, error) {
	t := c.Target
	switch {
	case t.Model.Name == "" || t.Model.Layers <= 0 || t.Model.ParamsB <= 0:
		return nil, fmt.Errorf("%w: target model not set", ErrBadInput)
	case t.GPU.Name == "" || t.GPU.MemoryGiB <= 0 || t.GPU.BandwidthGBs <= 0 || t.GPU.BF16TFLOPS <= 0:
		return nil, fmt.Errorf("%w: target GPU not set", ErrBadInput)
	}
	if c.Target.GPUCount <= 0 {
		c.Target.GPUCount = 1
	}
	if c.StartupScale <= 0 {
		c.StartupScale = 1
	}
	if c.MaxClosedRequests <= 0 {
		c.MaxClosedRequests = DefaultConfig().MaxClosedRequests
	}
	if c.Capacity == (trial.CapacityConfig{}) {
		c.Capacity = trial.DefaultCapacityConfig()
	}
	base, err := spaces.Default()
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: c, calib: CalibFor(t.GPU), base: base}
	if c.Calib != nil {
		r.calib = *c.Calib
	}
	if rs, err := resolveFor(base, c.Target); err == nil {
		r.resolved = rs // else every Run reports the resolution error
	}
	return r, nil
}

// WithSeed returns a copy of the runner with another noise seed; it shares
// the parsed space, so it is much cheaper than NewRunner.
func (r *Runner) WithSeed(seed uint64) *Runner {
	c := *r
	c.cfg.Seed = seed
	return &c
}

// Start resolves the engine arguments of cfg and does the startup memory
// accounting, as the engine would at launch.
func (r *Runner) Start(cfg spaces.Config) (EngineArgs, MemoryPlan, *StartupError) {
	return r.start(cfg, nil)
}

// start is Start serving the tenants' LoRA adapters (the --enable-lora
// --lora-modules the live runner adds for them), with the tenants' ranks.
func (r *Runner) start(cfg spaces.Config, tenants []trial.Tenant) (EngineArgs, MemoryPlan, *StartupError) {
	a, err := resolveArgs(r.base, r.resolved, r.cfg.Target, cfg)
	if err != nil {
		var se *StartupError
		if errors.As(err, &se) {
			return a, MemoryPlan{}, se
		}
		return a, MemoryPlan{}, &StartupError{Kind: ErrInvalidArgument, Lines: []string{err.Error()}}
	}
	if len(tenants) > 0 {
		lo := LoRAOptions{Enable: true}
		for _, tn := range tenants {
			lo.Modules = append(lo.Modules, LoRAModule{Name: tn.Name, Path: tn.AdapterPath(), Rank: tn.AdapterRank()})
		}
		if se := applyLoRAOptions(&a, lo); se != nil {
			return a, MemoryPlan{}, se
		}
	}
	if se := a.Validate(r.cfg.Target); se != nil {
		return a, MemoryPlan{}, se
	}
	plan, se := PlanMemory(r.cfg.Target, a)
	return a, plan, se
}

// Run evaluates cfg on w. Engine failures (OOM, KV too small, invalid
// arguments) are failed Results; the error is only for cancellation and
// bad input.
func (r *Runner) Run(ctx context.Context, cfg spaces.Config, w trial.Workload) (trial.Result, error) {
	return r.run(ctx, cfg, w, nil)
}

// checkpoint is a screened trial's short stage read off its full run: the
// records a live load generator holds when the k-th measured request
// completes (requests still in flight then are left out).
type checkpoint struct {
	k     int
	level *trial.Level // nil: the run never got there
	at    float64      // seconds into the level
}

// cut fills the checkpoint from the records of a level at load lw.
func (cp *checkpoint) cut(recs []trial.Record, slo trial.SLO, lw trial.Workload) {
	var ends []time.Duration
	for i := range recs {
		if !recs[i].Warmup && recs[i].OK() {
			ends = append(ends, recs[i].Start+recs[i].End)
		}
	}
	if len(ends) < cp.k || cp.k <= 0 {
		return
	}
	slices.Sort(ends)
	at := ends[cp.k-1]
	var held []trial.Record
	for _, rec := range recs {
		if rec.Start+rec.End <= at {
			held = append(held, rec)
		}
	}
	l := trial.NewLevel(trial.Summarize(held, slo), trial.Stability{Stable: true, Reason: "virtual clock", Windows: 1}, slo, lw)
	cp.level = &l
	cp.at = at.Seconds()
}

func (r *Runner) run(ctx context.Context, cfg spaces.Config, w trial.Workload, cp *checkpoint) (trial.Result, error) {
	if err := ctx.Err(); err != nil {
		return trial.Result{}, err
	}
	t := r.cfg.Target
	res := trial.Result{
		SchemaVersion: trial.ResultVersion,
		Config:        cfg,
		ConfigID:      cfg.ID(),
		Workload:      w.Name,
		ServeArgs:     w.LoRAArgs(),
		EngineVersion: t.Version(),
		GPU:           trial.GPUIdentity{Name: t.GPU.Name, Count: t.GPUCount, MemoryGiB: t.GPU.MemoryGiB},
		VRAMSource:    "engine-metrics",
	}
	var levels []level
	var err error
	switch {
	case w.Feedback:
		if _, err = trial.FeedbackTarget(w.SLO); err != nil {
			err = fmt.Errorf("%w: %v", ErrBadInput, err)
		} else if w.Arrival.Closed() {
			err = fmt.Errorf("%w: feedback mode needs an open-loop workload", ErrBadInput)
		}
		if err == nil {
			_, err = levelAt(w, 1)
		}
	case w.Capacity:
		// The search starts at the workload's level, at least 1 (as live).
		_, err = levelAt(w, 1)
	default:
		levels, err = levelsOf(w)
	}
	if err != nil {
		return res, err
	}
	eff, tuned := r.cfg.Host.effective(cfg, func(c spaces.Config) (EngineArgs, error) {
		return resolveArgs(r.base, r.resolved, t, c)
	})
	a, plan, se := r.start(eff, w.Tenants)
	if se != nil {
		res.Status = trial.StatusFailed
		res.Failure = failureClass(se)
		res.Error = se.Error()
		res.Phases.StartupS = sumPhases(failurePhases(t, a, plan, se)) * r.cfg.StartupScale
		res.Phases.TotalS = res.Phases.StartupS
		return res, nil
	}
	res.GPU.Count = plan.GPUs
	res.KVCacheTokens = plan.KVTokens
	res.PeakVRAMGiB = plan.PeakTotalGiB()
	res.Phases.StartupS = sumPhases(StartupPhases(t, a, plan)) * r.cfg.StartupScale
	res.Telemetry = trial.Telemetry{Source: "engine-metrics", PeakMemoryGiB: res.PeakVRAMGiB,
		TotalMemoryGiB: t.GPU.MemoryGiB * float64(plan.GPUs)}

	seed := r.cfg.Seed ^ hashString(res.ConfigID)
	var measure float64
	// runLevel serves one level on fresh engines and appends it.
	runLevel := func(lv level) (trial.Level, error) {
		li := len(res.Levels)
		engines := make([]*Engine, a.DataParallelSize)
		// The host's speed when the level starts: drift moves on the
		// scale of many minutes, a level lasts one or two.
		speed := tuned * r.cfg.Host.Speed(r.cfg.HostStart+res.Phases.StartupS+measure)
		for i := range engines {
			opts := []EngineOption{WithSlowdown(1 / speed)}
			if r.cfg.Noise {
				opts = append(opts, WithNoise(seed+uint64(li)*1009+uint64(i)*7919))
			}
			engines[i] = NewEngine(t, a, r.calib, plan, opts...)
		}
		recs, span, bd, err := serveLevel(ctx, engines, lv, a)
		if err != nil {
			return trial.Level{}, err
		}
		measure += span
		if err := trial.ContextLengthError(recs); err != nil {
			return trial.Level{}, err
		}
		if cp != nil && li == 0 {
			cp.cut(recs, w.SLO, lv.workload)
		}
		m := trial.Summarize(recs, w.SLO)
		m.Breakdown = bd
		m.PrefixCache = prefixCacheOf(engines)
		st := trial.Stability{Stable: true, Reason: "virtual clock", Windows: 1}
		if !lv.closed {
			trial.MarkOverload(recs, &m)
			st.Reason = ""
			st.NoteOverload(&m)
			if st.Reason == "" {
				st.Reason = "virtual clock"
			}
		}
		level := trial.NewLevel(m, st, w.SLO, lv.workload)
		res.Levels = append(res.Levels, level)
		tel := &res.Telemetry
		for _, e := range engines {
			tel.MaxKVCacheUsage = math.Max(tel.MaxKVCacheUsage, e.Stats.MaxKVUsage)
			tel.MaxRunning = math.Max(tel.MaxRunning, float64(e.Stats.MaxRunning))
			tel.MaxWaiting = math.Max(tel.MaxWaiting, float64(e.Stats.MaxWaiting))
			tel.Preemptions += float64(e.Stats.Preemptions)
		}
		return level, nil
	}
	switch {
	case w.Feedback:
		// The live runner's controller (trial.HoldSLO), window by window.
		var fb trial.Feedback
		fb, err = trial.HoldSLO(w, r.cfg.Feedback, func(v float64, lw trial.Workload) (*trial.Metrics, bool, float64, error) {
			lv, err := levelAt(lw, v)
			if err != nil {
				return nil, false, 0, err
			}
			before := measure
			l, err := runLevel(lv)
			if err != nil {
				return nil, false, 0, err
			}
			return &l.Metrics, l.SLOMet, measure - before, nil
		})
		res.Feedback, res.Capacity = &fb, fb.Sustained
		if res.Primary = fb.Primary(); res.Primary < 0 {
			res.Primary = 0
		}
	case w.Capacity:
		// The live runner's search (trial.FindCapacity), level by level.
		_, res.Primary, res.Capacity, err = trial.FindCapacity(w, r.cfg.Capacity, func(v float64, lw trial.Workload) (trial.Level, error) {
			lv, err := levelAt(lw, v)
			if err != nil {
				return trial.Level{}, err
			}
			return runLevel(lv)
		})
	default:
		for _, lv := range levels {
			if _, err = runLevel(lv); err != nil {
				break
			}
		}
	}
	if errors.Is(err, trial.ErrContextLength) {
		// As the live runner: a config that cannot hold the workload's
		// longest requests is a config error, not a measurement.
		res.Status, res.Failure, res.Error = trial.StatusFailed, trial.ClassOf(err), err.Error()
		res.Levels, res.Primary, res.Capacity, res.Feedback = nil, 0, 0, nil
		res.Phases.MeasureS = measure
		res.Phases.TotalS = res.Phases.StartupS + measure
		return res, nil
	}
	if err != nil {
		return res, err
	}
	res.Status = trial.StatusOK
	res.Stability = res.Levels[res.Primary].Stability
	if !res.Stability.Stable {
		res.Status = trial.StatusUnstable
	}
	res.Phases.MeasureS = measure
	res.Phases.TotalS = res.Phases.StartupS + measure
	return res, nil
}

// RunStaged runs a screened trial of `tuner search --screen-fraction`: the
// short stage is a checkpoint of the full run, read when the short
// workload's count of measured requests has completed (as a live load
// generator would read it, the load still on), and a promotion continues
// the same run to its end, so it costs only the rest of the measurement.
// A workload of several levels, a duration, capacity or feedback mode runs
// the short workload and then, on the engine that is still up, the full
// one. The second result's Phases count only what the second stage added.
func (r *Runner) RunStaged(ctx context.Context, cfg spaces.Config, short, full trial.Workload, promote func(*trial.Result) bool) (trial.Result, trial.Result, error) {
	levels, err := levelsOf(full)
	if err != nil || full.Capacity || full.Feedback || len(levels) != 1 || full.Duration > 0 ||
		short.NumRequests <= 0 || short.NumRequests >= full.NumRequests {
		return runStaged(ctx, cfg, short, full, promote, r.Run)
	}
	cp := &checkpoint{k: short.NumRequests}
	res, err := r.run(ctx, cfg, full, cp)
	if err != nil || !res.Usable() || cp.level == nil {
		return res, trial.Result{}, err
	}
	first := res
	first.Levels, first.Primary = []trial.Level{*cp.level}, 0
	first.Stability = cp.level.Stability
	first.Phases = trial.Phases{StartupS: res.Phases.StartupS, MeasureS: cp.at, TotalS: res.Phases.StartupS + cp.at}
	if !promote(&first) {
		return first, trial.Result{}, nil
	}
	second := res
	second.Phases = trial.Phases{MeasureS: res.Phases.MeasureS - cp.at, TotalS: res.Phases.TotalS - first.Phases.TotalS}
	return first, second, nil
}

func runStaged(ctx context.Context, cfg spaces.Config, short, full trial.Workload, promote func(*trial.Result) bool,
	run func(context.Context, spaces.Config, trial.Workload) (trial.Result, error)) (trial.Result, trial.Result, error) {
	first, err := run(ctx, cfg, short)
	if err != nil || !first.Usable() || !promote(&first) {
		return first, trial.Result{}, err
	}
	second, err := run(ctx, cfg, full)
	second.Phases.TotalS -= second.Phases.StartupS
	second.Phases.StartupS = 0
	return first, second, err
}

func failureClass(se *StartupError) trial.FailureClass {
	switch {
	case errors.Is(se, ErrOOM):
		return trial.FailOOM
	case errors.Is(se, ErrKVTooSmall):
		return trial.FailKVTooSmall
	case errors.Is(se, ErrInvalidArgument):
		return trial.FailInvalidArgument
	}
	return trial.FailCrashed
}

func hashString(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

type level struct {
	workload    trial.Workload
	closed      bool
	concurrency int
	value       float64
}

// levelsOf expands a workload into its fixed load levels.
func levelsOf(w trial.Workload) ([]level, error) {
	vals := w.Levels
	if len(vals) == 0 {
		if w.Arrival.Closed() {
			vals = []float64{float64(w.Arrival.Concurrency)}
		} else {
			vals = []float64{w.Arrival.Rate}
		}
	}
	var out []level
	for _, v := range vals {
		l, err := levelAt(w, v)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// levelAt is w at load v (concurrency or rate), bounded by its request
// count, or by its duration when it has none.
func levelAt(w trial.Workload, v float64) (level, error) {
	closed := w.Arrival.Closed()
	lw := w
	lw.Levels = nil
	l := level{closed: closed, value: v}
	if closed {
		l.concurrency = int(math.Round(v))
		lw.Arrival.Concurrency = l.concurrency
		if l.concurrency <= 0 {
			return l, fmt.Errorf("%w: closed-loop concurrency %v must be > 0", ErrBadInput, v)
		}
	} else {
		if v < 0 || math.IsNaN(v) {
			return l, fmt.Errorf("%w: request rate %v must be >= 0", ErrBadInput, v)
		}
		lw.Arrival.Rate = v
	}
	if lw.NumRequests <= 0 {
		switch {
		case lw.Duration <= 0:
			return l, fmt.Errorf("%w: workload %q has neither num_requests nor duration", ErrBadInput, w.Name)
		case !closed && v > 0:
			lw.NumRequests = int(math.Ceil(v * lw.Duration.Seconds()))
		default:
			lw.NumRequests = DefaultConfig().MaxClosedRequests
		}
	} else {
		lw.Duration = 0 // a request count bounds the run
	}
	l.workload = lw
	return l, nil
}

// simulate serves specs on engines (round-robin, one per DP rank) on the
// virtual clock and returns the client-side records and the run's span in
// seconds. Closed loop keeps conc requests in flight (a finished request is
// replaced at once); open loop sends each at its offset. With duration > 0
// a closed loop stops issuing once that much time has passed.
// adapterIndex maps a LoRA adapter's name to the engine's 1-based index.
func adapterIndex(a EngineArgs) map[string]int {
	m := make(map[string]int, len(a.LoRAModules))
	for i, l := range a.LoRAModules {
		m[l.Name] = i + 1
	}
	return m
}

// serveLevel serves one level's requests on engines (fresh for the level)
// on the virtual clock, and reads the engines' phase histograms back as
// vllm-sim serves them, the way a live trial reads the engine's /metrics.
func serveLevel(ctx context.Context, engines []*Engine, lv level, a EngineArgs) ([]trial.Record, float64, *trial.Breakdown, error) {
	reg := prometheus.NewRegistry()
	ph := newPhaseHists(reg, nil)
	recs, span, err := simulate(ctx, engines, lv.workload.Requests(), lv.closed, lv.concurrency, lv.workload.Duration, a.MaxModelLen, &ph, adapterIndex(a))
	if err != nil {
		return nil, 0, nil, err
	}
	bd, err := breakdownOf(reg, recs)
	if err != nil {
		return nil, 0, nil, err
	}
	return recs, span, bd, nil
}

func simulate(ctx context.Context, engines []*Engine, specs []trial.RequestSpec, closed bool, conc int, duration time.Duration, maxModelLen int, ph *phaseHists, adapters map[string]int) ([]trial.Record, float64, error) {
	n := len(specs)
	reqs := make([]Request, n)
	recs := make([]trial.Record, n)
	starts := make([]float64, n)
	scheduled := make([]float64, n) // first scheduled (-1: not yet)
	firsts := make([]float64, n)    // first token
	total := 0
	for _, s := range specs {
		total += s.OutputLen
	}
	backing := make([]time.Duration, 0, total)
	busy := make([]bool, len(engines))
	ends := make([]float64, len(engines))
	outs := make([][]Output, len(engines))

	var t float64
	issued, rr, finished := 0, 0, 0
	limit := math.Inf(1)
	if duration > 0 {
		limit = duration.Seconds()
	}
	issue := func() {
		for issued < n {
			i := issued
			issued++
			s := specs[i]
			starts[i], scheduled[i] = t, -1
			recs[i] = trial.Record{Index: s.Index, PromptLen: s.PromptLen, OutputLen: s.OutputLen,
				Start: toDur(t), Warmup: s.Warmup, Tenant: s.Tenant}
			if s.PromptLen+s.OutputLen > maxModelLen || s.PromptLen <= 0 || s.OutputLen <= 0 {
				recs[i].Err = fmt.Sprintf("400 Bad Request: request has %d input tokens and %d output tokens; maximum context length is %d", s.PromptLen, s.OutputLen, maxModelLen)
				recs[i].OutputLen = 0
				finished++
				if closed {
					continue // the client sends its next request at once
				}
				return
			}
			r := &reqs[i]
			*r = Request{ID: i, PromptLen: s.PromptLen, OutputLen: s.OutputLen, PrefixLen: s.PrefixLen, Adapter: adapters[s.Tenant]}
			start := len(backing)
			recs[i].Chunks = backing[start : start : start+s.OutputLen]
			backing = backing[:start+s.OutputLen]
			engines[rr%len(engines)].Add(r)
			rr++
			return
		}
	}
	if closed {
		for k := 0; k < conc && issued < n; k++ {
			issue()
		}
	}
	for iter := 0; ; iter++ {
		if iter&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, 0, err
			}
		}
		for k := range engines {
			if !busy[k] || ends[k] > t {
				continue
			}
			busy[k] = false
			for _, o := range outs[k] {
				i := o.Req.ID
				rel := toDur(t - starts[i])
				recs[i].Chunks = append(recs[i].Chunks, rel)
				if o.First {
					firsts[i] = t
				}
				if o.Finished {
					recs[i].End = rel
					finished++
					if ph != nil {
						ph.finished(starts[i], scheduled[i], firsts[i], t)
					}
					if closed && t < limit {
						issue()
					}
				}
			}
		}
		if !closed {
			for issued < n && specs[issued].At <= toDur(t) {
				issue()
			}
		}
		for k, e := range engines {
			if busy[k] || !e.HasWork() {
				continue
			}
			d, o := e.Step()
			if d <= 0 {
				return nil, 0, fmt.Errorf("sim: scheduler stalled with %d waiting and %d running requests", e.Waiting(), e.Running())
			}
			busy[k], ends[k], outs[k] = true, t+d, o
			for _, r := range e.sched {
				if scheduled[r.ID] < 0 {
					scheduled[r.ID] = t
				}
			}
		}
		next := math.Inf(1)
		for k := range engines {
			if busy[k] {
				next = math.Min(next, ends[k])
			}
		}
		if !closed && issued < n {
			next = math.Min(next, specs[issued].At.Seconds())
		}
		if math.IsInf(next, 1) {
			break
		}
		t = next
	}
	return recs[:issued], t, nil
}

// breakdownOf decomposes a level from the phase histograms in reg (one
// "after" reading: the level started on fresh engines).
func breakdownOf(reg *prometheus.Registry, recs []trial.Record) (*trial.Breakdown, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("sim: gather phase histograms: %w", err)
	}
	fams := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		fams[mf.GetName()] = mf
	}
	return trial.Decompose(trial.LatencyScrape{}, trial.LatencyFromFamilies(fams), recs)
}

// prefixCacheOf is the engines' prefix-cache lookups and hits together.
func prefixCacheOf(engines []*Engine) *trial.PrefixCache {
	var queried, hits int64
	for _, e := range engines {
		queried, hits = queried+e.Stats.PrefixQueries, hits+e.Stats.PrefixHits
	}
	return trial.NewPrefixCache(float64(queried), float64(hits))
}

func toDur(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
