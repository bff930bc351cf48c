package trial

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
)

// Config holds the deployment knobs of a Runner.
type Config struct {
	// Command starts the engine without the candidate's flags, e.g.
	// {"vllm", "serve", MODEL} or {"vllm-sim", "serve", MODEL, "--gpu", "H100-80GB"}.
	Command []string
	// ExtraArgs follow the candidate's flags (e.g. --startup-scale for the sim).
	ExtraArgs []string
	// Model is the model name requests carry ("": data[0].id of /v1/models).
	Model string
	Host  string // default 127.0.0.1
	Port  int    // 0: a fresh free port per trial
	Env   []string
	// StartupTimeout bounds process start to /health 200.
	StartupTimeout time.Duration
	// RequestTimeout bounds one request (a timeout is a failed request).
	RequestTimeout time.Duration
	// MaxLineBytes bounds one SSE line or event of a response (a longer
	// one fails the request as a malformed stream; default 1 MiB).
	MaxLineBytes int
	// StopGrace is the SIGTERM-to-SIGKILL grace period.
	StopGrace time.Duration
	// FreeTimeout bounds the wait for the previous engine's port and GPU memory.
	FreeTimeout time.Duration
	// LogDir receives <trial>.log and <trial>.raw.jsonl.gz (required).
	LogDir string
	// RunDir also keeps the records of running engines, so that a runner
	// over any log dir reaps what a killed tuner left (default
	// DefaultRunDir(); "-": none). See ReapStale.
	RunDir string
	// MaxLogBytes caps each engine log file (default DefaultMaxLogBytes).
	MaxLogBytes int64
	// Telemetry: "auto" (NVML when available, else the engine's metrics),
	// "nvml" (fail when NVML is unavailable), "engine" or "none".
	Telemetry string
	// GPU overrides the NVML source Telemetry would open (tests, fakes).
	GPU GPUSource
	// GPUIdentity is reported when no GPU source names the hardware.
	GPUIdentity GPUIdentity
	SampleEvery time.Duration // GPU sampling period (default 100 ms, ~10 Hz)
	ScrapeEvery time.Duration // engine /metrics period (default 1 s)
	// LevelConfig: how levels are measured. A level failing more of its
	// requests than UnhealthyErrorRate fails the trial as unhealthy.
	LevelConfig
	Logger *slog.Logger
	// Progress, when set, is called at each phase (from Run's goroutine).
	Progress func(Event)
}

// Event is a progress report of a running trial.
type Event struct {
	Phase   string // wait-free, startup, level, stop, done
	Level   int    // index of the level (phase level)
	Load    float64
	Closed  bool
	Message string
}

// DefaultConfig returns production defaults; set Command and LogDir.
func DefaultConfig() Config {
	return Config{
		Host: "127.0.0.1", StartupTimeout: 15 * time.Minute, RequestTimeout: 5 * time.Minute, MaxLineBytes: DefaultMaxLineBytes,
		StopGrace: 10 * time.Second, FreeTimeout: 2 * time.Minute, Telemetry: "auto",
		SampleEvery: 100 * time.Millisecond, ScrapeEvery: time.Second, LevelConfig: DefaultLevelConfig(),
	}
}

// Runner runs trials against a real engine process, one at a time.
type Runner struct {
	cfg  Config
	gpu  GPUSource
	log  *slog.Logger
	mu   sync.Mutex // one trial at a time
	prev []int      // processes of the previous engine (GPU hygiene)
	// healthy, when set (tests), is told each engine's base URL once it
	// is healthy, before the load starts.
	healthy func(baseURL string)
}

// NewRunner checks cfg and opens the telemetry source.
func NewRunner(cfg Config) (*Runner, error) {
	d := DefaultConfig()
	if len(cfg.Command) == 0 {
		return nil, errors.New("trial runner: no engine command")
	}
	if cfg.LogDir == "" {
		return nil, errors.New("trial runner: no log dir")
	}
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("trial runner: %w", err)
	}
	cfg.Host = cmp.Or(cfg.Host, d.Host)
	cfg.StartupTimeout = cmp.Or(cfg.StartupTimeout, d.StartupTimeout)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, d.RequestTimeout)
	cfg.MaxLineBytes = cmp.Or(cfg.MaxLineBytes, d.MaxLineBytes)
	cfg.StopGrace = cmp.Or(cfg.StopGrace, d.StopGrace)
	cfg.FreeTimeout = cmp.Or(cfg.FreeTimeout, d.FreeTimeout)
	cfg.Telemetry = cmp.Or(cfg.Telemetry, d.Telemetry)
	cfg.SampleEvery = cmp.Or(cfg.SampleEvery, d.SampleEvery)
	cfg.ScrapeEvery = cmp.Or(cfg.ScrapeEvery, d.ScrapeEvery)
	cfg.LevelConfig.SetDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runner{cfg: cfg, log: cfg.Logger, gpu: cfg.GPU}
	if cfg.RunDir == "" {
		cfg.RunDir = DefaultRunDir()
	} else if cfg.RunDir == "-" {
		cfg.RunDir = ""
	}
	r.cfg.RunDir = cfg.RunDir
	r.prev = ReapStale(r.log, cfg.LogDir, cfg.RunDir)
	if r.gpu == nil {
		switch cfg.Telemetry {
		case "auto", "nvml":
			src, err := OpenNVML()
			if err != nil {
				if cfg.Telemetry == "nvml" {
					return nil, fmt.Errorf("trial runner: %w", err)
				}
				r.log.Info("GPU telemetry from the engine's metrics", "reason", err)
			} else {
				r.gpu = src
			}
		case "engine", "none":
		default:
			return nil, fmt.Errorf("trial runner: telemetry %q: want auto, nvml, engine or none", cfg.Telemetry)
		}
	}
	return r, nil
}

// Close releases the telemetry source.
func (r *Runner) Close() error {
	if r.gpu != nil && r.cfg.GPU == nil {
		return r.gpu.Close()
	}
	return nil
}

func (r *Runner) progress(e Event) {
	if r.cfg.Progress != nil {
		r.cfg.Progress(e)
	}
}

// Run runs one trial: wait until the previous engine's port and GPU memory
// are free, start the engine with cfg's flags, wait for health, drive every
// load level of w (or search the SLO capacity), stop the engine, write the
// raw data and return the Result. Engine failures are Results with Status
// failed; the error is only for infrastructure problems and cancellation
// (then the engine is stopped first and the Result says FailInterrupted).
func (r *Runner) Run(ctx context.Context, cfg spaces.Config, w Workload) (res Result, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t0 := time.Now()
	res = Result{SchemaVersion: ResultVersion, Config: cfg, ConfigID: cfg.ID(), Workload: w.Name,
		ServeArgs: w.LoRAArgs(), GPU: r.cfg.GPUIdentity, VRAMSource: "none"}
	defer func() { res.Phases.TotalS = time.Since(t0).Seconds() }()
	interrupted := func(cause error) (Result, error) {
		res.Status, res.Failure, res.Error = StatusFailed, FailInterrupted, cause.Error()
		return res, cause
	}
	if err := ctx.Err(); err != nil {
		return interrupted(err)
	}
	if err := checkWorkload(w); err != nil {
		return res, err
	}
	if r.gpu != nil {
		if id, err := r.gpu.Identity(); err == nil {
			res.GPU = id
		}
	}
	name := fmt.Sprintf("trial-%s-%s", time.Now().UTC().Format("20060102T150405.000"), shortID(res.ConfigID))
	res.LogPath = filepath.Join(r.cfg.LogDir, name+".log")
	rawPath := filepath.Join(r.cfg.LogDir, name+".raw.jsonl.gz")

	// Hygiene: the previous engine's port and GPU memory are released.
	r.progress(Event{Phase: "wait-free"})
	tf := time.Now()
	fctx, fcancel := context.WithTimeout(ctx, r.cfg.FreeTimeout)
	err = WaitGPUReleased(fctx, r.gpu, r.prev)
	if err == nil && r.cfg.Port != 0 {
		err = WaitPortFree(fctx, r.cfg.Host, r.cfg.Port)
	}
	fcancel()
	res.Phases.WaitFreeS = time.Since(tf).Seconds()
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx.Err())
		}
		return res, fmt.Errorf("before trial: %w", err)
	}

	// Start and wait for health; an engine that lost its port to another
	// process is restarted on a fresh one (not the config's fault).
	r.progress(Event{Phase: "startup"})
	ts := time.Now()
	var eng *Engine
	for attempt := 0; ; attempt++ {
		eng, err = StartEngine(ctx, EngineConfig{
			Command: r.cfg.Command, Flags: slices.Concat(cfg.Flags(), res.ServeArgs, r.cfg.ExtraArgs), Host: r.cfg.Host, Port: r.cfg.Port,
			LogPath: res.LogPath, Env: r.cfg.Env, StopGrace: r.cfg.StopGrace, Logger: r.log, MaxLogBytes: r.cfg.MaxLogBytes,
		})
		if err != nil {
			if ctx.Err() != nil {
				return interrupted(ctx.Err())
			}
			return res, err
		}
		writeRecord(eng.Record(), r.cfg.LogDir, r.cfg.RunDir)
		err = eng.WaitHealthy(ctx, r.cfg.StartupTimeout)
		if err == nil || ctx.Err() != nil || !eng.LostPort() {
			break
		}
		port := eng.Port()
		r.prev = append(eng.Members(), eng.Seen()...)
		if serr := eng.Stop(); serr != nil {
			return res, serr
		}
		clearRecord(eng.PID(), r.cfg.LogDir, r.cfg.RunDir)
		if r.cfg.Port != 0 || attempt >= 2 {
			return res, fmt.Errorf("start engine: %w: %d", ErrPortInUse, port)
		}
		r.log.Warn("engine lost its port to another process; retrying on a fresh port", "port", port)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		r.progress(Event{Phase: "stop"})
		tq := time.Now()
		r.prev = append(eng.Members(), eng.Seen()...)
		serr := eng.Stop()
		if serr == nil {
			clearRecord(eng.PID(), r.cfg.LogDir, r.cfg.RunDir)
		}
		res.Phases.StopS = time.Since(tq).Seconds()
		return serr
	}
	defer func() {
		if serr := stop(); serr != nil {
			err = errors.Join(err, serr)
		}
	}()
	fail := func(e error) (Result, error) {
		if errors.Is(e, ErrEnvironment) {
			// Not the config's fault: stop the search, teach it nothing.
			r.log.Warn("engine environment broken", "config", shortID(res.ConfigID), "error", e)
			return interrupted(fmt.Errorf("trial %s: %w", shortID(res.ConfigID), e))
		}
		res.Status, res.Failure, res.Error = StatusFailed, ClassOf(e), e.Error()
		var ee *EngineError
		if errors.As(e, &ee) && len(ee.Tail) > 0 {
			res.Error += "\n" + strings.Join(ee.Tail, "\n")
		}
		facts := ParseLogFacts(eng.ReadLog())
		res.EngineVersion = facts.Version
		res.KVCacheTokens = facts.KVCacheTokens
		r.log.Info("trial failed", "config", shortID(res.ConfigID), "class", res.Failure, "error", e)
		return res, nil
	}
	res.Phases.StartupS = time.Since(ts).Seconds()
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx.Err())
		}
		return fail(err)
	}
	eng.Members()
	if r.healthy != nil {
		r.healthy(eng.BaseURL())
	}
	res.EngineVersion = eng.Version(ctx)
	res.KVCacheTokens = ParseLogFacts(eng.ReadLog()).KVCacheTokens
	model := r.cfg.Model
	if m, err := eng.ServedModel(ctx); err == nil && model == "" {
		model = m
	}
	if model == "" && len(r.cfg.Command) > 2 {
		model = r.cfg.Command[2]
	}

	// Telemetry during the load.
	rec := &recorder{}
	tctx, tcancel := context.WithCancel(ctx)
	var twg sync.WaitGroup
	var gpu GPUSource
	if r.cfg.Telemetry != "none" && r.cfg.Telemetry != "engine" || r.cfg.GPU != nil {
		gpu = r.gpu
	}
	scrape := eng.BaseURL()
	if r.cfg.Telemetry == "none" {
		scrape = ""
	}
	twg.Go(func() { rec.sample(tctx, gpu, r.cfg.SampleEvery, eng.hc, scrape, r.cfg.ScrapeEvery) })
	stopTelemetry := func() {
		tcancel()
		twg.Wait()
	}
	defer stopTelemetry()

	client := NewClient(eng.BaseURL(), model, r.cfg.RequestTimeout, WithMaxLineBytes(r.cfg.MaxLineBytes), WithEndpoint(w.Endpoint))
	defer client.Close()
	lr := &levelRunner{m: r.levelMeasurer(eng, client, w)}
	tm := time.Now()
	var out LevelsOutcome
	out, err = MeasureLevels(w, r.cfg.Capacity(), r.cfg.Feedback, func(v float64, lw Workload) (*MeasuredLevel, error) {
		return lr.measure(ctx, v, lw)
	})
	res.Primary, res.Feedback = out.Primary, out.Feedback
	if w.Capacity || w.Feedback {
		res.Capacity = out.Capacity
	}
	res.Phases.MeasureS = time.Since(tm).Seconds()
	res.Levels = lr.levels
	for _, l := range lr.levels {
		res.Phases.WarmupS += l.Stability.WarmupS
	}
	stopTelemetry()
	var throttled bool
	res.Telemetry, res.PeakVRAMGiB, res.VRAMSource, throttled = rec.summary()
	if res.VRAMSource == "none" {
		if v, ok := EstimateVRAM(cfg, res.GPU); ok {
			res.PeakVRAMGiB, res.VRAMSource = v, "estimate"
		}
	}
	if len(lr.raw) > 0 {
		if werr := WriteRaw(rawPath, RawHeader{ConfigID: res.ConfigID, Workload: w.Name, Levels: lr.raw}); werr != nil {
			r.log.Warn("raw data not written", "error", werr)
		} else {
			res.RawPath = rawPath
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(ctx.Err())
		}
		return fail(err)
	}
	if len(res.Levels) == 0 {
		return fail(fmt.Errorf("%w: no load level measured", ErrUnhealthy))
	}
	res.Stability = res.Levels[res.Primary].Stability
	if throttled {
		res.Stability.Throttled = true
		res.Stability.Stable = false
		res.Stability.Reason = strings.TrimPrefix(res.Stability.Reason+"; GPU throttled ("+strings.Join(res.Telemetry.ThrottleReasons, ",")+")", "; ")
		for i := range res.Levels {
			res.Levels[i].Stability.Throttled = true
		}
	}
	res.Status = StatusOK
	if !res.Stability.Stable {
		res.Status = StatusUnstable
	}
	if serr := stop(); serr != nil {
		return res, serr
	}
	r.progress(Event{Phase: "done", Message: res.String()})
	return res, nil
}

// EstimateVRAM is vLLM's reservation when nothing measured it:
// gpu_memory_utilization x memory per GPU x GPUs used (tensor x pipeline x
// data parallel; vLLM preallocates its share whatever the load).
func EstimateVRAM(cfg spaces.Config, gpu GPUIdentity) (float64, bool) {
	if gpu.MemoryGiB <= 0 || !cfg.Has("gpu_memory_utilization") {
		return 0, false
	}
	n := 1
	for _, p := range []string{"tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size"} {
		if cfg.Has(p) && cfg.Int(p) > 0 {
			n *= cfg.Int(p)
		}
	}
	return cfg.Float("gpu_memory_utilization") * gpu.MemoryGiB * float64(n), true
}

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// checkWorkload rejects workloads the runner cannot drive (bad input, an
// error, not a failed trial).
func checkWorkload(w Workload) error {
	if _, err := ParseEndpoint(string(w.Endpoint)); err != nil {
		return fmt.Errorf("workload %q: %w", w.Name, err)
	}
	if w.NumRequests <= 0 && w.Duration <= 0 {
		return fmt.Errorf("workload %q: neither num_requests nor duration", w.Name)
	}
	if w.Capacity && len(w.SLO) == 0 {
		return fmt.Errorf("workload %q: capacity mode needs an SLO", w.Name)
	}
	if w.Feedback {
		if _, err := FeedbackTarget(w.SLO); err != nil {
			return fmt.Errorf("workload %q: %w", w.Name, err)
		}
		if w.Arrival.Closed() || w.Capacity {
			return fmt.Errorf("workload %q: feedback mode needs an open loop and no capacity mode", w.Name)
		}
		return nil // the controller starts at the workload's rate (1 req/s when unset)
	}
	if w.Capacity {
		return nil // the search starts at the workload's level, at least 1
	}
	for _, v := range loadValues(w) {
		switch {
		case w.Arrival.Closed() && !(v >= 1):
			return fmt.Errorf("workload %q: concurrency %v must be >= 1", w.Name, v)
		case !w.Arrival.Closed() && !(v >= 0):
			return fmt.Errorf("workload %q: request rate %v must be >= 0 (0: all at once)", w.Name, v)
		}
	}
	return nil
}

// levelRunner keeps what a trial's levels measured (LevelMeasurer) for
// its Result and raw data.
type levelRunner struct {
	m      *LevelMeasurer
	levels []Level
	raw    []RawLevel
}

// CapacityWorkload is w at load v as capacity mode measures it: for a
// closed loop at least rounds x v requests after a warm-up of at least v
// (with fewer requests than the concurrency a level never reaches it).
func CapacityWorkload(w Workload, v float64, rounds int) Workload {
	lw := AtLoad(w, v)
	if lw.Arrival.Closed() && lw.NumRequests > 0 {
		c := lw.Arrival.Concurrency
		lw.NumRequests = max(lw.NumRequests, rounds*c)
		lw.Warmup = max(lw.Warmup, c)
	}
	return lw
}

// measure runs one load level (lw: the workload at load v) and keeps it.
// It returns an engine error (*EngineError) when the engine dies,
// ErrUnhealthy when requests fail en masse, or ctx's error.
func (lr *levelRunner) measure(ctx context.Context, v float64, lw Workload) (*MeasuredLevel, error) {
	l, err := lr.m.Measure(ctx, len(lr.levels), v, lw)
	if l != nil {
		rl := RawLevel{Records: l.Records, Concurrency: l.Concurrency, Rate: l.Rate}
		lr.levels = append(lr.levels, l.Level)
		lr.raw = append(lr.raw, rl)
	}
	return l, err
}

// levelMeasurer is the level engine on a trial's engine: its progress
// events, its breakdown from the engine's /metrics (unless telemetry is
// off), and its judgement of a level that failed en masse (a dying engine
// is classified from its log, a live one is unhealthy).
func (r *Runner) levelMeasurer(eng *Engine, client *Client, w Workload) *LevelMeasurer {
	m := &LevelMeasurer{
		Client: client, SLO: w.SLO, LevelConfig: r.cfg.LevelConfig,
		Exited: eng.Exited(), Died: func() error { return eng.Failure(true) },
		Logger: r.log,
		OnLevel: func(idx int, v float64, closed bool) {
			r.progress(Event{Phase: "level", Level: idx, Load: v, Closed: closed})
		},
		Judge: func(ctx context.Context, recs []Record, m *Metrics) error {
			healthy := eng.Healthy(ctx)
			if !healthy {
				select {
				case <-eng.Exited():
				case <-time.After(3 * time.Second):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if f := eng.Failure(true); errors.Is(f, ErrOOM) || errors.Is(f, ErrKVTooSmall) || eng.ExitCode() >= 0 {
				return f
			}
			return &EngineError{Kind: ErrUnhealthy, ExitCode: -1, Tail: Tail(eng.ReadLog(), tailLines),
				Line: fmt.Sprintf("%.0f%% of requests failed (health %v): %s", 100*m.ErrorRate, healthy, FirstErr(recs))}
		},
	}
	if r.cfg.Telemetry != "none" {
		m.MetricsClient, m.MetricsURL = eng.hc, eng.BaseURL()
	}
	return m
}

// SummarizeLevel is how a measured level becomes metrics: the steady-state
// analysis (Analyze) moves its warm-up cut into the warm-up (recs is
// marked in place), then Summarize.
func SummarizeLevel(recs []Record, sc StabilityConfig, slo SLO) (Metrics, Analysis) {
	a := Analyze(recs, sc)
	cut := make(map[int]bool, len(a.CutIndex))
	for _, i := range a.CutIndex {
		cut[i] = true
	}
	for i := range recs {
		if cut[recs[i].Index] {
			recs[i].Warmup = true
		}
	}
	return Summarize(recs, slo), a
}

// ContextLengthError is a config error (ErrContextLength) when the engine rejected requests
// as longer than its context (HTTP 400, max_model_len below the workload's
// longest prompt + output): the config cannot serve the workload, and the
// requests it did serve are the shorter ones, so their figures would flatter
// it. A healthy engine answering 400 is not unhealthy.
func ContextLengthError(recs []Record) error {
	n, first := 0, ""
	for i := range recs {
		if recs[i].Err != "" && RequestErrorClass(recs[i].Err) == ReqErrContextLength {
			if n++; first == "" {
				first = recs[i].Err
			}
		}
	}
	if n == 0 {
		return nil
	}
	return &EngineError{Kind: ErrContextLength, ExitCode: -1,
		Line: fmt.Sprintf("%d of %d requests rejected as longer than max_model_len: %.200s", n, len(recs), first)}
}

// NoteOverload makes the stability of a level MarkOverload found
// overloaded unstable (its queue grows for the whole run: no steady state)
// and says so first in the reason.
func (st *Stability) NoteOverload(m *Metrics) {
	if m.Overloaded {
		st.Stable = false
		st.Reason = strings.TrimSuffix(m.OverloadText()+"; "+st.Reason, "; ")
	}
}

func measuredOK(done []Record) int {
	n := 0
	for i := range done {
		if !done[i].Warmup && done[i].OK() {
			n++
		}
	}
	return n
}

// FirstErr is the error of the first failed request of recs ("": none).
func FirstErr(recs []Record) string {
	for _, r := range recs {
		if r.Err != "" {
			return r.Err
		}
	}
	return ""
}

// CapacityConfig bounds capacity mode: the bracketing caps, the level
// budget, the relative resolution and the closed-loop rounds per level
// (see CapacityWorkload).
type CapacityConfig struct {
	MaxConcurrency int
	MaxRate        float64
	Levels         int
	Tolerance      float64
	Rounds         int
}

// DefaultCapacityConfig is the capacity mode of DefaultConfig.
func DefaultCapacityConfig() CapacityConfig {
	return DefaultLevelConfig().Capacity()
}

// FindCapacity is capacity mode, the one search of the live and the
// virtual runner: from the workload's first level it doubles and bisects
// (SearchCapacity) the load at which a level meets the SLO (Level.SLOMet;
// an overloaded level never does), measuring each load v with
// measure(v, CapacityWorkload(w, v, c.Rounds)). It returns the levels in
// the order measured, the primary level (the best passing one, else the
// lowest load measured) and the capacity (its load; 0 when none passed).
func FindCapacity(w Workload, c CapacityConfig, measure func(v float64, lw Workload) (Level, error)) (levels []Level, primary int, capacity float64, err error) {
	closed := w.Arrival.Closed()
	ceil := c.MaxRate
	if closed {
		ceil = float64(c.MaxConcurrency)
	}
	best := -1
	_, err = SearchCapacity(loadValues(w)[0], ceil, closed, c.Levels, c.Tolerance, func(v float64) (bool, error) {
		l, err := measure(v, CapacityWorkload(w, v, c.Rounds))
		if err != nil {
			return false, err
		}
		levels = append(levels, l)
		i := len(levels) - 1
		if l.SLOMet && (best < 0 || v > loadOf(levels[best])) {
			best = i
		}
		return l.SLOMet, nil
	})
	switch {
	case best >= 0:
		primary, capacity = best, loadOf(levels[best])
	case len(levels) > 0:
		primary = lowest(levels)
	}
	return levels, primary, capacity, err
}

// SearchCapacity finds the highest load at which pass holds, assuming it
// holds below some threshold: from start (at least 1: rates below 1 req/s
// and concurrency 0 are never tried) it doubles until a level fails, or
// halves until one passes, then bisects the bracket until it is within
// tol relative (one for integer concurrency) or maxLevels levels were
// tried. It returns the best passing load, 0 when none passed.
func SearchCapacity(start, ceil float64, integer bool, maxLevels int, tol float64, pass func(v float64) (bool, error)) (float64, error) {
	const floor = 1.0
	round := func(v float64) float64 {
		if integer {
			return math.Round(v)
		}
		return math.Round(v*1000) / 1000
	}
	start = round(math.Min(math.Max(start, floor), ceil))
	if !(start >= floor) {
		start = floor
	}
	tried := 0
	try := func(v float64) (bool, error) {
		tried++
		return pass(v)
	}
	lo, hi := 0.0, 0.0 // best passing, lowest failing (0: unknown)
	ok, err := try(start)
	if err != nil {
		return 0, err
	}
	if ok {
		lo = start
		for tried < maxLevels {
			next := round(math.Min(2*lo, ceil))
			if next <= lo {
				break // at the cap
			}
			if ok, err = try(next); err != nil {
				return lo, err
			}
			if !ok {
				hi = next
				break
			}
			lo = next
		}
	} else {
		hi = start
		for tried < maxLevels {
			next := round(math.Max(hi/2, floor))
			if next >= hi {
				break // at the floor: nothing passes
			}
			if ok, err = try(next); err != nil {
				return 0, err
			}
			if ok {
				lo = next
				break
			}
			hi = next
		}
	}
	for lo > 0 && hi > 0 && tried < maxLevels {
		step := lo * tol
		if integer {
			step = math.Max(1, math.Ceil(step))
		}
		if hi-lo <= step {
			break
		}
		mid := round((lo + hi) / 2)
		if mid <= lo || mid >= hi {
			break
		}
		if ok, err = try(mid); err != nil {
			return lo, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

func loadOf(l Level) float64 {
	if l.Concurrency > 0 {
		return float64(l.Concurrency)
	}
	return l.Rate
}

func lowest(ls []Level) int {
	best := 0
	for i, l := range ls {
		if loadOf(l) < loadOf(ls[best]) {
			best = i
		}
	}
	return best
}
