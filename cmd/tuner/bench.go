package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

func init() { register(withGateCommands(benchCommand())) }

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "benchmark one serving setup over a scenario matrix; keep and read the runs",
		Subcommands: []*cli.Command{{
			Name:      "run",
			Usage:     "benchmark a config (started here) or a running server (--url) over a matrix",
			ArgsUsage: " ",
			Description: "With --config the engine (--engine vllm or sim) is started once, through the same path as a\n" +
				"trial (health wait, telemetry, process-group kill), and every cell of --matrix runs against it;\n" +
				"with --url a running OpenAI-compatible server is benchmarked and nothing is started. The run is\n" +
				"stored as it goes: a run stopped by Ctrl-C or a dying server keeps its finished cells (partial).",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "matrix", Usage: "scenario matrix YAML (e.g. examples/matrix-smoke.yaml; default: the --tier preset's)"},
				&cli.StringFlag{Name: "config", Usage: "vLLM config to start: a --config YAML file, a trial ID or a config ID of the database"},
				&cli.StringFlag{Name: "engine", Value: engineVLLM, Usage: "vllm or sim (with --config)"},
				&cli.StringFlag{Name: "url", Usage: "benchmark the running server at http://HOST:PORT (starts nothing)"},
				&cli.StringFlag{Name: "model", Usage: "model (default: the trial's, or data[0].id of /v1/models)"},
				&cli.StringFlag{Name: "gpu", Usage: "GPU name (label; the simulator's GPU with --engine sim)"},
				&cli.IntFlag{Name: "gpus", Value: 1, Usage: "GPU count (label; per-GPU figures)"},
				&cli.StringSliceFlag{Name: "label", Usage: "free-form label k=v (repeatable), e.g. git=abc123"},
				&cli.StringFlag{Name: "tier", Usage: "tier of the run: smoke, nightly or release (a preset matrix unless --matrix; stored, matched by compare --baseline-tier)"},
				&cli.StringFlag{Name: "models", Usage: "--tier release: file of models, one a line (one run each)"},
				&cli.BoolFlag{Name: "restart-per-cell", Usage: "restart the engine before every cell"},
				&cli.StringFlag{Name: "telemetry", Value: "auto", Usage: "auto (NVML when available, plus /metrics), nvml, engine (/metrics only) or none"},
				&cli.DurationFlag{Name: "request-timeout", Value: 5 * time.Minute, Usage: "one request's limit (a timeout is a failed request)"},
				&cli.DurationFlag{Name: "startup-timeout", Value: 15 * time.Minute, Usage: "engine start to /health 200"},
				&cli.StringSliceFlag{Name: "engine-arg", Usage: "extra engine argument (repeatable)"},
				&cli.StringFlag{Name: "vllm", Value: "vllm", Usage: "vllm executable (--engine vllm)"},
				&cli.StringFlag{Name: "vllm-sim", Usage: "vllm-sim executable (--engine sim; default: next to tuner, then on PATH)"},
				&cli.StringFlag{Name: "log-dir", Usage: "engine logs (default: beside the database)"},
			},
			Action: benchRunTier,
		}, {
			Name:  "list",
			Usage: "list stored benchmark runs",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "model", Usage: "only runs of this model"},
				&cli.StringFlag{Name: "tier", Usage: "only runs of this tier"},
				&cli.StringSliceFlag{Name: "label", Usage: "only runs with label k=v (or k: any value)"},
				&cli.BoolFlag{Name: "json", Usage: "JSON"},
			},
			Action: benchList,
		}, {
			Name:      "show",
			Usage:     "a run's report: per cell throughput, latency percentiles, prompt-length buckets, capacity at SLO",
			ArgsUsage: "RUN",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "json", Usage: "the stored record as JSON"},
				&cli.BoolFlag{Name: "md", Usage: "Markdown (a CI comment)"},
			},
			Action: benchShow,
		}, {
			Name:      "export",
			Usage:     "a run's raw per-request data",
			ArgsUsage: "RUN",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "csv", Usage: "CSV (the only format)", Value: true},
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "file to write (default stdout)"},
			},
			Action: benchExport,
		}, {
			Name:      "plot",
			Usage:     "a run's QPS-vs-latency curves, latency breakdowns or feedback traces (SVG, PNG or HTML by the file's extension)",
			ArgsUsage: "RUN",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "kind", Value: "curve", Usage: "curve (QPS vs --metric), breakdown (stacked queue/prefill/decode/client per level) or feedback (the feedback controller's load and tail over time)"},
				&cli.StringFlag{Name: "metric", Value: "e2el_p50", Usage: "latency: <ttft|tpot|itl|e2el>_<mean|p50|p90|p95|p99>"},
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "file to write (.svg, .png or .html)", Required: true},
			},
			Action: benchPlot,
		}, {
			Name:      "import",
			Usage:     "store a `vllm bench serve --save-result [--save-detailed]` JSON as a run",
			ArgsUsage: "FILE",
			Flags: []cli.Flag{
				&cli.StringSliceFlag{Name: "label", Usage: "label k=v (repeatable)"},
				&cli.StringFlag{Name: "tier", Usage: "tier label"},
				&cli.StringFlag{Name: "gpu", Usage: "GPU name (label)"},
				&cli.IntFlag{Name: "gpus", Value: 1, Usage: "GPU count (label)"},
				&cli.StringSliceFlag{Name: "metadata-key", Usage: "a top-level key `vllm bench serve --metadata` added (kept as a label; repeatable)"},
			},
			Action: benchImport,
		}},
	}
}

func parseLabels(kvs []string, allowBare bool) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" || (!ok && !allowBare) {
			return nil, usagef("--label %q: want KEY=VALUE", kv)
		}
		out[k] = v
	}
	return out, nil
}

var trialIDRe = regexp.MustCompile(`^[0-9a-f]{12}-[0-9]+$`)

// benchConfig resolves --config: a YAML file, a trial ID, or a config ID
// (prefix) of a stored trial. It returns the engine flags and the model the
// trial ran (if any).
func benchConfig(c *cli.Context, arg string) (flags []string, cfg *spaces.Config, model string, err error) {
	if _, serr := os.Stat(arg); serr == nil {
		flags, err = bench.ConfigFileFlags(arg)
		return flags, nil, "", asUsage(err)
	}
	st, err := openReader(c)
	if err != nil {
		return nil, nil, "", usagef("--config %s: not a file, and no database to look it up: %v", arg, err)
	}
	defer st.Close()
	var tr *store.Trial
	if trialIDRe.MatchString(arg) {
		t, err := st.Trial(c.Context, arg)
		if err != nil {
			return nil, nil, "", usagef("--config %s: %v", arg, err)
		}
		tr = &t
	} else {
		studies, err := st.Studies(c.Context)
		if err != nil {
			return nil, nil, "", err
		}
		for _, s := range studies {
			ts, err := st.Trials(c.Context, s.ID, store.TrialFilter{})
			if err != nil {
				return nil, nil, "", err
			}
			for i := range ts {
				if ts[i].Result != nil && arg != "" && strings.HasPrefix(ts[i].Result.ConfigID, arg) {
					tr = &ts[i]
				}
			}
		}
		if tr == nil {
			return nil, nil, "", usagef("--config %s: not a file, a trial ID or a stored config ID", arg)
		}
	}
	if tr.Result == nil {
		return nil, nil, "", usagef("--config %s: trial has no config", arg)
	}
	study, err := st.Study(c.Context, tr.StudyID)
	if err == nil {
		model = study.Key.Model
	}
	cf := tr.Result.Config
	return cf.Flags(), &cf, model, nil
}

func benchRun(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("bench run takes no arguments, got %q", c.Args().First())
	}
	m, err := tierMatrix(c)
	if err != nil {
		return err
	}
	labels, err := parseLabels(c.StringSlice("label"), false)
	if err != nil {
		return err
	}
	lvl := slog.LevelWarn
	if c.Bool("verbose") {
		lvl = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: lvl}))
	dbPath, err := studyDBPath(c)
	if err != nil {
		return err
	}
	cfg := bench.DefaultConfig()
	cfg.Logger, cfg.Progress, cfg.RestartPerCell = log, c.App.ErrWriter, c.Bool("restart-per-cell")
	cfg.RequestTimeout = c.Duration("request-timeout")
	cfg.Run = bench.Run{Tier: c.String("tier"), Labels: labels, Model: c.String("model"),
		GPU: trial.GPUIdentity{Name: c.String("gpu"), Count: c.Int("gpus")}}
	switch tel := c.String("telemetry"); tel {
	case "none":
		cfg.ScrapeEvery = 0
	case "engine":
	case "auto", "nvml":
		if src, err := trial.OpenNVML(); err == nil {
			defer src.Close()
			cfg.GPU = src
			if id, err := src.Identity(); err == nil && c.String("url") == "" {
				cfg.Run.GPU = id
			}
		} else if tel == "nvml" {
			return fmt.Errorf("--telemetry nvml: %w", err)
		}
	default:
		return usagef("--telemetry %q: want auto, nvml, engine or none", tel)
	}
	url, conf := c.String("url"), c.String("config")
	switch {
	case url != "" && conf != "":
		return usagef("--url and --config exclude each other (benchmark a running server, or start one)")
	case url != "":
		if c.IsSet("engine") || c.Bool("restart-per-cell") {
			return usagef("--url starts nothing: --engine and --restart-per-cell do not apply")
		}
		if cfg.Launch, err = bench.URLLauncher(url, c.String("model"), log); err != nil {
			return asUsage(err)
		}
		cfg.Run.Engine, cfg.Run.URL = "url", url
	case conf != "":
		flags, sc, model, err := benchConfig(c, conf)
		if err != nil {
			return err
		}
		if cfg.Run.Model == "" {
			cfg.Run.Model = model
		}
		if cfg.Run.Model == "" {
			return usagef("--config %s: give --model (the config does not name one)", conf)
		}
		cfg.Run.Config = sc
		extra, err := checkEngineArgs(c.StringSlice("engine-arg"))
		if err != nil {
			return err
		}
		var command []string
		switch eng := c.String("engine"); eng {
		case engineSim:
			path, err := findVLLMSim(c.String("vllm-sim"))
			if err != nil {
				return err
			}
			if cfg.Run.GPU.Name == "" {
				return usagef("--engine sim needs --gpu (the simulated GPU)")
			}
			command = []string{path, "serve", cfg.Run.Model, "--gpu", cfg.Run.GPU.Name, "--gpu-count", fmt.Sprint(cfg.Run.GPU.Count)}
		case engineVLLM:
			if _, err := execLookPath(c.String("vllm")); err != nil {
				return usagef("--engine vllm: %s not found (install vLLM, pass --vllm PATH, or use --engine sim): %v", c.String("vllm"), err)
			}
			command = []string{c.String("vllm"), "serve", cfg.Run.Model}
		default:
			return usagef("--engine %q: want vllm or sim", eng)
		}
		cfg.Run.Engine = c.String("engine")
		logDir := c.String("log-dir")
		if logDir == "" {
			logDir = filepath.Join(filepath.Dir(dbPath), "logs", "bench")
		}
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return err
		}
		cfg.Launch = bench.EngineLauncher(trial.EngineConfig{Command: command, Flags: append(flags, extra...),
			Host: "127.0.0.1", StopGrace: 10 * time.Second, Logger: log}, c.Duration("startup-timeout"), logDir)
	default:
		return usagef("bench run needs --config (start an engine) or --url (a running server)")
	}
	st, err := store.Open(c.Context, dbPath, store.Options{Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	run, err := bench.Execute(c.Context, cfg, m, st)
	if run != nil {
		fmt.Fprintf(c.App.ErrWriter, "run %s stored: %s, %d of %d cells\n", run.ID, run.State, len(run.Cells), len(m.Cells))
		if len(run.Cells) > 0 {
			run.Write(c.App.Writer, "text")
		}
	}
	return err
}

func oneRunArg(c *cli.Context, cmd string) (string, error) {
	if c.NArg() != 1 {
		return "", usagef("bench %s takes one run ID (r<N> or latest), after the flags", cmd)
	}
	return c.Args().First(), nil
}

// openRun opens the database read-only and reads run id (a missing run is
// a usage error); the caller closes the store.
func openRun(c *cli.Context, id string) (*store.Store, bench.Run, error) {
	st, err := openReader(c)
	if err != nil {
		return nil, bench.Run{}, err
	}
	r, err := st.Run(c.Context, id)
	if err != nil {
		st.Close()
		if errors.Is(err, store.ErrNotFound) {
			err = usagef("%v", err)
		}
		return nil, r, err
	}
	return st, r, nil
}

func benchList(c *cli.Context) error {
	if c.NArg() > 0 {
		return usagef("bench list takes no arguments")
	}
	labels, err := parseLabels(c.StringSlice("label"), true)
	if err != nil {
		return err
	}
	st, err := openReader(c)
	if err != nil {
		return err
	}
	defer st.Close()
	runs, err := st.Runs(c.Context, store.RunFilter{Model: c.String("model"), Tier: c.String("tier"), Labels: labels})
	if err != nil {
		return err
	}
	if c.Bool("json") {
		return writeJSON(c.App.Writer, runs)
	}
	bench.ListTable(c.App.Writer, runs)
	return nil
}

func benchShow(c *cli.Context) error {
	id, err := oneRunArg(c, "show")
	if err != nil {
		return err
	}
	if c.Bool("json") && c.Bool("md") {
		return usagef("--json and --md exclude each other")
	}
	st, r, err := openRun(c, id)
	if err != nil {
		return err
	}
	defer st.Close()
	switch {
	case c.Bool("json"):
		return writeJSON(c.App.Writer, r)
	case c.Bool("md"):
		return r.Write(c.App.Writer, "md")
	}
	return r.Write(c.App.Writer, "text")
}

func benchExport(c *cli.Context) (err error) {
	id, err := oneRunArg(c, "export")
	if err != nil {
		return err
	}
	if !c.Bool("csv") {
		return usagef("bench export writes CSV only (--csv)")
	}
	st, r, err := openRun(c, id)
	if err != nil {
		return err
	}
	defer st.Close()
	w := c.App.Writer
	if p := c.String("output"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		defer func() {
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}()
		w = f
	}
	cw := bench.NewCSVWriter(w)
	for i := range r.Cells {
		cell := &r.Cells[i]
		if cell.RawKey == "" {
			continue // imported summary without per-request data
		}
		raw, err := st.RunRaw(c.Context, r.ID, i)
		if err != nil {
			return err
		}
		reqs, err := bench.DecodeRaw(raw)
		if err != nil {
			return fmt.Errorf("run %s cell %s: %w", r.ID, cell.Name, err)
		}
		if err := cw.Write(r.ID, cell, reqs); err != nil {
			return err
		}
	}
	return cw.Flush()
}

func benchPlot(c *cli.Context) error {
	id, err := oneRunArg(c, "plot")
	if err != nil {
		return err
	}
	kind := c.String("kind")
	metric := c.String("metric")
	var probe trial.Metrics
	switch kind {
	case "curve":
		if _, ok := probe.Value(metric); !ok || !strings.Contains(metric, "_") {
			return usagef("--metric %q: want <ttft|tpot|itl|e2el>_<mean|p50|p90|p95|p99|max>", metric)
		}
	case "breakdown", "feedback":
	default:
		return usagef("--kind %q: want curve, breakdown or feedback", kind)
	}
	out := c.String("output")
	if err := plotExt(out); err != nil {
		return err
	}
	st, r, err := openRun(c, id)
	if err != nil {
		return err
	}
	defer st.Close()
	title := fmt.Sprintf("run %s: %s on %s", r.ID, r.Model, r.Matrix)
	switch kind {
	case "breakdown":
		var bars []tuner.BreakdownBar
		for i := range r.Cells {
			cell := &r.Cells[i]
			for j := range cell.Levels {
				// A feedback cell shows the window nearest its sustained
				// load, not every window of the trace.
				if fb := cell.Feedback; fb != nil && j != fb.Primary() {
					continue
				}
				if b := cell.Levels[j].Metrics.Breakdown; b != nil {
					bars = append(bars, tuner.BarOf(cell.Name+" "+cell.Levels[j].LoadString(), b))
				}
			}
		}
		err = writeBreakdownPlot(out, bars, tuner.BreakdownOptions{Title: title})
	case "feedback":
		var traces []tuner.TraceSeries
		for i := range r.Cells {
			if fb := r.Cells[i].Feedback; fb != nil {
				traces = append(traces, tuner.TraceOf(r.Cells[i].Name, fb))
			}
		}
		err = writeTracePlot(out, traces, tuner.TraceOptions{Title: title})
	default:
		series, o := curveSeries(&r, metric)
		err = writePlot(out, func() (chartWriter, error) { return tuner.NewCurveChart(series, o) },
			func(w io.Writer) error { return tuner.WriteCurveHTML(w, series, o) })
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "plot written to %s\n", out)
	return nil
}

// plotExt checks a plot file's extension (.svg, .png or .html).
func plotExt(out string) error {
	switch filepath.Ext(out) {
	case ".svg", ".png", ".html":
		return nil
	}
	return usagef("--output %s: want a .svg, .png or .html file", out)
}

// chartWriter renders a gonum chart as "svg" or "png".
type chartWriter interface {
	Write(w io.Writer, format string) error
}

// writePlot writes a chart to out: .html through html, .svg and .png
// through the gonum chart.
func writePlot(out string, chart func() (chartWriter, error), html func(io.Writer) error) (err error) {
	ext := strings.TrimPrefix(filepath.Ext(out), ".")
	var ch chartWriter
	if ext != "html" {
		if ch, err = chart(); err != nil {
			return err
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if ext == "html" {
		return html(f)
	}
	return ch.Write(f, ext)
}

func writeBreakdownPlot(out string, bars []tuner.BreakdownBar, o tuner.BreakdownOptions) error {
	if len(bars) == 0 {
		return errors.New("nothing to plot: no level has a latency breakdown (the engine's /metrics was not read)")
	}
	return writePlot(out, func() (chartWriter, error) { return tuner.NewBreakdownChart(bars, o) },
		func(w io.Writer) error { return tuner.WriteBreakdownHTML(w, bars, o) })
}

func writeTracePlot(out string, traces []tuner.TraceSeries, o tuner.TraceOptions) error {
	if len(traces) == 0 {
		return errors.New("nothing to plot: no feedback-load trace (run with feedback: true)")
	}
	return writePlot(out, func() (chartWriter, error) { return tuner.NewTraceChart(traces, o) },
		func(w io.Writer) error { return tuner.WriteTraceHTML(w, traces, o) })
}

// curveSeries is each cell's QPS-vs-latency curve for metric, and the
// chart's options (with the first SLO bound on metric).
func curveSeries(r *bench.Run, metric string) ([]tuner.CurveSeries, tuner.CurveOptions) {
	var out []tuner.CurveSeries
	limit := 0.0
	for i := range r.Cells {
		cell := &r.Cells[i]
		s := tuner.CurveSeries{Name: cell.Name}
		for j := range cell.Levels {
			l := &cell.Levels[j]
			v, _ := l.Metrics.Value(metric)
			s.Points = append(s.Points, tuner.CurvePoint{Label: l.LoadString(), QPS: l.Metrics.RequestThroughput, Latency: v})
		}
		slices.SortStableFunc(s.Points, func(a, b tuner.CurvePoint) int { return cmp.Compare(a.QPS, b.QPS) })
		out = append(out, s)
		for _, b := range cell.Workload.SLO {
			if b.Metric == metric && limit == 0 {
				limit = b.Limit
			}
		}
	}
	return out, tuner.CurveOptions{Title: fmt.Sprintf("run %s: %s on %s", r.ID, r.Model, r.Matrix), Latency: metric, LatencyLimit: limit}
}

func benchImport(c *cli.Context) error {
	if c.NArg() != 1 {
		return usagef("bench import takes one vLLM bench result JSON file, after the flags")
	}
	path := c.Args().First()
	labels, err := parseLabels(c.StringSlice("label"), false)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return usagef("bench import: %v", err)
	}
	run, reqs, err := bench.ParseVLLMResult(b, bench.ImportOptions{File: path, Labels: labels, Tier: c.String("tier"),
		GPU: trial.GPUIdentity{Name: c.String("gpu"), Count: c.Int("gpus")}, Metadata: c.StringSlice("metadata-key")})
	if err != nil {
		return asUsage(err)
	}
	raws := [][]byte{nil}
	if len(reqs) > 0 {
		if raws[0], err = bench.EncodeRaw(reqs); err != nil {
			return err
		}
	}
	dbPath, err := studyDBPath(c)
	if err != nil {
		return err
	}
	st, err := store.Open(c.Context, dbPath, store.DefaultOptions())
	if err != nil {
		return err
	}
	defer st.Close()
	id, err := st.ImportRun(c.Context, run, raws)
	if err != nil {
		return err
	}
	detail := "summary only (no per-request data: --save-detailed)"
	if len(reqs) > 0 {
		detail = fmt.Sprintf("%d requests of raw data", len(reqs))
	}
	fmt.Fprintf(c.App.ErrWriter, "imported %s as run %s: %s\n", path, id, detail)
	return nil
}
