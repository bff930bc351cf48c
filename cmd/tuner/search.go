package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/surrogate"
	"github.com/vllm-tuner/tuner/trial"
	"github.com/vllm-tuner/tuner/tuner"
)

func init() { register(searchCommand()) }

// Engines --engine accepts.
const (
	engineVLLM       = "vllm"
	engineSim        = "sim"
	engineSimVirtual = "sim-virtual"
)

func searchCommand() *cli.Command {
	d := tuner.DefaultConfig()
	return &cli.Command{
		Name:      "search",
		Usage:     "tune the serving flags of a model on a GPU (the overnight job)",
		ArgsUsage: " ",
		Description: "Runs trials until the trial or wall-time budget, or patience, ends the search: each trial starts\n" +
			"the engine with a proposed config, drives the workload, records the result, and the search learns.\n" +
			"The best few configs are then re-measured and ranked by median - k*MAD. Ctrl-C stops the running\n" +
			"engine, marks the trial interrupted and exits 130; run again with --resume to continue.",
		Flags: append(targetFlags(),
			&cli.StringFlag{Name: "engine", Value: engineVLLM, Usage: "vllm (vllm serve), sim (the bundled vllm-sim, same process path) or sim-virtual (in-process, virtual clock)"},
			&cli.StringFlag{Name: "workload", Aliases: []string{"w"}, Value: "chat", Usage: "workload preset (chat, short-high-concurrency, long-prefill) or YAML file"},
			&cli.IntFlag{Name: "requests", Usage: "measured requests per trial (overrides the workload's num_requests)"},
			&cli.StringFlag{Name: "endpoint", Usage: "API of the load: completions (token-id prompts) or chat (/v1/chat/completions, for chat-only servers; same metrics) (default: the workload's, else completions)"},
			&cli.DurationFlag{Name: "duration", Usage: "measurement duration per trial (overrides the workload's duration)"},
			&cli.StringFlag{Name: "space", Usage: "user space file (YAML) applied on top of the default space"},
			&cli.StringFlag{Name: "slo", Usage: "SLO bounds, e.g. 'ttft_p99<=500ms,tpot_p99<=50ms' (default: the workload's)"},
			&cli.StringFlag{Name: "latency", Value: "tpot_p99", Usage: "latency objective: ttft_p99, tpot_p99, itl_p99 or e2el_p99"},
			&cli.IntFlag{Name: "trials", Value: d.MaxTrials, Usage: "search trials of the study (resumed ones count; 0 = no limit)"},
			&cli.DurationFlag{Name: "budget", Value: d.Budget, Usage: "wall time of this run, re-measurement included (0 = no limit)"},
			&cli.DurationFlag{Name: "trial-timeout", Value: d.TrialTimeout, Usage: "limit of one trial (0 = none)"},
			&cli.IntFlag{Name: "patience", Value: d.Patience, Usage: "stop after N trials without front improvement (0 = off)"},
			&cli.IntFlag{Name: "finalists", Value: d.Finalists, Usage: "configs re-measured at the end"},
			&cli.IntFlag{Name: "repeats", Value: d.Repeats, Usage: "measurements per finalist (1 = no re-measurement)"},
			&cli.StringFlag{Name: "sampler", Value: string(search.SamplerTPE), Usage: "tpe, cmaes or random"},
			&cli.StringSliceFlag{Name: "enqueue", Usage: "run a known config first and compare the result with it: `FLAGS` as for vllm serve (e.g. today's production flags), or @FILE with one line of flags per config (repeatable)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of every random choice"},
			&cli.BoolFlag{Name: "resume", Usage: "continue the study (same model, GPU, engine, workload, objectives, SLO and space)"},
			&cli.BoolFlag{Name: "new-study", Usage: "with --resume: start a new study when the options differ from every existing study's"},
			&cli.BoolFlag{Name: "no-prune", Usage: "do not narrow the space from history"},
			&cli.BoolFlag{Name: "no-surrogate", Usage: "do not screen candidates with the GBDT surrogate (run the sampler's choice)"},
			&cli.StringFlag{Name: "surrogate", Usage: "a model trained elsewhere as the surrogate's prior until the study's own trials outweigh it: a stored model's name (tuner surrogate list) or a model file"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the effective space, the first proposals and their command lines; start nothing"},
			&cli.IntFlag{Name: "proposals", Value: 5, Usage: "proposals printed by --dry-run"},
			&cli.StringSliceFlag{Name: "engine-arg", Usage: "extra engine argument passed through unchanged (repeatable)"},
			&cli.StringSliceFlag{Name: "engine-env", Usage: "K=V environment for the engine (allowlisted names: " + strings.Join(engineEnvAllow, ", ") + ", VLLM_*, NCCL_*)"},
			&cli.StringFlag{Name: "vllm", Value: "vllm", Usage: "vllm executable (--engine vllm)"},
			&cli.StringFlag{Name: "vllm-sim", Usage: "vllm-sim executable (--engine sim; default: next to tuner, then on PATH)"},
			&cli.StringFlag{Name: "log-dir", Usage: "per-trial engine logs and raw data (default: beside the database)"},
			&cli.IntFlag{Name: "extend", Value: trial.DefaultStabilityConfig().MaxExtensions, Usage: "times an unsteady measurement is extended before the trial is marked unstable"},
			&cli.IntFlag{Name: "engine-log-mib", Value: trial.DefaultMaxLogBytes >> 20, Usage: "cap of each engine log file in MiB (then rotated to .log.1: the newest output is kept)"},
			&cli.DurationFlag{Name: "startup-timeout", Value: trial.DefaultConfig().StartupTimeout, Usage: "limit from engine start to /health 200"},
			&cli.BoolFlag{Name: "json", Usage: "print the final report as JSON"},
		),
		Action: runSearch,
	}
}

// engineEnvAllow are the environment names --engine-env may set besides
// the VLLM_ and NCCL_ prefixes.
var engineEnvAllow = []string{"CUDA_VISIBLE_DEVICES", "HF_HOME", "HF_HUB_OFFLINE", "HF_TOKEN", "PYTORCH_CUDA_ALLOC_CONF", "OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM", "TRANSFORMERS_OFFLINE"}

func parseEngineEnv(kvs []string) ([]string, error) {
	var out []string
	for _, kv := range kvs {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--engine-env %q: want NAME=VALUE", kv)
		}
		allowed := strings.HasPrefix(k, "VLLM_") || strings.HasPrefix(k, "NCCL_")
		for _, a := range engineEnvAllow {
			allowed = allowed || k == a
		}
		if !allowed {
			return nil, usagef("--engine-env %s: not on the allowlist (%s, VLLM_*, NCCL_*)", k, strings.Join(engineEnvAllow, ", "))
		}
		out = append(out, kv)
	}
	return out, nil
}

// searchSetup is everything a search needs, resolved from the flags.
type searchSetup struct {
	engine     string
	modelArg   string // as the user wrote it (vllm serve takes the HF id)
	target     spaces.Target
	space      *spaces.Space // resolved, unpruned (the study key hashes it)
	pruned     *spaces.Space
	prune      search.PruneReport
	workload   trial.Workload
	slo        trial.SLO
	metrics    tuner.Metrics
	key        store.StudyKey
	engineArg  []string
	engineEnv  []string
	enqueue    []spaces.Config // --enqueue, complete configs of the space
	enginePath string
	logDir     string
	// loop holds the budget knobs read from the flags (the study, workload
	// and progress fields are filled in by runSearch).
	loop           tuner.Config
	startupTimeout time.Duration
	extend         int
}

func resolveSearch(c *cli.Context) (*searchSetup, error) {
	if c.NArg() > 0 {
		return nil, usagef("search takes no arguments, got %q", c.Args().First())
	}
	ss := &searchSetup{engine: c.String("engine"), modelArg: c.String("model")}
	switch ss.engine {
	case engineVLLM, engineSim, engineSimVirtual:
	default:
		return nil, usagef("--engine %q: want vllm, sim or sim-virtual", ss.engine)
	}
	t, ok, err := resolveTarget(c)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, usagef("search needs --model and --gpu")
	}
	if t.EngineVersion == "" {
		t.EngineVersion = spaces.DefaultEngineVersion
	}
	ss.target = t
	s, err := loadSpace(c.String("space"))
	if err != nil {
		return nil, err
	}
	if ss.space, err = s.Resolve(t); err != nil {
		return nil, asUsage(err)
	}
	if ss.workload, err = loadWorkloadArg(c.String("workload")); err != nil {
		return nil, err
	}
	if c.IsSet("requests") {
		if c.Int("requests") < 1 {
			return nil, usagef("--requests must be >= 1")
		}
		ss.workload.NumRequests = c.Int("requests")
	}
	if c.IsSet("duration") {
		if c.Duration("duration") <= 0 {
			return nil, usagef("--duration must be > 0")
		}
		ss.workload.Duration = c.Duration("duration")
	}
	// Refuse up front what no config can run: weights larger than the
	// GPUs, or requests longer than max_model_len (HTTP 400 in every trial).
	if err := ss.space.CheckWeights(); err != nil {
		return nil, asUsage(err)
	}
	if err := ss.space.FitRequests(longestRequest(&ss.workload)); err != nil {
		return nil, asUsage(fmt.Errorf("--workload %s: %w", ss.workload.Name, err))
	}
	if c.IsSet("endpoint") {
		if ss.workload.Endpoint, err = trial.ParseEndpoint(c.String("endpoint")); err != nil {
			return nil, usagef("--endpoint: %v", err)
		}
	}
	ss.slo = ss.workload.SLO
	if v := c.String("slo"); v != "" {
		if ss.slo, err = trial.ParseSLO(v); err != nil {
			return nil, usagef("--slo: %v", err)
		}
	}
	ss.workload.SLO = ss.slo
	lat := c.String("latency")
	if err := search.ValidateLatency(lat); err != nil {
		return nil, usagef("--latency: %v", err)
	}
	ss.metrics = tuner.Metrics{Throughput: "output_throughput", Latency: lat}
	if _, err := search.ParseSampler(c.String("sampler")); err != nil {
		return nil, usagef("--sampler: %v", err)
	}
	if ss.loop, err = loopConfig(c, ss.metrics); err != nil {
		return nil, err
	}
	if ss.startupTimeout, ss.extend, err = runnerKnobs(c); err != nil {
		return nil, err
	}
	if ss.engineArg, err = checkEngineArgs(c.StringSlice("engine-arg")); err != nil {
		return nil, err
	}
	if ss.engineEnv, err = parseEngineEnv(c.StringSlice("engine-env")); err != nil {
		return nil, err
	}
	if ss.enqueue, err = parseEnqueue(c.StringSlice("enqueue"), ss.space); err != nil {
		return nil, err
	}
	ss.key = store.StudyKey{
		Model: t.Model.Name, GPU: t.GPU.Name, GPUCount: t.GPUCount, Engine: ss.engine, EngineVersion: t.EngineVersion,
		Workload: workloadKey(ss.workload), Objectives: ss.metrics.Objectives(), SLO: ss.slo.String(), SpaceHash: ss.space.Hash(),
		ServedModel: servedModel(ss.modelArg, t.Model.Name),
	}
	switch ss.engine {
	case engineVLLM:
		ss.enginePath = c.String("vllm")
		if !c.Bool("dry-run") {
			if _, err := execLookPath(ss.enginePath); err != nil {
				return nil, usagef("--engine vllm: %s not found (install vLLM, pass --vllm PATH, or use --engine sim): %v", ss.enginePath, err)
			}
		}
	case engineSim:
		if ss.enginePath, err = findVLLMSim(c.String("vllm-sim")); err != nil {
			return nil, err
		}
	}
	return ss, nil
}

// checkResumable refuses --resume when no study has these options but a
// study of the same model and GPU setup does: a changed option (another
// --slo, workload or space) would otherwise start a new study at trial #1
// without a word. It names the study and the options that differ.
func checkResumable(ctx context.Context, st studyLister, key store.StudyKey) error {
	all, err := st.Studies(ctx)
	if err != nil {
		return err
	}
	id := key.ID()
	var near []store.Study
	for _, o := range all {
		if o.ID == id {
			return nil
		}
		k := o.Key
		if k.Model == key.Model && k.ServedModel == key.ServedModel && k.GPU == key.GPU && k.GPUCount == key.GPUCount {
			near = append(near, o)
		}
	}
	if len(near) == 0 {
		return nil // nothing to resume: a first run with --resume starts the study
	}
	slices.SortStableFunc(near, func(a, b store.Study) int { return b.Created.Compare(a.Created) })
	var lines []string
	for _, o := range near {
		lines = append(lines, fmt.Sprintf("study %s differs in %s", o.ID, strings.Join(keyDiff(o.Key, key), ", ")))
	}
	return usagef("--resume: no study has these options, so a new one would start at trial #1; %s. Run with that study's options to resume it, or add --new-study",
		strings.Join(lines, "; "))
}

// keyDiff names the study-key fields of b that differ from a, with both
// values.
func keyDiff(a, b store.StudyKey) []string {
	var d []string
	add := func(name, x, y string) {
		if x != y {
			d = append(d, fmt.Sprintf("%s (%s, now %s)", name, orDash(x), orDash(y)))
		}
	}
	add("engine", a.Engine, b.Engine)
	add("engine version", a.EngineVersion, b.EngineVersion)
	add("workload", a.Workload, b.Workload)
	add("SLO", a.SLO, b.SLO)
	add("objectives", a.Objectives.String(), b.Objectives.String())
	if a.SpaceHash != b.SpaceHash {
		d = append(d, "search space (--space, or the default space of another tuner version)")
	}
	if len(d) == 0 {
		d = append(d, "the study key")
	}
	return d
}

// parseEnqueue reads --enqueue values: vLLM flags, or @FILE with one line
// of flags per config ('#' starts a comment). Each becomes a complete config
// of the space (flags not given take vLLM's default) that must satisfy its
// ranges and constraints; errors are usage errors naming the value or the
// file and line.
func parseEnqueue(vals []string, sp *spaces.Space) ([]spaces.Config, error) {
	var out []spaces.Config
	add := func(where, line string) error {
		args, err := splitFlags(line)
		if err == nil {
			var cfg spaces.Config
			if cfg, err = sp.ParseFlags(args); err == nil {
				if cfg, err = sp.Normalize(cfg); err == nil {
					if err = sp.Validate(cfg); err == nil {
						out = append(out, cfg)
						return nil
					}
				}
			}
		}
		return usagef("--enqueue %s: %w", where, err)
	}
	for _, v := range vals {
		file, ok := strings.CutPrefix(v, "@")
		if !ok {
			if err := add(fmt.Sprintf("%q", v), v); err != nil {
				return nil, err
			}
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, usagef("--enqueue @%s: %w", file, err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if line, _, _ = strings.Cut(line, "#"); strings.TrimSpace(line) == "" {
				continue
			}
			if err := add(fmt.Sprintf("%s:%d", file, i+1), line); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// splitFlags splits a line of flags as a POSIX shell would for the quoting
// people paste ('...', "..." and backslash escapes), without expanding
// anything.
func splitFlags(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	quote, started, escaped := rune(0), false, false
	for _, r := range line {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\' && quote != '\'':
			escaped, started = true, true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, started = r, true
		case r == ' ' || r == '\t' || r == '\r':
			if started {
				out = append(out, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if quote != 0 || escaped {
		return nil, errors.New("unterminated quote or escape")
	}
	if started {
		out = append(out, cur.String())
	}
	// "vllm serve MODEL --flags" pasted whole: keep the flags.
	if len(out) >= 3 && out[1] == "serve" && !strings.HasPrefix(out[2], "-") {
		out = out[3:]
	}
	return out, nil
}

// servedModel is the study key's ServedModel: the --model argument when it
// names the model otherwise than the catalog does.
func servedModel(arg, catalogName string) string {
	if strings.EqualFold(arg, catalogName) {
		return ""
	}
	return arg
}

// loopConfig reads the loop's budget flags. A bad value is a usage error
// naming the flag, found before any database is opened or created.
func loopConfig(c *cli.Context, m tuner.Metrics) (tuner.Config, error) {
	cfg := tuner.DefaultConfig()
	cfg.Metrics = m
	cfg.MaxTrials, cfg.Budget, cfg.TrialTimeout, cfg.Patience = c.Int("trials"), c.Duration("budget"), c.Duration("trial-timeout"), c.Int("patience")
	cfg.Finalists, cfg.Repeats, cfg.Resume = c.Int("finalists"), c.Int("repeats"), c.Bool("resume")
	for _, f := range []struct {
		name string
		v    int
	}{{"trials", cfg.MaxTrials}, {"patience", cfg.Patience}, {"finalists", cfg.Finalists}, {"repeats", cfg.Repeats}} {
		if f.v < 0 {
			return cfg, usagef("--%s %d: must be >= 0", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"budget", cfg.Budget}, {"trial-timeout", cfg.TrialTimeout}} {
		if f.v < 0 {
			return cfg, usagef("--%s %s: must be >= 0 (0 = no limit)", f.name, f.v)
		}
	}
	if cfg.MaxTrials == 0 && cfg.Budget == 0 && cfg.Patience == 0 {
		return cfg, usagef("--trials 0, --budget 0 and --patience 0: unbounded search (set at least one)")
	}
	if err := cfg.Validate(); err != nil {
		return cfg, asUsage(err)
	}
	return cfg, nil
}

// runnerKnobs reads the process runner's flags: --startup-timeout must be
// positive (the runner would silently take its default for 0), --extend and
// --proposals not negative.
func runnerKnobs(c *cli.Context) (startup time.Duration, extend int, err error) {
	startup, extend = c.Duration("startup-timeout"), c.Int("extend")
	if startup <= 0 {
		return 0, 0, usagef("--startup-timeout %s: must be > 0", startup)
	}
	if extend < 0 {
		return 0, 0, usagef("--extend %d: must be >= 0", extend)
	}
	if n := c.Int("proposals"); n < 0 {
		return 0, 0, usagef("--proposals %d: must be >= 0", n)
	}
	if n := c.Int("engine-log-mib"); n <= 0 {
		return 0, 0, usagef("--engine-log-mib %d: must be > 0", n)
	}
	return startup, extend, nil
}

// ownedEngineFlags are the engine flags the runner sets itself: the tuner
// owns the listening address of every engine it starts.
var ownedEngineFlags = []string{"host", "port"}

// checkEngineArgs rejects --engine-arg values that set a flag the runner
// owns, in every spelling vLLM's parser accepts: --port=1, --port followed
// by its value, a bare --host, and underscores for dashes.
func checkEngineArgs(args []string) ([]string, error) {
	for _, a := range args {
		f := strings.Fields(a)
		if len(f) == 0 || !strings.HasPrefix(f[0], "--") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(f[0], "--"), "=")
		name = strings.ReplaceAll(name, "_", "-")
		if slices.Contains(ownedEngineFlags, name) {
			return nil, usagef("--engine-arg %q: the tuner sets --host and --port of the engine itself (remove --%s)", a, name)
		}
	}
	return args, nil
}

// engineVersionRE is the shape of a vLLM (PEP 440) version: X.Y[.Z...] with
// optional pre-release, post, dev and local parts (0.11.0, 0.6.3.post1,
// 0.11.1rc2, 0.10.2.dev123+gabcdef.cu128).
var engineVersionRE = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)+((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[A-Za-z0-9]+(\.[A-Za-z0-9]+)*)?$`)

// checkEngineVersion validates --engine-version: spaces.CompareVersions
// stops at the first non-numeric part (it reads 0.0.bogus as 0.0), so the
// whole string must look like a vLLM version too.
func checkEngineVersion(v string) error {
	if !engineVersionRE.MatchString(v) {
		return usagef("--engine-version %q: not a vLLM version (want X.Y.Z, e.g. %s)", v, spaces.DefaultEngineVersion)
	}
	if _, err := spaces.CompareVersions(v, "0"); err != nil {
		return usagef("--engine-version %q: %v", v, err)
	}
	return nil
}

// findVLLMSim locates the vllm-sim binary: the flag, next to this
// executable, then $PATH. A --vllm-sim path that is missing, a directory or
// not executable is a usage error at startup, before anything is written.
func findVLLMSim(flag string) (string, error) {
	if flag != "" {
		if err := checkExecutable(flag); err != nil {
			return "", usagef("--vllm-sim %s: %v", flag, err)
		}
		return flag, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "vllm-sim")
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	if p, err := execLookPath("vllm-sim"); err == nil {
		return p, nil
	}
	return "", usagef("--engine sim: vllm-sim not found next to tuner or on PATH (build it with `make build` or pass --vllm-sim PATH)")
}

// checkExecutable reports why path cannot be run as a program.
func checkExecutable(path string) error {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case st.IsDir():
		return errors.New("is a directory")
	case st.Mode()&0o111 == 0:
		return errors.New("not executable")
	}
	return nil
}

// baseCommand starts the engine without a candidate's flags.
func (ss *searchSetup) baseCommand() []string {
	switch ss.engine {
	case engineSim:
		return []string{ss.enginePath, "serve", ss.modelArg, "--gpu", ss.target.GPU.Name, "--gpu-count", fmt.Sprint(ss.target.GPUCount)}
	case engineSimVirtual: // no process: the equivalent vllm-sim command, for --dry-run
		return []string{"vllm-sim", "serve", ss.modelArg, "--gpu", ss.target.GPU.Name, "--gpu-count", fmt.Sprint(ss.target.GPUCount)}
	}
	return []string{ss.enginePath, "serve", ss.modelArg}
}

// engineCommand is the engine's command line for cfg, without the host and
// port the runner adds: the base command, the candidate's flags, then
// --engine-arg values unchanged.
func (ss *searchSetup) engineCommand(cfg spaces.Config) []string {
	args := append(ss.baseCommand(), cfg.Flags()...)
	return append(args, ss.engineArg...)
}

// history reads the finished trials of the same model and GPU from other
// studies (for pruning and warm start) and the study's own.
func history(ctx context.Context, st historyReader, key store.StudyKey, studyID string) (own, other []search.Observation, err error) {
	trials, err := st.HistoryTrials(ctx, store.HistoryQuery{Model: key.Model, GPU: key.GPU, GPUCount: key.GPUCount})
	if err != nil {
		return nil, nil, fmt.Errorf("read history: %w", err)
	}
	for _, t := range trials {
		if t.State == store.StateInterrupted || t.Result == nil {
			continue
		}
		o := search.Observation{Config: t.Config, Result: t.Result, Weight: 1}
		if t.StudyID == studyID {
			own = append(own, o)
			continue
		}
		// Other workloads or SLOs of the same setup: evidence for pruning
		// and the scorer, not the study's own sampler.
		o.Weight = 0.5
		other = append(other, o)
	}
	return own, other, nil
}

func runSearch(c *cli.Context) error {
	ss, err := resolveSearch(c)
	if err != nil {
		return err
	}
	log := cmdLogger(c)
	dbPath, err := dbArg(c)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") {
		return dryRun(c, ss, dbPath)
	}
	st, err := openSearchDB(c.Context, dbPath, log)
	if err != nil {
		return err
	}
	defer st.Close()
	if c.Bool("resume") && !c.Bool("new-study") {
		if err := checkResumable(c.Context, st, ss.key); err != nil {
			return err
		}
	}
	study, err := st.EnsureStudy(c.Context, ss.key)
	if err != nil {
		return err
	}
	// One search per study: a second one would stop the first one's engine
	// (taken for a stale one) and measure configs twice.
	unlock, stale, err := st.lockStudy(c.Context, study.ID)
	if err != nil {
		return err
	}
	defer unlock()
	if stale != "" {
		fmt.Fprintf(c.App.ErrWriter, "note: the previous search of study %s, %s, ended without releasing its lock (the process is gone); taking it over\n", study.ID, stale)
	}
	own, other, err := history(c.Context, st, ss.key, study.ID)
	if err != nil {
		return err
	}
	ss.applyPrune(own, other, c.Bool("no-prune"))
	prop, err := newProposer(c, ss, other, log)
	if err != nil {
		return err
	}
	ss.logDir = c.String("log-dir")
	if ss.logDir == "" {
		ss.logDir = filepath.Join(dataDir(dbPath), "logs", study.ID)
	}
	runner, closeRunner, err := newRunner(c, ss, log)
	if err != nil {
		return err
	}
	defer closeRunner()

	cfg := ss.loop
	cfg.Study = study.ID
	cfg.Workload, cfg.SLO, cfg.Metrics, cfg.Default = ss.workload, ss.slo, ss.metrics, ss.space.DefaultConfig()
	cfg.Enqueue = ss.enqueue
	cfg.Progress, cfg.Terminal, cfg.Logger = c.App.ErrWriter, writerIsTerminal(c.App.ErrWriter), log
	cfg.Width = terminalWidth(c.App.ErrWriter)
	loop, err := tuner.New(cfg, runner, prop, tuner.StudyStore{Store: st, Study: study.ID})
	if err != nil {
		return asUsage(err)
	}
	w := c.App.Writer
	if !c.Bool("json") {
		fmt.Fprintf(w, "study %s: %s, engine %s, workload %s, SLO %s; db %s\n", study.ID, ss.target.Describe(), ss.engine, ss.workload.Name, orDash(ss.slo.String()), st.Path())
		if ss.prune.Skipped == "" {
			fmt.Fprintf(w, "pruned %.0f%% of the space from %.0f observations (see `tuner search --dry-run`)\n", ss.prune.VolumeRemoved*100, ss.prune.Evidence)
		}
	}
	rep, err := loop.Run(c.Context)
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

func newProposer(c *cli.Context, ss *searchSetup, other []search.Observation, log *slog.Logger) (tuner.SearchProposer, error) {
	pc := search.DefaultProposerConfig()
	pc.Space = ss.pruned
	if pc.Space == nil {
		pc.Space = ss.space
	}
	pc.Sampler = search.SamplerKind(c.String("sampler"))
	pc.Seed = c.Uint64("seed")
	pc.Objectives = ss.metrics.Objectives()
	pc.SLO = ss.slo
	pc.History = other
	pc.Logger = log
	if !c.Bool("no-surrogate") {
		so := surrogate.DefaultOptions()
		so.Seed = c.Uint64("seed")
		sc, err := search.NewSurrogateScorer(pc.Space, ss.workload, pc.Objectives, ss.slo, so)
		if err != nil {
			return tuner.SearchProposer{}, err
		}
		if ref := c.String("surrogate"); ref != "" {
			prior, err := loadPrior(c, ref)
			if err != nil {
				return tuner.SearchProposer{}, err
			}
			if err := sc.SetPrior(prior, search.DefaultPriorWeight, pc.Space); err != nil {
				return tuner.SearchProposer{}, usagef("--surrogate %s: %v", ref, err)
			}
			pc.MinScreenHistory = 1 // the prior steers from the first trial after vLLM's default
		}
		pc.Scorer = sc
	} else if c.IsSet("surrogate") {
		return tuner.SearchProposer{}, usagef("--surrogate and --no-surrogate exclude each other")
	}
	p, err := search.NewProposer(pc)
	if err != nil {
		return tuner.SearchProposer{}, asUsage(err)
	}
	return tuner.SearchProposer{Proposer: p}, nil
}

// loadPrior reads --surrogate: a model file (as the store keeps models) when
// the path exists, else a model stored in the database under that name.
func loadPrior(c *cli.Context, ref string) (*surrogate.Surrogate, error) {
	var blob []byte
	if _, err := os.Stat(ref); err == nil {
		if blob, err = readCapped(ref, surrogate.DefaultLimits().MaxBytes); err != nil {
			return nil, usagef("--surrogate %s: %v", ref, err)
		}
	} else {
		dbPath, err := studyDBPath(c)
		if err != nil {
			return nil, err
		}
		st, err := store.Open(c.Context, dbPath, store.Options{ReadOnly: true, Timeout: 10 * time.Second})
		if err != nil {
			return nil, usagef("--surrogate %s: no such file, and no database to look the name up in (%v)", ref, err)
		}
		defer st.Close()
		blob, _, err = st.GetModel(c.Context, ref)
		if errors.Is(err, store.ErrNotFound) {
			return nil, usagef("--surrogate %s: no such file or stored model (tuner surrogate list)", ref)
		}
		if err != nil {
			return nil, err
		}
	}
	m, err := surrogate.Unmarshal(blob)
	if err != nil {
		return nil, usagef("--surrogate %s: %v", ref, err)
	}
	return m, nil
}

// newRunner builds the runner of --engine.
func newRunner(c *cli.Context, ss *searchSetup, log *slog.Logger) (tuner.Runner, func(), error) {
	switch ss.engine {
	case engineSimVirtual:
		sc := sim.DefaultConfig()
		sc.Target = ss.target
		sc.Noise = true
		sc.Seed = c.Uint64("seed")
		r, err := sim.NewFreshNoiseRunner(sc)
		if err != nil {
			return nil, nil, err
		}
		return r, func() {}, nil
	default:
		return newProcessRunner(c, ss, log)
	}
}

// applyPrune prunes the space over the study's own and the other studies'
// observations with the package's default settings (the ones the
// search-quality benchmark measures) for this study's objectives and SLO.
func (ss *searchSetup) applyPrune(own, other []search.Observation, disabled bool) {
	o := search.DefaultPruneOptions()
	o.Disabled, o.Objectives, o.SLO = disabled, ss.metrics.Objectives(), ss.slo
	ss.pruned, ss.prune = search.Prune(ss.space, slices.Concat(own, other), o)
}

// dryRun prints the effective space, the first proposals and their exact
// command lines; it opens the database read-only (when it exists) for the
// pruning history and starts nothing.
func dryRun(c *cli.Context, ss *searchSetup, dbPath string) error {
	w := c.App.Writer
	var own, other []search.Observation
	if st, err := openHistory(c.Context, dbPath); err == nil {
		own, other, err = history(c.Context, st, ss.key, ss.key.ID())
		st.Close()
		if err != nil {
			return err
		}
	}
	ss.applyPrune(own, other, c.Bool("no-prune"))
	fmt.Fprintf(w, "dry run: study %s, engine %s, workload %s, SLO %s, objectives %s\n\n", ss.key.ID(), ss.engine, ss.workload.Name, orDash(ss.slo.String()), ss.metrics.Objectives())
	if err := printSpace(w, ss.pruned, false); err != nil {
		return err
	}
	fmt.Fprintln(w)
	printPrune(w, ss.prune)
	prop, err := newProposer(c, ss, other, cmdLogger(c))
	if err != nil {
		return err
	}
	for _, o := range own {
		prop.Tell(o.Config, o.Result)
	}
	n := c.Int("proposals")
	if ss.engine == engineSimVirtual {
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
		fmt.Fprintf(w, "  %d. config %s: %s\n", i+1, cfg.ID(), shellJoin(trial.RedactArgs(ss.engineCommand(cfg))))
	}
	if len(ss.engineEnv) > 0 {
		env := make([]string, len(ss.engineEnv))
		for i, kv := range ss.engineEnv {
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

// shellJoin quotes arguments that need it for a POSIX shell.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\r\n'\"\\$`*?[]{}()<>|&;#~!") {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		} else {
			out[i] = a
		}
	}
	return strings.Join(out, " ")
}

// printReport writes the final summary.
func printReport(w io.Writer, rep tuner.Report, ss *searchSetup) {
	fmt.Fprintf(w, "\nstudy %s: %d search trials, %d re-measurements (%d failed), %s; this run: %d trials in %s\n",
		rep.Study, rep.SearchTrials, rep.RepeatTrials, rep.FailedTrials, rep.StopReason, rep.RanThisRun, rep.Elapsed.Round(time.Second))
	m := rep.Metrics
	r := rep.Recommended
	def := ss.space.DefaultConfig()
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
	switch {
	case rep.RecommendedIsDefault:
		fmt.Fprintf(w, "  keep vLLM's defaults: no measured config ranks above them\n")
	case rep.Gain != nil:
		fmt.Fprintf(w, "  %s %s over vLLM's default config: %s\n", rep.Gain, m.Throughput, rep.Gain.Verdict())
	case rep.GainPct != nil:
		fmt.Fprintf(w, "  %+.1f%% %s over vLLM's default config\n", *rep.GainPct, m.Throughput)
	}
	fmt.Fprintf(w, "  %s\n", shellJoin(append([]string{"vllm", "serve", ss.modelArg}, r.Config.Flags()...)))
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

var execLookPath = exec.LookPath

// workloadKey names the workload in the study key: a load sent to the chat
// endpoint is another measurement than the same load on completions.
func workloadKey(w trial.Workload) string {
	if w.Endpoint == trial.EndpointChat {
		return w.Name + "+chat-endpoint"
	}
	return w.Name
}

// loadWorkloadArg reads --workload: a built-in name or a YAML file. Bad
// files are usage errors naming the line and field.
// longestRequest is the most tokens (prompt + output) one request of the
// workload asks for: the longest of the requests a trial sends, else the
// distributions' bounds.
func longestRequest(w *trial.Workload) int {
	n := 0
	for _, r := range w.Requests() {
		n = max(n, r.PromptLen+r.OutputLen)
	}
	if n == 0 {
		n = w.PrefixLen + w.Prompt.MaxValue() + w.Output.MaxValue()
	}
	return n
}

func loadWorkloadArg(arg string) (trial.Workload, error) {
	w, err := trial.LoadWorkload(arg)
	if err != nil {
		return trial.Workload{}, usagef("--workload: %w", err)
	}
	return w, nil
}

// The runners of the three engines satisfy the loop's Runner.
var (
	_ tuner.Runner = (*trial.Runner)(nil)
	_ tuner.Runner = (*sim.Runner)(nil)
)

// newProcessRunner runs trials as real engine processes (vllm or vllm-sim)
// through package trial.
func newProcessRunner(c *cli.Context, ss *searchSetup, log *slog.Logger) (tuner.Runner, func(), error) {
	rc := trial.DefaultConfig()
	rc.Command = ss.baseCommand()
	rc.ExtraArgs = ss.engineArg
	rc.Env = ss.engineEnv
	rc.LogDir = ss.logDir
	rc.Logger = log
	rc.GPUIdentity = trial.GPUIdentity{Name: ss.target.GPU.Name, Count: ss.target.GPUCount, MemoryGiB: ss.target.GPU.MemoryGiB}
	rc.Stability.MaxExtensions = ss.extend
	rc.StartupTimeout = ss.startupTimeout
	rc.MaxLogBytes = int64(c.Int("engine-log-mib")) << 20
	r, err := trial.NewRunner(rc)
	if err != nil {
		return nil, nil, err
	}
	return r, func() { r.Close() }, nil
}
