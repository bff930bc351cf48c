package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/trial"
)

// Server is a serving endpoint under test.
type Server interface {
	BaseURL() string
	// Exited is closed when a server this run started has died (nil for a
	// server it did not start).
	Exited() <-chan struct{}
	// Alive checks the server answers (after a level failed en masse).
	Alive(ctx context.Context) bool
	// Stop stops a server this run started (no-op otherwise).
	Stop() error
}

// ServerInfo is what a launcher learnt about the server.
type ServerInfo struct {
	Model         string
	EngineVersion string
	Flags         []string // the engine's command line, when started here
}

// Launcher starts (or connects to) the server; a run calls it once, or
// once per cell with RestartPerCell.
type Launcher func(ctx context.Context) (Server, ServerInfo, error)

// Sink stores a run as it goes, so a run that dies keeps its finished cells.
type Sink interface {
	// BeginRun stores r (state running) and returns its ID.
	BeginRun(ctx context.Context, r *Run) (string, error)
	// AddCell appends a finished cell and its encoded raw data.
	AddCell(ctx context.Context, id string, c CellResult, raw []byte) error
	// FinishRun records the final state, reason and end time.
	FinishRun(ctx context.Context, id string, st State, reason string, end time.Time) error
}

// Config configures a benchmark run.
type Config struct {
	Launch         Launcher
	RestartPerCell bool
	// Run holds the labels (model, GPU, engine, flags, tier, labels) the
	// stored record starts from; Run fills in the rest.
	Run            Run
	RequestTimeout time.Duration
	Stability      trial.StabilityConfig
	// MaxRequests caps a duration-bound closed-loop level.
	MaxRequests int
	// Capacity mode (capacity: true cells): bracketing cap, level budget
	// and relative resolution, as trial.SearchCapacity takes them.
	MaxConcurrency    int
	MaxRate           float64
	CapacityLevels    int
	CapacityTolerance float64
	// Feedback tunes feedback mode (feedback: true cells; zero: defaults).
	Feedback trial.FeedbackConfig
	// UnhealthyErrorRate: a level failing more of its requests than this
	// on a server that no longer answers stops the run (partial).
	UnhealthyErrorRate float64
	GPU                trial.GPUSource // nil: no NVML telemetry
	SampleEvery        time.Duration
	ScrapeEvery        time.Duration // 0: no /metrics scraping
	Progress           io.Writer     // n/N, elapsed, ETA as text lines (nil: none)
	// OnProgress receives the same figures before each load level (the
	// service streams them); nil: none.
	OnProgress func(Progress)
	Logger     *slog.Logger
	Now        func() time.Time
}

// DefaultConfig returns the defaults; set Launch.
func DefaultConfig() Config {
	return Config{RequestTimeout: 5 * time.Minute, Stability: trial.DefaultStabilityConfig(), MaxRequests: 20000,
		MaxConcurrency: 1024, MaxRate: 10000, CapacityLevels: 8, CapacityTolerance: 0.1, UnhealthyErrorRate: 0.5,
		SampleEvery: 100 * time.Millisecond, ScrapeEvery: time.Second}
}

// ErrServerGone reports a server that died or stopped answering mid-run.
var ErrServerGone = errors.New("server stopped answering")

// Execute runs every cell of m and stores the run through sink. The run is
// stored (state running) once the first server is up; each finished cell is
// added at once. Cancellation or a server that dies ends the run partial
// with its finished cells; a launch failure before anything was stored is
// returned as an error with no run stored. The returned run is what was
// stored (also on error when one was).
func Execute(ctx context.Context, cfg Config, m Matrix, sink Sink) (*Run, error) {
	d := DefaultConfig()
	if cfg.Launch == nil {
		return nil, errors.New("bench: no launcher")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxRequests <= 0 {
		cfg.MaxRequests = d.MaxRequests
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = d.MaxConcurrency
	}
	if cfg.CapacityLevels <= 0 {
		cfg.CapacityLevels = d.CapacityLevels
	}
	if cfg.MaxRate <= 0 {
		cfg.MaxRate = d.MaxRate
	}
	if cfg.CapacityTolerance <= 0 {
		cfg.CapacityTolerance = d.CapacityTolerance
	}
	if cfg.UnhealthyErrorRate <= 0 {
		cfg.UnhealthyErrorRate = d.UnhealthyErrorRate
	}
	if cfg.Stability == (trial.StabilityConfig{}) {
		cfg.Stability = d.Stability
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e := &executor{cfg: cfg, m: m, sink: sink, t0: time.Now()}
	for _, c := range m.Cells {
		e.total += plannedLevels(c.Workload, cfg.CapacityLevels, cfg.Feedback)
	}
	return e.run(ctx)
}

func plannedLevels(w trial.Workload, capLevels int, fb trial.FeedbackConfig) int {
	switch {
	case w.Feedback:
		if fb.Windows > 0 {
			return fb.Windows
		}
		return trial.DefaultFeedbackConfig().Windows
	case w.Capacity:
		return capLevels
	case len(w.Levels) > 0:
		return len(w.Levels)
	}
	return 1
}

type executor struct {
	cfg   Config
	m     Matrix
	sink  Sink
	t0    time.Time
	total int
	done  int
}

func (e *executor) run(ctx context.Context) (*Run, error) {
	cfg := e.cfg
	srv, info, err := cfg.Launch(ctx)
	if err != nil {
		return nil, err
	}
	stop := func() {
		if srv != nil {
			if serr := srv.Stop(); serr != nil {
				cfg.Logger.Warn("stop server", "error", serr)
			}
			srv = nil
		}
	}
	defer stop()
	r := cfg.Run
	r.V, r.State, r.Start = RunVersion, StateRunning, cfg.Now().UTC()
	if r.Source == "" {
		r.Source = "run"
	}
	if info.Model != "" {
		r.Model = info.Model
	}
	if info.EngineVersion != "" {
		r.EngineVersion = info.EngineVersion
	}
	if len(info.Flags) > 0 {
		r.Flags = info.Flags
	}
	r.Matrix, r.MatrixHash = e.m.Name, e.m.Hash
	r.Cells = nil
	if r.ID, err = e.sink.BeginRun(ctx, &r); err != nil {
		return nil, fmt.Errorf("store run: %w", err)
	}
	finish := func(st State, reason string) (*Run, error) {
		r.State, r.Reason, r.End = st, reason, cfg.Now().UTC()
		// The final state is written even when ctx was cancelled.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := e.sink.FinishRun(fctx, r.ID, st, reason, r.End); err != nil {
			return &r, fmt.Errorf("store run %s: %w", r.ID, err)
		}
		return &r, nil
	}
	for ci, cell := range e.m.Cells {
		if ci > 0 && cfg.RestartPerCell {
			stop()
			if srv, _, err = cfg.Launch(ctx); err != nil {
				return e.end(finish, &r, ctx, fmt.Errorf("restart for cell %s: %w", cell.Name, err))
			}
		}
		res, reqs, cerr := e.cell(ctx, srv, r.ID, info.Model, cell)
		if len(res.Levels) > 0 && (cerr == nil || !errors.Is(cerr, context.Canceled)) {
			raw, err := EncodeRaw(reqs)
			if err != nil {
				return e.end(finish, &r, ctx, err)
			}
			res.RawBytes, res.Requests = len(raw), len(reqs)
			if cerr != nil {
				res.Error = cerr.Error()
			}
			if err := e.sink.AddCell(context.WithoutCancel(ctx), r.ID, res, raw); err != nil {
				return e.end(finish, &r, ctx, fmt.Errorf("store cell %s: %w", cell.Name, err))
			}
			r.Cells = append(r.Cells, res)
		}
		if cerr != nil {
			return e.end(finish, &r, ctx, fmt.Errorf("cell %s: %w", cell.Name, cerr))
		}
	}
	return finish(StateOK, "")
}

// end finishes a run stopped by err: partial with cells, failed without.
func (e *executor) end(finish func(State, string) (*Run, error), r *Run, ctx context.Context, err error) (*Run, error) {
	st := StatePartial
	if len(r.Cells) == 0 {
		st = StateFailed
	}
	reason := err.Error()
	if ctx.Err() != nil {
		reason = "interrupted"
	}
	out, ferr := finish(st, reason)
	return out, errors.Join(err, ferr)
}

// Progress is where a run stands as a load level starts: level Done+1 of
// Total, the cell and load, the time since the run started and the
// estimated time left (ETA < 0: unknown yet).
type Progress struct {
	Run     string
	Done    int
	Total   int
	Cell    string
	Load    float64
	Closed  bool // Load is a concurrency (else a rate in req/s)
	Elapsed time.Duration
	ETA     time.Duration
}

// LoadString is the load with its unit: "16 concurrent", "2.5 req/s".
func (p Progress) LoadString() string {
	if p.Closed {
		return fmt.Sprintf("%g concurrent", p.Load)
	}
	return fmt.Sprintf("%g req/s", p.Load)
}

// Line is the progress line `tuner bench run` prints.
func (p Progress) Line() string {
	eta := "?"
	if p.ETA >= 0 {
		eta = p.ETA.Round(time.Second).String()
	}
	return fmt.Sprintf("bench %d/%d  cell %s  load %s  elapsed %s  eta %s", p.Done+1, p.Total, p.Cell, p.LoadString(), p.Elapsed.Round(time.Second), eta)
}

func (e *executor) progress(run, cell string, load float64, closed bool) {
	if e.cfg.Progress == nil && e.cfg.OnProgress == nil {
		return
	}
	el := time.Since(e.t0)
	p := Progress{Run: run, Done: e.done, Total: e.total, Cell: cell, Load: load, Closed: closed, Elapsed: el, ETA: -1}
	if e.done > 0 {
		p.ETA = time.Duration(float64(el) / float64(e.done) * float64(max(0, e.total-e.done)))
	}
	if e.cfg.Progress != nil {
		fmt.Fprintln(e.cfg.Progress, p.Line())
	}
	if e.cfg.OnProgress != nil {
		e.cfg.OnProgress(p)
	}
}

// cell measures one cell's levels; it returns what it measured even when
// it stopped early.
func (e *executor) cell(ctx context.Context, srv Server, run, model string, c Cell) (CellResult, []Request, error) {
	res := CellResult{Name: c.Name, Workload: c.Workload}
	client := trial.NewClient(srv.BaseURL(), model, e.cfg.RequestTimeout)
	defer client.Close()
	var reqs []Request
	w := c.Workload
	measure := func(v float64) (bool, error) {
		li := len(res.Levels)
		e.progress(run, c.Name, v, w.Arrival.Closed())
		l, rs, err := e.level(ctx, srv, client, w, li, v)
		e.done++
		if err != nil {
			return false, err
		}
		res.Levels = append(res.Levels, l)
		reqs = append(reqs, rs...)
		return l.SLOMet, nil
	}
	var err error
	switch {
	case w.Feedback:
		var fb trial.Feedback
		fb, err = trial.HoldSLO(w, e.cfg.Feedback, func(v float64, _ trial.Workload) (*trial.Metrics, bool, float64, error) {
			met, err := measure(v)
			if err != nil {
				return nil, false, 0, err
			}
			l := &res.Levels[len(res.Levels)-1]
			return &l.Metrics, met, l.ElapsedS, nil
		})
		res.Feedback, res.Capacity = &fb, fb.Sustained
	case w.Capacity:
		res.CapacitySearched = true
		closed := w.Arrival.Closed()
		ceil := e.cfg.MaxRate
		start := w.Arrival.Rate
		if closed {
			ceil, start = float64(e.cfg.MaxConcurrency), float64(w.Arrival.Concurrency)
		}
		if len(w.Levels) > 0 {
			start = w.Levels[0]
		}
		res.Capacity, err = trial.SearchCapacity(start, ceil, closed, e.cfg.CapacityLevels, e.cfg.CapacityTolerance, measure)
	default:
		for _, v := range loadValues(w) {
			if _, err = measure(v); err != nil {
				break
			}
		}
		res.Capacity = capacityAtSLO(res.Levels, w.SLO)
	}
	return res, reqs, err
}

func loadValues(w trial.Workload) []float64 {
	if len(w.Levels) > 0 {
		return w.Levels
	}
	if w.Arrival.Closed() {
		return []float64{float64(w.Arrival.Concurrency)}
	}
	return []float64{w.Arrival.Rate}
}

// atLoad is w at one load level (closed: concurrency, open: rate).
func atLoad(w trial.Workload, v float64) trial.Workload {
	lw := w
	lw.Levels = nil
	if w.Arrival.Closed() {
		lw.Arrival.Concurrency = max(1, int(math.Round(v)))
	} else {
		lw.Arrival.Rate = v
	}
	return lw
}

// level drives one load level with trial's client, cuts the warm-up and
// judges the steady state with trial.Analyze, and summarises.
func (e *executor) level(ctx context.Context, srv Server, client *trial.Client, w trial.Workload, idx int, v float64) (LevelResult, []Request, error) {
	cfg := e.cfg
	lw := atLoad(w, v)
	closed := lw.Arrival.Closed()
	durationBound := lw.NumRequests <= 0
	if durationBound {
		if closed {
			lw.NumRequests = cfg.MaxRequests
		} else {
			lw.NumRequests = max(1, int(math.Ceil(lw.Arrival.Rate*lw.Duration.Seconds())))
		}
	}
	specs := lw.Requests()
	start := time.Now()
	var gate trial.Gate
	if durationBound {
		gate = func(next int, _ []trial.Record) bool { return next < lw.Warmup || time.Since(start) < lw.Duration }
	}
	lctx, cancel := context.WithCancel(ctx)
	died := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-srv.Exited():
			close(died)
			cancel()
		case <-lctx.Done():
		}
	}()
	var hc *http.Client
	scrape := ""
	if cfg.ScrapeEvery > 0 {
		hc, scrape = &http.Client{Timeout: 5 * time.Second}, srv.BaseURL()
	}
	tel := trial.RecordTelemetry(lctx, cfg.GPU, cfg.SampleEvery, hc, scrape, cfg.ScrapeEvery)
	var probe *trial.LatencyProbe
	if scrape != "" {
		probe = trial.StartLatencyProbe(ctx, hc, scrape)
	}
	recs := client.Drive(lctx, specs, trial.Load{Concurrency: lw.Arrival.Concurrency, Rate: lw.Arrival.Rate, Salt: idx}, gate)
	telemetry, _, _, throttled := tel.Stop()
	cancel()
	<-watchDone
	select {
	case <-died:
		return LevelResult{}, nil, fmt.Errorf("%w: the engine exited", ErrServerGone)
	default:
	}
	if err := ctx.Err(); err != nil {
		return LevelResult{}, nil, err
	}
	a := trial.Analyze(recs, cfg.Stability)
	cut := make(map[int]bool, len(a.CutIndex))
	for _, i := range a.CutIndex {
		cut[i] = true
	}
	reqs := make([]Request, len(recs))
	samples := map[string]string{}
	for i := range recs {
		if cut[recs[i].Index] {
			recs[i].Warmup = true
		}
		reqs[i] = FromRecord(idx, &recs[i])
		if c := reqs[i].Err; c != "" && samples[c] == "" {
			samples[c] = trial.Redact(recs[i].Err)
		}
	}
	// The level's metrics are the trial's, from the live records (every
	// chunk: vLLM bench's pooled ITL, the steady throughput window); the
	// raw data reproduces the latency figures to the microsecond.
	m := trial.Summarize(recs, w.SLO)
	st := a.Stability
	if !closed {
		// An open loop above capacity queues for the whole level: its
		// latencies depend on the level's length, and it meets no SLO.
		trial.MarkOverload(recs, &m)
		st.NoteOverload(&m)
	}
	if probe != nil {
		b, err := probe.Finish(ctx, recs)
		if err != nil {
			cfg.Logger.Debug("no latency breakdown", "error", err)
		}
		m.Breakdown = b
		m.PrefixCache = probe.PrefixCache()
	}
	met, viol := w.SLO.Check(&m)
	l := LevelResult{Metrics: m, SLOMet: met, Violations: viol, Stability: st, Telemetry: telemetry,
		WindowThroughput: a.WindowThroughput, ElapsedS: time.Since(start).Seconds()}
	if throttled {
		l.Stability.Throttled, l.Stability.Stable = true, false
	}
	if len(samples) > 0 {
		l.ErrorSample = samples
	}
	l.Errors, l.SuccessRate = errorCounts(reqs)
	if closed {
		l.Concurrency = lw.Arrival.Concurrency
	} else {
		l.Rate = lw.Arrival.Rate
	}
	if n := cfg.Run.GPU.Count; n > 0 {
		l.OutputTokSPerGPU = m.OutputThroughput / float64(n)
	}
	if telemetry.EnergyJ > 0 && m.TotalOutputTokens > 0 {
		l.JoulesPerToken = telemetry.EnergyJ / float64(m.TotalOutputTokens)
	}
	cfg.Logger.Info("level measured", "load", v, "requests", len(recs), "completed", m.Completed, "failed", m.Failed,
		"out_tok_s", math.Round(m.OutputThroughput), "slo_met", met, "stable", l.Stability.Stable)
	if m.Completed+m.Failed > 0 && m.ErrorRate > cfg.UnhealthyErrorRate && !srv.Alive(ctx) {
		first := ""
		for _, s := range samples {
			first = s
			break
		}
		return l, reqs, fmt.Errorf("%w: %.0f%% of requests failed (%s)", ErrServerGone, 100*m.ErrorRate, strings.TrimSpace(first))
	}
	return l, reqs, nil
}
