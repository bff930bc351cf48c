package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/store"
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

// VirtualServer is a Server whose levels are measured on a simulator's
// virtual clock instead of over HTTP (sim-virtual): its figures do not
// depend on how busy the machine running the benchmark is.
type VirtualServer interface {
	Server
	// MeasureLevel measures level idx, lw at load v, as
	// trial.LevelMeasurer.Measure does over HTTP.
	MeasureLevel(ctx context.Context, idx int, v float64, lw trial.Workload, sc trial.StabilityConfig, slo trial.SLO) (*trial.MeasuredLevel, error)
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
	BeginRun(ctx context.Context, r *store.Run) (string, error)
	// AddCell appends a finished cell and its encoded raw data.
	AddCell(ctx context.Context, id string, c store.CellResult, raw []byte) error
	// FinishRun records the final state, reason and end time.
	FinishRun(ctx context.Context, id string, st store.RunState, reason string, end time.Time) error
}

// Config configures a benchmark run.
type Config struct {
	Launch         Launcher
	RestartPerCell bool
	// Run holds the labels (model, GPU, engine, flags, tier, labels) the
	// stored record starts from; Run fills in the rest.
	Run            store.Run
	RequestTimeout time.Duration
	// LevelConfig: how levels are measured (capacity: true cells,
	// feedback: true cells). A level failing more of its requests than
	// UnhealthyErrorRate on a server that no longer answers stops the run
	// (partial).
	trial.LevelConfig
	GPU         trial.GPUSource // nil: no NVML telemetry
	SampleEvery time.Duration
	ScrapeEvery time.Duration // 0: no /metrics scraping
	Progress    io.Writer     // n/N, elapsed, ETA as text lines (nil: none)
	// OnProgress receives the same figures before each load level (the
	// service streams them); nil: none.
	OnProgress func(Progress)
	Logger     *slog.Logger
	Now        func() time.Time
}

// DefaultConfig returns the defaults; set Launch.
func DefaultConfig() Config {
	return Config{RequestTimeout: 5 * time.Minute, LevelConfig: trial.DefaultLevelConfig(),
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
func Execute(ctx context.Context, cfg Config, m Matrix, sink Sink) (*store.Run, error) {
	if cfg.Launch == nil {
		return nil, errors.New("bench: no launcher")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.LevelConfig.SetDefaults()
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

func (e *executor) run(ctx context.Context) (*store.Run, error) {
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
	r.V, r.State, r.Start = store.RunVersion, store.RunRunning, cfg.Now().UTC()
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
	finish := func(st store.RunState, reason string) (*store.Run, error) {
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
	return finish(store.RunOK, "")
}

// end finishes a run stopped by err: partial when a stored cell served
// requests, failed when none did (a cell whose every request failed is
// stored with its error, and measured nothing).
func (e *executor) end(finish func(store.RunState, string) (*store.Run, error), r *store.Run, ctx context.Context, err error) (*store.Run, error) {
	st := store.RunFailed
	if slices.ContainsFunc(r.Cells, served) {
		st = store.RunPartial
	}
	reason := err.Error()
	if ctx.Err() != nil {
		reason = "interrupted"
	}
	out, ferr := finish(st, reason)
	return out, errors.Join(err, ferr)
}

// served: some request of the cell succeeded.
func served(c store.CellResult) bool {
	return slices.ContainsFunc(c.Levels, func(l store.LevelResult) bool { return l.Metrics.Completed > 0 })
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

// cell measures one cell's levels with trial's level engine; it returns
// what it measured even when it stopped early.
func (e *executor) cell(ctx context.Context, srv Server, run, model string, c Cell) (store.CellResult, []Request, error) {
	cfg := e.cfg
	w := c.Workload
	res := store.CellResult{Name: c.Name, Workload: w}
	client := trial.NewClient(srv.BaseURL(), model, cfg.RequestTimeout, trial.WithEndpoint(w.Endpoint))
	defer client.Close()
	lm := &trial.LevelMeasurer{
		Client: client, SLO: w.SLO, LevelConfig: cfg.LevelConfig, Exited: srv.Exited(), Logger: cfg.Logger,
		Died: func() error { return fmt.Errorf("%w: the engine exited", ErrServerGone) },
		Judge: func(ctx context.Context, recs []trial.Record, m *trial.Metrics) error {
			if srv.Alive(ctx) {
				return nil
			}
			return fmt.Errorf("%w: %.0f%% of requests failed (%s)", ErrServerGone, 100*m.ErrorRate, strings.TrimSpace(trial.Redact(trial.FirstErr(recs))))
		},
		Telemetry: &trial.LevelTelemetry{GPU: cfg.GPU, SampleEvery: cfg.SampleEvery, ScrapeEvery: cfg.ScrapeEvery},
		OnLevel:   func(_ int, v float64, closed bool) { e.progress(run, c.Name, v, closed) },
	}
	if cfg.ScrapeEvery > 0 {
		lm.MetricsClient, lm.MetricsURL = &http.Client{Timeout: 5 * time.Second}, srv.BaseURL()
	}
	var reqs []Request
	measure := lm.Measure
	if vs, ok := srv.(VirtualServer); ok {
		measure = func(ctx context.Context, idx int, v float64, lw trial.Workload) (*trial.MeasuredLevel, error) {
			lm.OnLevel(idx, v, lw.Arrival.Closed())
			return vs.MeasureLevel(ctx, idx, v, lw, cfg.Stability, w.SLO)
		}
	}
	out, err := trial.MeasureLevels(w, cfg.Capacity(), cfg.Feedback, func(v float64, lw trial.Workload) (*trial.MeasuredLevel, error) {
		l, err := measure(ctx, len(res.Levels), v, lw)
		e.done++
		if l != nil {
			lr, rs := e.levelResult(len(res.Levels), l)
			res.Levels = append(res.Levels, lr)
			reqs = append(reqs, rs...)
		}
		return l, err
	})
	res.Feedback, res.CapacitySearched = out.Feedback, out.Searched
	res.Capacity = out.Capacity
	if !w.Capacity && !w.Feedback {
		res.Capacity = capacityAtSLO(res.Levels, w.SLO)
	}
	return res, reqs, err
}

// levelResult is a measured level as a run stores it: the level with its
// telemetry, error counts and samples, per-GPU figures, and its requests.
func (e *executor) levelResult(idx int, l *trial.MeasuredLevel) (store.LevelResult, []Request) {
	recs := l.Records
	reqs := make([]Request, len(recs))
	samples := map[string]string{}
	for i := range recs {
		reqs[i] = FromRecord(idx, &recs[i])
		if c := reqs[i].Err; c != "" && samples[c] == "" {
			samples[c] = trial.Redact(recs[i].Err)
		}
	}
	m := l.Metrics
	lr := store.LevelResult{Concurrency: l.Concurrency, Rate: l.Rate, Metrics: m, SLOMet: l.SLOMet, Violations: l.Violations,
		Stability: l.Stability, Telemetry: l.Telemetry, WindowThroughput: l.WindowThroughput, ElapsedS: l.ElapsedS}
	if len(samples) > 0 {
		lr.ErrorSample = samples
	}
	lr.Errors, lr.SuccessRate = errorCounts(reqs)
	if n := e.cfg.Run.GPU.Count; n > 0 {
		lr.OutputTokSPerGPU = m.OutputThroughput / float64(n)
	}
	if l.Telemetry.EnergyJ > 0 && m.TotalOutputTokens > 0 {
		lr.JoulesPerToken = l.Telemetry.EnergyJ / float64(m.TotalOutputTokens)
	}
	return lr, reqs
}
