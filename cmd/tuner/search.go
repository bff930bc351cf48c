package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/dbopen"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

func init() { register(searchCommand()) }

// Engines --engine accepts.
const (
	engineVLLM       = tuner.EngineVLLM
	engineSim        = tuner.EngineSim
	engineSimVirtual = tuner.EngineSimVirtual
)

func searchCommand() *cli.Command {
	d := tuner.DefaultSearchSpec()
	return &cli.Command{
		Name:      "search",
		Usage:     "tune the serving flags of a model on a GPU (the overnight job)",
		ArgsUsage: " ",
		Description: "Runs trials until the trial or wall-time budget, or patience, ends the search: each trial starts\n" +
			"the engine with a proposed config, drives the workload, records the result, and the search learns.\n" +
			"The best few configs are then re-measured and ranked by median - k*MAD. Ctrl-C stops the running\n" +
			"engine, marks the trial interrupted and exits 130; run again with --resume to continue.",
		Flags: append(targetFlags(),
			&cli.StringFlag{Name: "engine", Value: d.Engine, Usage: "vllm (vllm serve), sim (the bundled vllm-sim, same process path) or sim-virtual (in-process, virtual clock)"},
			&cli.StringFlag{Name: "workload", Aliases: []string{"w"}, Value: d.Workload, Usage: "workload preset (chat, short-high-concurrency, long-prefill) or YAML file"},
			&cli.IntFlag{Name: "requests", Usage: "measured requests per trial (overrides the workload's num_requests)"},
			&cli.StringFlag{Name: "endpoint", Usage: "API of the load: completions (token-id prompts) or chat (/v1/chat/completions, for chat-only servers; same metrics) (default: the workload's, else completions)"},
			&cli.DurationFlag{Name: "duration", Usage: "measurement duration per trial (overrides the workload's duration)"},
			&cli.StringFlag{Name: "space", Usage: "user space file (YAML) applied on top of the default space"},
			&cli.StringFlag{Name: "slo", Usage: "SLO bounds, e.g. 'ttft_p99<=500ms,tpot_p99<=50ms' (default: the workload's)"},
			&cli.StringFlag{Name: "latency", Value: d.Latency, Usage: "latency objective: ttft_p99, tpot_p99, itl_p99 or e2el_p99"},
			&cli.IntFlag{Name: "trials", Value: d.Trials, Usage: "search trials of the study (resumed ones count; 0 = no limit)"},
			&cli.DurationFlag{Name: "budget", Value: d.Budget.Std(), Usage: "wall time of this run, re-measurement included (0 = no limit)"},
			&cli.DurationFlag{Name: "trial-timeout", Value: d.TrialTimeout.Std(), Usage: "limit of one trial (0 = none)"},
			&cli.IntFlag{Name: "patience", Value: d.Patience, Usage: "stop after N trials without front improvement (0 = off)"},
			&cli.Float64Flag{Name: "screen-fraction", Usage: "measure each proposed config first on this share of the workload's requests (e.g. 0.25), and in full only when promising: near the SLO, not dominated by the front, in the top --screen-keep of the short runs (successive halving); 0 = off"},
			&cli.Float64Flag{Name: "screen-keep", Value: tuner.DefaultScreenKeep, Usage: "with --screen-fraction: promote a short run unless more than this share of the short runs so far dominate it"},
			&cli.IntFlag{Name: "finalists", Value: d.Finalists, Usage: "configs re-measured at the end with vLLM's default"},
			&cli.IntFlag{Name: "repeats", Value: d.Repeats, Usage: "interleaved rounds of the final re-measurement of vLLM's default and the finalists (<= 1 = none: vLLM's default is then kept)"},
			&cli.StringFlag{Name: "sampler", Value: d.Sampler, Usage: "tpe, cmaes or random"},
			&cli.StringSliceFlag{Name: "enqueue", Usage: "run a known config first and compare the result with it: `FLAGS` as for vllm serve (e.g. today's production flags), or @FILE with one line of flags per config (repeatable)"},
			&cli.Uint64Flag{Name: "seed", Value: d.Seed, Usage: "seed of every random choice"},
			&cli.BoolFlag{Name: "resume", Usage: "continue the study (same model, GPU, engine, workload, objectives, SLO and space)"},
			&cli.BoolFlag{Name: "new-study", Usage: "with --resume: start a new study when the options differ from every existing study's"},
			&cli.BoolFlag{Name: "no-prune", Usage: "do not narrow the space from history"},
			&cli.BoolFlag{Name: "no-surrogate", Usage: "do not screen candidates with the GBDT surrogate (run the sampler's choice)"},
			&cli.StringFlag{Name: "surrogate", Usage: "a model trained elsewhere as the surrogate's prior until the study's own trials outweigh it: a stored model's name (tuner surrogate list) or a model file"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the effective space, the first proposals and their command lines; start nothing"},
			&cli.IntFlag{Name: "proposals", Value: d.Proposals, Usage: "proposals printed by --dry-run"},
			&cli.StringSliceFlag{Name: "engine-arg", Usage: "extra engine argument passed through unchanged (repeatable)"},
			&cli.StringSliceFlag{Name: "engine-env", Usage: "K=V environment for the engine (allowlisted names: " + strings.Join(tuner.EngineEnvAllow, ", ") + ", VLLM_*, NCCL_*)"},
			&cli.StringFlag{Name: "vllm", Value: d.VLLM, Usage: "vllm executable (--engine vllm)"},
			&cli.StringFlag{Name: "vllm-sim", Usage: "vllm-sim executable (--engine sim; default: next to tuner, then on PATH)"},
			&cli.StringFlag{Name: "log-dir", Usage: "per-trial engine logs and raw data (default: beside the database)"},
			&cli.IntFlag{Name: "extend", Value: d.Extend, Usage: "times an unsteady measurement is extended before the trial is marked unstable"},
			&cli.IntFlag{Name: "engine-log-mib", Value: d.EngineLogMiB, Usage: "cap of each engine log file in MiB (then rotated to .log.1: the newest output is kept)"},
			&cli.DurationFlag{Name: "startup-timeout", Value: d.StartupTimeout.Std(), Usage: "limit from engine start to /health 200"},
			&cli.BoolFlag{Name: "json", Usage: "print the final report as JSON"},
			&cli.StringFlag{Name: "worker-name", Usage: "this process's name among the workers of a study in PostgreSQL (default hostname:pid)"},
			&cli.DurationFlag{Name: "lease", Value: tuner.DefaultLease, Usage: "with a postgres:// --db: how long a trial stays claimed without a heartbeat before another worker takes it back"},
		),
		Action: runSearch,
	}
}

// shellJoin quotes arguments that need it for a POSIX shell.
var shellJoin = tuner.ShellJoin

// printReport writes the final summary.
func printReport(w io.Writer, rep tuner.Report, ss *tuner.Search) {
	screened := ""
	if rep.ScreenedOut > 0 {
		screened = fmt.Sprintf(", %d screened out after a short run", rep.ScreenedOut)
	}
	fmt.Fprintf(w, "\nstudy %s: %d search trials, %d re-measurements (%d failed%s), %s; this run: %d trials in %s\n",
		rep.Study, rep.SearchTrials, rep.RepeatTrials, rep.FailedTrials, screened, rep.StopReason, rep.RanThisRun, rep.Elapsed.Round(time.Second))
	m := rep.Metrics
	r := rep.Recommended
	def := ss.Space.DefaultConfig()
	if len(rep.Front) > 0 || r != nil {
		what := "SLO-feasible configs"
		if len(rep.SLO) == 0 {
			what = "no SLO set"
		}
		fmt.Fprintf(w, "Pareto front (%s, conservative values):\n", what)
		rows, recID := rep.Front, ""
		if r != nil {
			recID = r.ConfigID
			if !slices.ContainsFunc(rows, func(c tuner.Candidate) bool { return c.ConfigID == recID }) {
				rows = append(slices.Clone(rows), *r)
			}
		}
		printCandidates(w, rows, m, def, recID, def.ID(), len(rep.Front))
	}
	if d := rep.Default; d != nil && d.Throughput.N > 0 {
		feas := "meets the SLO"
		switch {
		case len(rep.SLO) == 0:
			feas = "no SLO set"
		case !d.Feasible:
			feas = "misses the SLO: " + strings.Join(d.Violations, ", ")
		}
		fmt.Fprintf(w, "vLLM default (%s): %s %.1f (median of %d), %s %.2f ms; %s\n", d.ConfigID, m.Throughput, d.Throughput.Median, d.Throughput.N, m.Latency, d.Latency.Median, feas)
	}
	if rep.Remeasure != "" {
		fmt.Fprintln(w, rep.Remeasure)
	}
	if r == nil {
		if rep.NoFeasible != "" {
			fmt.Fprintf(w, "no recommendation: %s\n", rep.NoFeasible)
		}
		return
	}
	what := "config " + r.ConfigID
	if rep.RecommendedIsDefault {
		what = "vLLM's default config " + r.ConfigID
	}
	fmt.Fprintf(w, "recommended: %s: %s median %.1f (MAD %.1f over %d runs, score %.1f), %s median %.2f ms, VRAM %s GiB\n",
		what, m.Throughput, r.Throughput.Median, r.Throughput.MAD, r.Throughput.N, r.Score, m.Latency, r.Latency.Median, fmtVRAM(r.VRAM.Median, r.VRAMEstimated))
	fmt.Fprintf(w, "  verdict: %s\n", rep.Verdict)
	fmt.Fprintf(w, "  %s\n", shellJoin(slices.Concat([]string{"vllm", "serve", ss.ModelArg}, r.Config.Flags(), ss.Workload.LoRAArgs())))
	for _, b := range rep.Enqueued {
		if b.Throughput.N == 0 {
			fmt.Fprintf(w, "your config %s (--enqueue): no usable measurement (%s)\n", b.ConfigID, strings.Join(b.Violations, ", "))
			continue
		}
		fmt.Fprintf(w, "your config %s (--enqueue): %s median %.1f over %d runs, %s median %.2f ms", b.ConfigID, m.Throughput, b.Throughput.Median, b.Throughput.N, m.Latency, b.Latency.Median)
		switch {
		case b.ConfigID == r.ConfigID:
			fmt.Fprintf(w, "; it is the recommendation: keep it\n")
		case b.Gain != nil:
			fmt.Fprintf(w, "; the recommendation is %s over it: %s\n", b.Gain, strings.Replace(b.Gain.Verdict(), "keep the default", "keep yours", 1))
		default:
			fmt.Fprintln(w)
		}
	}
}

// vramEstimateNote explains the "~" of fmtVRAM.
const vramEstimateNote = "~ VRAM estimated from --gpu-memory-utilization x GPU memory (no NVML or engine gauge): not a measurement"

// fmtVRAM formats a peak VRAM figure, marked "~" when it is an estimate.
func fmtVRAM(gib float64, estimated bool) string {
	if estimated {
		return fmt.Sprintf("~%.1f", gib)
	}
	return fmt.Sprintf("%.1f", gib)
}

// flagsVsDefault are the flags of cfg that differ from vLLM's default, or
// "(vLLM default)".
func flagsVsDefault(cfg, def spaces.Config) string {
	fl := strings.Join(cfg.Diff(def).Flags(), " ")
	if fl == "" {
		return "(vLLM default)"
	}
	return fl
}

// cmdLogger logs to stderr: warnings by default, debug with --verbose.
func cmdLogger(c *cli.Context) *slog.Logger {
	level := slog.LevelWarn
	if c.Bool("verbose") {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: level}))
}

// writerIsTerminal reports whether w is a character device (a terminal).
func writerIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// terminalWidth is the column count of the terminal w writes to (0 when
// unknown: the progress line then fits 80).
func terminalWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// loadWorkloadArg reads --workload: a built-in name or a YAML file. Bad
// files are usage errors naming the line and field.
func loadWorkloadArg(arg string) (trial.Workload, error) {
	w, err := trial.LoadWorkload(arg)
	if err != nil {
		return trial.Workload{}, usagef("--workload: %w", err)
	}
	return w, nil
}

// Helpers of the search core that other commands and tests call by their
// old names.
var (
	checkEngineArgs    = tuner.CheckEngineArgs
	checkEngineVersion = tuner.CheckEngineVersion
	parseEngineEnv     = tuner.ParseEngineEnv
	splitFlags         = tuner.SplitFlags
	findVLLMSim        = tuner.FindVLLMSim
	history            = tuner.History
)

var execLookPath = exec.LookPath

// searchSpec turns the search flags into the core's job description.
func searchSpec(c *cli.Context) (tuner.SearchSpec, error) {
	ts, err := targetSpec(c)
	if err != nil {
		return tuner.SearchSpec{}, err
	}
	s := tuner.SearchSpec{
		TargetSpec: ts,
		Engine:     c.String("engine"), Workload: c.String("workload"), Endpoint: c.String("endpoint"),
		Space: c.String("space"), SLO: c.String("slo"), Latency: c.String("latency"),
		Trials: c.Int("trials"), Budget: tuner.Duration(c.Duration("budget")), TrialTimeout: tuner.Duration(c.Duration("trial-timeout")),
		Patience: c.Int("patience"), ScreenFraction: c.Float64("screen-fraction"), ScreenKeep: c.Float64("screen-keep"), Finalists: c.Int("finalists"), Repeats: c.Int("repeats"),
		Sampler: c.String("sampler"), Enqueue: c.StringSlice("enqueue"), Seed: c.Uint64("seed"),
		Resume: c.Bool("resume"), NewStudy: c.Bool("new-study"), NoPrune: c.Bool("no-prune"),
		NoSurrogate: c.Bool("no-surrogate"), Surrogate: c.String("surrogate"),
		DryRun: c.Bool("dry-run"), Proposals: c.Int("proposals"),
		EngineArgs: c.StringSlice("engine-arg"), EngineEnv: c.StringSlice("engine-env"),
		VLLM: c.String("vllm"), VLLMSim: c.String("vllm-sim"), LogDir: c.String("log-dir"),
		Extend: c.Int("extend"), EngineLogMiB: c.Int("engine-log-mib"), StartupTimeout: tuner.Duration(c.Duration("startup-timeout")),
		Worker: c.String("worker-name"), Lease: tuner.Duration(c.Duration("lease")),
	}
	if s.Lease < 0 {
		return tuner.SearchSpec{}, usagef("--lease %s: must be > 0", s.Lease.Std())
	}
	if !c.IsSet("endpoint") {
		s.Endpoint = ""
	}
	if c.IsSet("requests") {
		n := c.Int("requests")
		s.Requests = &n
	}
	if c.IsSet("duration") {
		d := tuner.Duration(c.Duration("duration"))
		s.Duration = &d
	}
	return s, nil
}

func runSearch(c *cli.Context) error {
	spec, err := searchSpec(c)
	if err != nil {
		return err
	}
	ss, err := spec.Resolve()
	if err != nil {
		return err
	}
	dbPath, err := dbArg(c)
	if err != nil {
		return err
	}
	if spec.DryRun {
		return dryRun(c, ss, dbPath)
	}
	st, err := openSearchDB(c.Context, dbPath, cmdLogger(c))
	if err != nil {
		return err
	}
	defer st.Close()
	// A PostgreSQL study is shared: other machines may serve it too.
	return startSearch(c, ss, st, dbPath, dbopen.IsURL(dbPath))
}

// startSearch runs a resolved search on an open database (`search` and
// `worker`).
func startSearch(c *cli.Context, ss *tuner.Search, st store.DB, db string, shared bool) error {
	log := cmdLogger(c)
	run, err := ss.Start(c.Context, st, tuner.StartConfig{
		DataDir: dataDir(db), Shared: shared,
		Logger: log, Progress: c.App.ErrWriter, Terminal: writerIsTerminal(c.App.ErrWriter), Width: terminalWidth(c.App.ErrWriter),
	})
	if err != nil {
		return err
	}
	defer run.Close()
	if run.StaleLock != "" {
		fmt.Fprintf(c.App.ErrWriter, "note: the previous search of study %s, %s, ended without releasing its lock (the process is gone); taking it over\n", run.Study.ID, run.StaleLock)
	}
	w := c.App.Writer
	if !c.Bool("json") {
		fmt.Fprintf(w, "study %s: %s, engine %s, workload %s, SLO %s; db %s\n", run.Study.ID, ss.Target.Describe(), ss.Engine, ss.Workload.Name, cmp.Or(ss.SLO.String(), "-"), st.Path())
		if run.Worker != "" {
			fmt.Fprintf(w, "worker %s: %d other live workers on this study\n", run.Worker, run.OtherWorkers)
		}
		if ss.Prune.Skipped == "" {
			fmt.Fprintf(w, "pruned %.0f%% of the space from %.0f observations (see `tuner search --dry-run`)\n", ss.Prune.VolumeRemoved*100, ss.Prune.Evidence)
		}
	}
	rep, err := run.Loop.Run(c.Context)
	if errors.Is(err, tuner.ErrStudyExists) {
		return usagef("%v", err)
	}
	if c.Bool("json") {
		if werr := writeJSON(w, rep); werr != nil {
			return werr
		}
	} else {
		printReport(w, rep, ss)
	}
	if err != nil && c.Context.Err() != nil {
		fmt.Fprintf(c.App.ErrWriter, "interrupted: the study is saved; continue with the same command and --resume\n")
	}
	return err
}

// dryRun prints the effective space, the first proposals and their exact
// command lines; it opens the database read-only (when it exists) for the
// pruning history and starts nothing.
func dryRun(c *cli.Context, ss *tuner.Search, dbPath string) error {
	w := c.App.Writer
	var own, other []search.Observation
	var db store.DB // nil: no database yet (files only for --surrogate)
	if st, err := openHistory(c.Context, dbPath); err == nil {
		defer st.Close()
		db = st
		if own, other, err = history(c.Context, st, ss.Key, ss.Key.ID()); err != nil {
			return err
		}
	}
	ss.ApplyPrune(own, other)
	fmt.Fprintf(w, "dry run: study %s, engine %s, workload %s, SLO %s, objectives %s\n\n", ss.Key.ID(), ss.Engine, ss.Workload.Name, cmp.Or(ss.SLO.String(), "-"), ss.Metrics.Objectives())
	if err := printSpace(w, ss.Pruned, false); err != nil {
		return err
	}
	fmt.Fprintln(w)
	printPrune(w, ss.Prune)
	prop, err := ss.NewProposer(c.Context, other, db, cmdLogger(c))
	if err != nil {
		return err
	}
	for _, o := range own {
		prop.Tell(o.Config, o.Result)
	}
	n := c.Int("proposals")
	if ss.Engine == engineSimVirtual {
		fmt.Fprintf(w, "\nfirst %d proposals (--engine sim-virtual starts no process: it simulates these vllm-sim command lines in-process on a virtual clock):\n", n)
	} else {
		fmt.Fprintf(w, "\nfirst %d proposals (the runner adds --host 127.0.0.1 --port PORT):\n", n)
	}
	for i := range n {
		cfg, err := prop.Ask(c.Context)
		if errors.Is(err, tuner.ErrSpaceExhausted) {
			fmt.Fprintln(w, "  (space exhausted)")
			break
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %d. config %s: %s\n", i+1, cfg.ID(), shellJoin(trial.RedactArgs(ss.EngineCommand(cfg))))
	}
	if len(ss.EngineEnv) > 0 {
		env := make([]string, len(ss.EngineEnv))
		for i, kv := range ss.EngineEnv {
			k, v, _ := strings.Cut(kv, "=")
			if trial.SecretName(k) {
				v = "***"
			}
			env[i] = k + "=" + v
		}
		fmt.Fprintf(w, "engine environment: %s\n", strings.Join(env, " "))
	}
	return nil
}

func printPrune(w io.Writer, rep search.PruneReport) {
	if rep.Skipped != "" {
		fmt.Fprintf(w, "pruning: none (%s)\n", rep.Skipped)
		return
	}
	fmt.Fprintf(w, "pruning: %.1f%% of the tuned volume removed, from %.0f weighted observations\n", rep.VolumeRemoved*100, rep.Evidence)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  PARAM\tORIGINAL\tPRUNED\tREMOVED\tREASONS")
	for _, p := range rep.Params {
		if p.Removed == 0 && len(p.Reasons) == 0 {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%.0f%%\t%s\n", p.Name, p.Original, p.Pruned, p.Removed*100, strings.Join(p.Reasons, "; "))
	}
	tw.Flush()
}
