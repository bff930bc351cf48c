package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/internal/atomicfile"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/dbopen"
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
				&cli.StringFlag{Name: "config", Usage: "vLLM config to start: a --config YAML file, a trial ID or a config ID of the database, or default (vLLM's defaults)"},
				&cli.StringFlag{Name: "engine", Value: engineVLLM, Usage: "vllm, sim (vllm-sim processes) or sim-virtual (vllm-sim in this process, measured on its virtual clock) (with --config)"},
				&cli.StringFlag{Name: "url", Usage: "benchmark the running server at http://HOST:PORT (starts nothing)"},
				&cli.StringFlag{Name: "endpoint", Usage: "completions or chat: the API every cell's load is sent to (default: each cell's endpoint:, else completions)"},
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
			Action: benchRun,
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
				&cli.StringSliceFlag{Name: "metadata-key", Usage: "a top-level key kept as a label whatever its type (unknown scalar keys, as `vllm bench serve --metadata` adds them, are kept anyway; repeatable)"},
			},
			Action: benchImport,
		}},
	}
}

// parseLabels reads --label values (the core's ParseLabels).
var parseLabels = tuner.ParseLabels

// benchSpec turns the bench run flags into the core's job description.
func benchSpec(c *cli.Context) (tuner.BenchSpec, error) {
	s := tuner.BenchSpec{
		Matrix: c.String("matrix"), Tier: c.String("tier"), Config: c.String("config"), URL: c.String("url"),
		Model: c.String("model"), GPU: c.String("gpu"), GPUs: c.Int("gpus"), Labels: c.StringSlice("label"),
		RestartPerCell: c.Bool("restart-per-cell"), Telemetry: c.String("telemetry"),
		RequestTimeout: tuner.Duration(c.Duration("request-timeout")), StartupTimeout: tuner.Duration(c.Duration("startup-timeout")),
		EngineArgs: c.StringSlice("engine-arg"), VLLM: c.String("vllm"), VLLMSim: c.String("vllm-sim"), LogDir: c.String("log-dir"),
		Endpoint: c.String("endpoint"),
	}
	if c.IsSet("engine") {
		s.Engine = c.String("engine")
	}
	if p := c.String("models"); p != "" {
		// The file is read when it will be used; otherwise the core says
		// why --models does not apply.
		s.Models = []string{p}
		if s.Tier == "release" && s.Model == "" {
			var err error
			if s.Models, err = readModelList(p); err != nil {
				return s, err
			}
		}
	}
	s.Lookup = func(ctx context.Context) (store.DB, func(), error) {
		st, err := openReader(c)
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	}
	return s, nil
}

// benchRun is `tuner bench run`: flags to a spec, resolved and run by the
// core; each run's report is printed as it ends.
func benchRun(c *cli.Context) error {
	spec, err := benchSpec(c)
	if err != nil {
		return err
	}
	b, err := spec.Resolve(c.Context)
	if err != nil {
		return err
	}
	log := cmdLogger(c)
	dbPath, err := dbArg(c)
	if err != nil {
		return err
	}
	st, err := dbopen.Open(c.Context, dbPath, dbopen.Options{Logger: log})
	if err != nil {
		return err
	}
	defer st.Close()
	_, err = b.Run(c.Context, st, tuner.BenchStartConfig{Logger: log, DataDir: dataDir(dbPath), Progress: c.App.ErrWriter,
		OnRun: func(run *store.Run, _ error) {
			if run == nil {
				return
			}
			fmt.Fprintf(c.App.ErrWriter, "run %s stored: %s, %d of %d cells\n", run.ID, run.State, len(run.Cells), len(b.Matrix.Cells))
			if len(run.Cells) > 0 {
				bench.WriteRun(c.App.Writer, run, "text")
			}
		}})
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
func openRun(c *cli.Context, id string) (store.DB, store.Run, error) {
	st, err := openReader(c)
	if err != nil {
		return nil, store.Run{}, err
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
		return bench.WriteRun(c.App.Writer, &r, "md")
	}
	return bench.WriteRun(c.App.Writer, &r, "text")
}

func benchExport(c *cli.Context) error {
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
	return writeOutput(c.App.Writer, c.String("output"), func(w io.Writer) error { return tuner.WriteRunCSV(c.Context, st, &r, w) })
}

func benchPlot(c *cli.Context) error {
	id, err := oneRunArg(c, "plot")
	if err != nil {
		return err
	}
	kind := c.String("kind")
	metric := c.String("metric")
	switch kind {
	case "curve":
		if err := tuner.CheckCurveMetric(metric); err != nil {
			return err
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
		var bars []chart.BreakdownBar
		for i := range r.Cells {
			cell := &r.Cells[i]
			for j := range cell.Levels {
				// A feedback cell shows the window nearest its sustained
				// load, not every window of the trace.
				if fb := cell.Feedback; fb != nil && j != fb.Primary() {
					continue
				}
				if b := cell.Levels[j].Metrics.Breakdown; b != nil {
					bars = append(bars, chart.BarOf(cell.Name+" "+cell.Levels[j].LoadString(), b))
				}
			}
		}
		err = writeBreakdownPlot(out, title, bars)
	case "feedback":
		var traces []chart.TraceSeries
		for i := range r.Cells {
			if fb := r.Cells[i].Feedback; fb != nil {
				traces = append(traces, chart.TraceOf(r.Cells[i].Name, fb))
			}
		}
		err = writeTracePlot(out, title, traces)
	default:
		err = writePlot(out, tuner.RunCurves(&r, metric))
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

// writePlot writes a chart to out in the format its extension names
// (.svg, .png or .html).
func writePlot(out string, f chart.Figure) error {
	return atomicfile.Write(out, 0o644, func(w io.Writer) error { return chart.Render(w, f, strings.TrimPrefix(filepath.Ext(out), ".")) })
}

func writeBreakdownPlot(out, title string, bars []chart.BreakdownBar) error {
	if len(bars) == 0 {
		return errors.New("nothing to plot: no level has a latency breakdown (the engine's /metrics was not read)")
	}
	return writePlot(out, chart.Breakdown(title, bars))
}

func writeTracePlot(out, title string, traces []chart.TraceSeries) error {
	if len(traces) == 0 {
		return errors.New("nothing to plot: no feedback-load trace (run with feedback: true)")
	}
	return writePlot(out, chart.Trace(title, traces))
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
	b, err := bounded.ReadFile(path, bounded.ImportBytes)
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
	dbPath, err := dbArg(c)
	if err != nil {
		return err
	}
	st, err := dbopen.Open(c.Context, dbPath, dbopen.Options{})
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
