package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/gate"
	"github.com/vllm-tuner/tuner/store"
)

// GateStart starts a fresh server for one benchmark run: a simulator slowed
// by slowdown (1 = calibrated) with its own seed. It returns the server's
// base URL and a stop function.
type GateStart func(ctx context.Context, slowdown float64, seed uint64) (url string, stop func(), err error)

// GateEvalConfig configures MeasureGate.
type GateEvalConfig struct {
	Start GateStart
	// Matrix is the tier benchmarked (the smoke tier).
	Matrix bench.Matrix
	// Pairs per condition (20 in the issue).
	Pairs int
	// Slowdowns of NEW for the power rows (1.05 and 1.27).
	Slowdowns []float64
	Gate      gate.Config
	Progress  io.Writer
	Logger    *slog.Logger
	// Record, when set, is a directory where every run is kept as JSON
	// (base<P>.json, new<P>-x<S>.json) for ReplayGate.
	Record string
}

// GateCondition is one row of the evaluation: NEW slowed by Slowdown
// against BASE at 1 (Slowdown 1: the false-positive row).
type GateCondition struct {
	Slowdown float64 `json:"slowdown"`
	Pairs    int     `json:"pairs"`
	// Flagged counts pairs with any regression; TPOT pairs with a
	// regression of tpot_p50.
	Flagged int `json:"flagged_any"`
	TPOT    int `json:"flagged_tpot_p50"`
	// Inconclusive counts pairs without a regression but with a row whose
	// minimum detectable effect exceeds the threshold (compare's exit 3);
	// Passed the rest: pairs the gate cleared as no regression.
	Inconclusive int `json:"inconclusive"`
	Passed       int `json:"passed"`
	// MDE is each pair's largest minimum detectable effect of tpot_p50.
	TPOTMDE []float64 `json:"tpot_p50_mde"`
	// ByMetric counts the pairs flagged per metric name.
	ByMetric map[string]int `json:"flagged_by_metric"`
	// TPOTEffects are the measured tpot_p50 effects, pair by pair.
	TPOTEffects []float64 `json:"tpot_p50_effects"`
}

// GateEval is MeasureGate's report.
type GateEval struct {
	Matrix     string          `json:"matrix"`
	Alpha      float64         `json:"alpha"`
	Threshold  float64         `json:"threshold"`
	Conditions []GateCondition `json:"conditions"`
	// RunWall is the wall time of each benchmark run (start of the load to
	// the stored run; the server's start excluded), seconds.
	RunWall  []float64 `json:"run_wall_s"`
	Requests []int     `json:"requests"`
}

// memSink keeps one run in memory.
type memSink struct {
	run  store.Run
	raws [][]byte
}

func (m *memSink) BeginRun(_ context.Context, r *store.Run) (string, error) {
	m.run = *r
	m.run.ID = "mem"
	return m.run.ID, nil
}

func (m *memSink) AddCell(_ context.Context, _ string, c store.CellResult, raw []byte) error {
	c.RawKey = fmt.Sprint(len(m.raws))
	m.run.Cells = append(m.run.Cells, c)
	m.raws = append(m.raws, raw)
	return nil
}

func (m *memSink) FinishRun(_ context.Context, _ string, st store.RunState, reason string, end time.Time) error {
	m.run.State, m.run.Reason, m.run.End = st, reason, end
	return nil
}

var _ bench.Sink = (*memSink)(nil)

// benchOnce runs the matrix once against a fresh server.
func benchOnce(ctx context.Context, cfg GateEvalConfig, id string, slowdown float64, seed uint64) (gate.Run, float64, int, error) {
	url, stop, err := cfg.Start(ctx, slowdown, seed)
	if err != nil {
		return gate.Run{}, 0, 0, err
	}
	defer stop()
	launch, err := bench.URLLauncher(url, "", cfg.Logger)
	if err != nil {
		return gate.Run{}, 0, 0, err
	}
	bc := bench.DefaultConfig()
	bc.Launch, bc.Logger, bc.ScrapeEvery = launch, cfg.Logger, 0
	sink := &memSink{}
	t0 := time.Now()
	r, err := bench.Execute(ctx, bc, cfg.Matrix, sink)
	wall := time.Since(t0).Seconds()
	if err != nil {
		return gate.Run{}, wall, 0, err
	}
	if r.State != store.RunOK {
		return gate.Run{}, wall, 0, fmt.Errorf("run %s: %s %s", id, r.State, r.Reason)
	}
	sink.run.ID = id
	n := 0
	for _, c := range sink.run.Cells {
		n += c.Requests
	}
	g, err := bench.GateRun(&sink.run, func(i int) ([]byte, error) { return sink.raws[i], nil }, cfg.Gate.Metrics)
	return g, wall, n, err
}

// MeasureGate measures the gate on real benchmark runs: per pair, a BASE
// run at speed 1 and one NEW run per condition (speed 1 for the
// false-positive rate, each slowdown for power), each against a fresh
// server with its own seed, compared by gate.Compare with cfg.Gate.
func MeasureGate(ctx context.Context, cfg GateEvalConfig) (*GateEval, error) {
	if cfg.Start == nil || cfg.Pairs < 1 {
		return nil, errors.New("eval gate: need a server starter and at least one pair")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	conds := append([]float64{1}, cfg.Slowdowns...)
	rep := &GateEval{Matrix: cfg.Matrix.Name, Alpha: cfg.Gate.Alpha, Threshold: cfg.Gate.Threshold}
	for _, s := range conds {
		rep.Conditions = append(rep.Conditions, GateCondition{Slowdown: s})
	}
	seed := uint64(1000)
	start := time.Now()
	for p := range cfg.Pairs {
		seed++
		base, wall, n, err := benchOnce(ctx, cfg, fmt.Sprintf("base%d", p), 1, seed)
		if err != nil {
			return rep, fmt.Errorf("pair %d base: %w", p, err)
		}
		rep.RunWall, rep.Requests = append(rep.RunWall, wall), append(rep.Requests, n)
		if err := recordRun(cfg.Record, base, p, 0); err != nil {
			return rep, err
		}
		for ci, s := range conds {
			seed++
			next, wall, n, err := benchOnce(ctx, cfg, fmt.Sprintf("new%d-x%g", p, s), s, seed)
			if err != nil {
				return rep, fmt.Errorf("pair %d slowdown %g: %w", p, s, err)
			}
			rep.RunWall, rep.Requests = append(rep.RunWall, wall), append(rep.Requests, n)
			if err := recordRun(cfg.Record, next, p, s); err != nil {
				return rep, err
			}
			if err := rep.Conditions[ci].score(base, next, cfg.Gate); err != nil {
				return rep, fmt.Errorf("pair %d slowdown %g: %w", p, s, err)
			}
		}
		el := time.Since(start)
		fmt.Fprintf(cfg.Progress, "eval gate: pair %d/%d, elapsed %s, eta %s\n", p+1, cfg.Pairs, el.Round(time.Second),
			(el / time.Duration(p+1) * time.Duration(cfg.Pairs-p-1)).Round(time.Second))
	}
	return rep, nil
}

// score compares one pair and counts its verdicts into c.
func (c *GateCondition) score(base, next gate.Run, cfg gate.Config) error {
	cr, err := gate.Compare(base, next, cfg)
	if err != nil {
		return err
	}
	c.Pairs++
	switch {
	case cr.Regressed():
		c.Flagged++
	case cr.Undecided():
		c.Inconclusive++
	default:
		c.Passed++
	}
	for _, row := range cr.Rows {
		if row.Verdict == gate.Regression {
			if c.ByMetric == nil {
				c.ByMetric = map[string]int{}
			}
			c.ByMetric[row.Metric.Name]++
		}
		if row.Metric.Name == "tpot_p50" {
			c.TPOTEffects = append(c.TPOTEffects, row.Effect)
			c.TPOTMDE = append(c.TPOTMDE, row.MDE)
			if row.Verdict == gate.Regression {
				c.TPOT++
			}
		}
	}
	return nil
}

// recordName is the file of a recorded run: the pair's BASE for slowdown
// 0, else NEW at that slowdown.
func recordName(dir string, pair int, slowdown float64) string {
	if slowdown == 0 {
		return filepath.Join(dir, fmt.Sprintf("base%d.json", pair))
	}
	return filepath.Join(dir, fmt.Sprintf("new%d-x%s.json", pair, strconv.FormatFloat(slowdown, 'g', -1, 64)))
}

func recordRun(dir string, r gate.Run, pair int, slowdown float64) error {
	if dir == "" {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("eval gate: record: %w", err)
	}
	return os.WriteFile(recordName(dir, pair, slowdown), b, 0o644)
}

// ReplayGate scores the gate of cfg on runs kept by MeasureGate's Record:
// the same pairs and conditions without benchmarking again, to compare
// decision rules on one set of runs.
func ReplayGate(dir string, pairs int, slowdowns []float64, cfg gate.Config) (*GateEval, error) {
	conds := append([]float64{1}, slowdowns...)
	rep := &GateEval{Matrix: "recorded " + dir, Alpha: cfg.Alpha, Threshold: cfg.Threshold}
	for _, s := range conds {
		rep.Conditions = append(rep.Conditions, GateCondition{Slowdown: s})
	}
	load := func(name string) (gate.Run, error) {
		var r gate.Run
		b, err := os.ReadFile(name)
		if err != nil {
			return r, fmt.Errorf("eval gate replay: %w", err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			return r, fmt.Errorf("eval gate replay: %s: %w", name, err)
		}
		return r, nil
	}
	for p := range pairs {
		base, err := load(recordName(dir, p, 0))
		if err != nil {
			return nil, err
		}
		for ci, s := range conds {
			next, err := load(recordName(dir, p, s))
			if err != nil {
				return nil, err
			}
			if err := rep.Conditions[ci].score(base, next, cfg); err != nil {
				return nil, fmt.Errorf("pair %d slowdown %g: %w", p, s, err)
			}
		}
	}
	return rep, nil
}

// WriteGateEval writes the report as Markdown.
func WriteGateEval(w io.Writer, r *GateEval) error {
	fmt.Fprintf(w, "Gate on the %s tier: alpha %g (Holm), threshold %g%%. Per pair the gate flags a regression, is inconclusive "+
		"(no regression, but some metric's minimum detectable effect above the threshold: exit 3) or passes. "+
		"Same speed: flagged = false positives; slower: flagged = power.\n\n", r.Matrix, r.Alpha, 100*r.Threshold)
	fmt.Fprintln(w, "| NEW slowdown | pairs | flagged (any) | rate | inconclusive | passed | flagged (tpot_p50) | tpot_p50 effect min / median / max | tpot_p50 MDE median | flagged by metric |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, c := range r.Conditions {
		span, mde := "-", "-"
		if e := slices.Sorted(slices.Values(c.TPOTEffects)); len(e) > 0 {
			span = fmt.Sprintf("%+.1f%% / %+.1f%% / %+.1f%%", 100*e[0], 100*e[len(e)/2], 100*e[len(e)-1])
		}
		if m := slices.Sorted(slices.Values(c.TPOTMDE)); len(m) > 0 {
			mde = fmt.Sprintf("%.1f%%", 100*m[len(m)/2])
		}
		var by []string
		for _, k := range slices.Sorted(maps.Keys(c.ByMetric)) {
			by = append(by, fmt.Sprintf("%s %d", k, c.ByMetric[k]))
		}
		rate := "-"
		if c.Pairs > 0 {
			rate = fmt.Sprintf("%.2f", float64(c.Flagged)/float64(c.Pairs))
		}
		fmt.Fprintf(w, "| %g | %d | %d | %s | %d | %d | %d | %s | %s | %s |\n", c.Slowdown, c.Pairs, c.Flagged, rate, c.Inconclusive, c.Passed,
			c.TPOT, span, mde, strings.Join(by, ", "))
	}
	wall := slices.Sorted(slices.Values(r.RunWall))
	req := make([]float64, len(r.Requests))
	for i, n := range r.Requests {
		req[i] = float64(n)
	}
	req = slices.Sorted(slices.Values(req))
	if len(wall) > 0 {
		_, err := fmt.Fprintf(w, "\nOne run's wall time: median %.1f s (min %.1f, max %.1f) over %d runs; requests per run median %.0f (min %.0f).\n",
			wall[len(wall)/2], wall[0], wall[len(wall)-1], len(wall), req[len(req)/2], req[0])
		return err
	}
	return nil
}
