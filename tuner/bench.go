package tuner

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
	"time"

	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/sim"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/dbopen"
	"github.com/vllm-tuner/tuner/trial"
)

// BenchConfigDefault is the --config value that starts the engine with
// vLLM's defaults (no flags): the baseline a tuned config is compared with.
const BenchConfigDefault = "default"

// BenchSpec is one benchmark job: the options of `tuner bench run` as a
// typed, JSON-tagged value. The CLI fills it from flags, the service from a
// request body; Resolve validates it with the same code and messages (they
// name the CLI flag) for both.
type BenchSpec struct {
	// The matrix: a file (Matrix), the document itself (MatrixYAML), or the
	// tier's preset when both are empty.
	Matrix     string `json:"matrix,omitempty"`
	MatrixYAML string `json:"matrix_yaml,omitempty"`
	Tier       string `json:"tier,omitempty"`
	// Models are the models of a release-tier run (one run each).
	Models []string `json:"models,omitempty"`
	// Config to start: a --config YAML file, a trial ID, a stored config
	// ID (prefix), or "default" (vLLM's defaults). URL instead benchmarks a
	// running server and starts nothing.
	Config string `json:"config,omitempty"`
	// Engine: vllm, sim (vllm-sim processes) or sim-virtual (vllm-sim
	// in-process, levels measured on its virtual clock: no child
	// process); "" is vllm.
	Engine         string   `json:"engine,omitempty"`
	URL            string   `json:"url,omitempty"`
	Model          string   `json:"model,omitempty"`
	GPU            string   `json:"gpu,omitempty"`
	GPUs           int      `json:"gpus"`
	Labels         []string `json:"labels,omitempty"` // k=v
	RestartPerCell bool     `json:"restart_per_cell,omitempty"`
	Telemetry      string   `json:"telemetry"`
	RequestTimeout Duration `json:"request_timeout"`
	StartupTimeout Duration `json:"startup_timeout"`
	EngineArgs     []string `json:"engine_args,omitempty"`
	VLLM           string   `json:"vllm"`
	VLLMSim        string   `json:"vllm_sim,omitempty"`
	LogDir         string   `json:"log_dir,omitempty"`
	// Endpoint sends every cell's load to completions or chat; "" leaves
	// each cell's own (its workload's endpoint:, else completions). A cell
	// naming the other one is a usage error.
	Endpoint string `json:"endpoint,omitempty"`

	// Lookup opens the database to find a trial or config ID that Config
	// names (the CLI opens it read-only on demand); nil: IDs are not found.
	Lookup func(ctx context.Context) (store.DB, func(), error) `json:"-"`
}

// DefaultBenchSpec returns the defaults of `tuner bench run`'s flags.
func DefaultBenchSpec() BenchSpec {
	return BenchSpec{GPUs: 1, Telemetry: "auto", RequestTimeout: Duration(5 * time.Minute),
		StartupTimeout: Duration(15 * time.Minute), VLLM: "vllm"}
}

// Bench is a resolved BenchSpec: everything a benchmark needs before the
// store is opened.
type Bench struct {
	Spec   BenchSpec
	Engine string // vllm, sim, sim-virtual or url
	Matrix bench.Matrix
	Labels map[string]string
	// Models get one run each: the release tier's list, else one entry
	// (possibly "" for a --url run that reads it from /v1/models).
	Models []string
	// Flags are the engine flags of the config (and Config it, when it
	// came from a stored trial); ConfigModel the model that trial ran.
	Flags       []string
	Config      *spaces.Config
	ConfigModel string
	EnginePath  string
	EngineArgs  []string
}

// Validate reports the first problem of the spec as a usage error, as
// Resolve does, without keeping the result.
func (s BenchSpec) Validate(ctx context.Context) error {
	_, err := s.Resolve(ctx)
	return err
}

// Resolve validates the spec: the tier and its models, the matrix, the
// labels, the telemetry mode, the server (a URL, or a config to start with
// its engine). It reads the files the spec names but opens no database
// (except through Lookup) and starts nothing.
func (s BenchSpec) Resolve(ctx context.Context) (*Bench, error) {
	b := &Bench{Spec: s, Engine: s.Engine}
	switch {
	case s.Tier != "release" && len(s.Models) > 0:
		return nil, Usagef("--models is for --tier release")
	case s.Tier == "release" && s.Model != "":
		return nil, Usagef("--tier release takes its models from --models, not --model")
	case s.Tier == "release" && len(s.Models) == 0:
		return nil, Usagef("--tier release needs --models FILE (one model a line)")
	case s.Tier == "release":
		b.Models = s.Models
	default:
		b.Models = []string{s.Model}
	}
	var err error
	if b.Matrix, err = s.matrix(); err != nil {
		return nil, err
	}
	if err := s.applyEndpoint(&b.Matrix); err != nil {
		return nil, err
	}
	if b.Labels, err = ParseLabels(s.Labels, false); err != nil {
		return nil, err
	}
	switch s.Telemetry {
	case "none", "engine", "auto", "nvml":
	default:
		return nil, Usagef("--telemetry %q: want auto, nvml, engine or none", s.Telemetry)
	}
	if s.RequestTimeout <= 0 {
		return nil, Usagef("--request-timeout %s: must be > 0", s.RequestTimeout.Std())
	}
	if s.GPUs < 1 {
		return nil, Usagef("--gpus must be >= 1")
	}
	switch {
	case s.URL != "" && s.Config != "":
		return nil, Usagef("--url and --config exclude each other (benchmark a running server, or start one)")
	case s.URL != "":
		if s.Engine != "" || s.RestartPerCell {
			return nil, Usagef("--url starts nothing: --engine and --restart-per-cell do not apply")
		}
		if _, err := bench.URLLauncher(s.URL, s.Model, nil); err != nil {
			return nil, AsUsage(err)
		}
		b.Engine = "url"
		return b, nil
	case s.Config == "":
		return nil, Usagef("bench run needs --config (start an engine) or --url (a running server)")
	}
	if b.Flags, b.Config, b.ConfigModel, err = s.resolveConfig(ctx); err != nil {
		return nil, err
	}
	for i, m := range b.Models {
		if m == "" {
			b.Models[i] = b.ConfigModel
		}
		if b.Models[i] == "" {
			return nil, Usagef("--config %s: give --model (the config does not name one)", s.Config)
		}
	}
	if s.StartupTimeout <= 0 {
		return nil, Usagef("--startup-timeout %s: must be > 0", s.StartupTimeout.Std())
	}
	if b.EngineArgs, err = CheckEngineArgs(s.EngineArgs); err != nil {
		return nil, err
	}
	switch b.Engine {
	case "", EngineVLLM:
		b.Engine = EngineVLLM
		if _, err := exec.LookPath(s.VLLM); err != nil {
			return nil, Usagef("--engine vllm: %s not found (install vLLM, pass --vllm PATH, or use --engine sim): %v", s.VLLM, err)
		}
		b.EnginePath = s.VLLM
	case EngineSim:
		if s.GPU == "" {
			return nil, Usagef("--engine sim needs --gpu (the simulated GPU)")
		}
		if b.EnginePath, err = FindVLLMSim(s.VLLMSim); err != nil {
			return nil, err
		}
	case EngineSimVirtual:
		if s.GPU == "" {
			return nil, Usagef("--engine sim-virtual needs --gpu (the simulated GPU)")
		}
		for _, m := range b.Models {
			if _, err := b.simOptions(m); err != nil {
				return nil, err
			}
		}
	default:
		return nil, Usagef("--engine %q: want vllm, sim or sim-virtual", b.Engine)
	}
	return b, nil
}

// matrix reads --matrix, the inline matrix, or the tier's preset.
func (s BenchSpec) matrix() (bench.Matrix, error) {
	switch {
	case s.Matrix != "" && s.MatrixYAML != "":
		return bench.Matrix{}, Usagef("--matrix and matrix_yaml exclude each other")
	case s.Matrix != "":
		m, err := bench.LoadMatrix(s.Matrix)
		return m, AsUsage(err)
	case s.MatrixYAML != "":
		m, err := bench.ParseMatrix("matrix_yaml", []byte(s.MatrixYAML))
		if err != nil {
			return m, AsUsage(err)
		}
		for _, c := range m.Cells {
			if c.Workload.ShareGPT != "" {
				return m, Usagef("matrix_yaml: cell %s names a ShareGPT file (%s): give the matrix as a file (--matrix)", c.Name, c.Workload.ShareGPT)
			}
		}
		return m, nil
	case s.Tier == "":
		return bench.Matrix{}, Usagef("bench run needs --matrix FILE or --tier smoke|nightly|release")
	case !bench.IsTier(s.Tier):
		return bench.Matrix{}, Usagef("--tier %q: want smoke, nightly or release (or give --matrix)", s.Tier)
	}
	m, err := bench.TierMatrix(s.Tier)
	return m, AsUsage(err)
}

// applyEndpoint sends every cell of m to --endpoint (bench.Matrix.SetEndpoint).
func (s BenchSpec) applyEndpoint(m *bench.Matrix) error {
	if s.Endpoint == "" {
		return nil
	}
	ep, err := trial.ParseEndpoint(s.Endpoint)
	if err != nil {
		return Usagef("--endpoint: %v", err)
	}
	if err := m.SetEndpoint(ep); err != nil {
		return Usagef("--endpoint %s: %v", ep, err)
	}
	return nil
}

// ParseLabels reads k=v labels (k alone too when allowBare: "any value").
func ParseLabels(kvs []string, allowBare bool) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if k == "" || (!ok && !allowBare) {
			return nil, Usagef("--label %q: want KEY=VALUE", kv)
		}
		out[k] = v
	}
	return out, nil
}

// TrialIDPattern is the shape of a stored trial's ID.
var TrialIDPattern = regexp.MustCompile(`^[0-9a-f]{12}-[0-9]+$`)

// resolveConfig reads --config: "default", a YAML file, a trial ID, or a
// config ID (prefix) of a stored trial. It returns the engine flags and the
// model the trial ran (if any).
func (s BenchSpec) resolveConfig(ctx context.Context) (flags []string, cfg *spaces.Config, model string, err error) {
	arg := s.Config
	if _, serr := os.Stat(arg); serr == nil {
		flags, err = bench.ConfigFileFlags(arg)
		return flags, nil, "", AsUsage(err)
	}
	if arg == BenchConfigDefault {
		return nil, nil, "", nil
	}
	if s.Lookup == nil {
		return nil, nil, "", Usagef("--config %s: not a file, a trial ID or a stored config ID", arg)
	}
	st, done, err := s.Lookup(ctx)
	if err != nil {
		return nil, nil, "", Usagef("--config %s: not a file, and no database to look it up: %v", arg, err)
	}
	defer done()
	var tr *store.Trial
	if TrialIDPattern.MatchString(arg) {
		t, err := st.Trial(ctx, arg)
		if err != nil {
			return nil, nil, "", Usagef("--config %s: %v", arg, err)
		}
		tr = &t
	} else {
		studies, err := st.Studies(ctx)
		if err != nil {
			return nil, nil, "", err
		}
		for _, sd := range studies {
			ts, err := st.Trials(ctx, sd.ID, store.TrialFilter{})
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
			return nil, nil, "", Usagef("--config %s: not a file, a trial ID or a stored config ID", arg)
		}
	}
	if tr.Result == nil {
		return nil, nil, "", Usagef("--config %s: trial has no config", arg)
	}
	if study, err := st.Study(ctx, tr.StudyID); err == nil {
		model = study.Key.Model
	}
	cf := tr.Result.Config
	return cf.Flags(), &cf, model, nil
}

// simArgs is the vllm-sim command line (without the program) of model.
func (b *Bench) simArgs(model string) []string {
	return slices.Concat([]string{"serve", model, "--gpu", b.Spec.GPU, "--gpu-count", fmt.Sprint(b.Spec.GPUs)}, b.Flags, b.EngineArgs)
}

// simOptions parses the in-process simulator's options as vllm-sim would
// (so bad flags are the same errors); it listens on a free loopback port
// and starts at once unless --startup-scale is given.
func (b *Bench) simOptions(model string) (sim.ServeOptions, error) {
	args := b.simArgs(model)[1:]
	o, err := sim.ParseServeArgs(args)
	if err != nil {
		return o, Usagef("--engine sim-virtual: %v", err)
	}
	o.Host, o.Port = "127.0.0.1", 0
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--startup-scale") }) {
		o.StartupScale = 0
	}
	return o, nil
}

// BenchStartConfig is what a door adds to a resolved benchmark to run it.
type BenchStartConfig struct {
	Logger     *slog.Logger
	Progress   io.Writer            // progress lines; nil = none
	OnProgress func(bench.Progress) // nil = none
	// OnRun receives each run as it ends (stored: run != nil), before the
	// next model of a release tier starts.
	OnRun func(run *store.Run, err error)
	// Env is added to the engine's environment (the service sets
	// CUDA_VISIBLE_DEVICES of a GPU set here).
	Env []string
	// DataDir is where files beside the database go (engine logs); "":
	// dbopen.DataDir of the database's Path.
	DataDir string
}

// Run benchmarks the setup over the matrix, one stored run per model (one
// unless the release tier), and returns the runs stored. It stops at the
// first error; a stopped run is stored partial with its finished cells.
func (b *Bench) Run(ctx context.Context, db store.DB, sc BenchStartConfig) ([]*store.Run, error) {
	log := sc.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var runs []*store.Run
	for i, model := range b.Models {
		if len(b.Models) > 1 && sc.Progress != nil {
			fmt.Fprintf(sc.Progress, "release: model %d of %d: %s\n", i+1, len(b.Models), model)
		}
		r, err := b.runOne(ctx, db, sc, log, model)
		if r != nil {
			runs = append(runs, r)
		}
		if sc.OnRun != nil {
			sc.OnRun(r, err)
		}
		if err != nil {
			if len(b.Models) > 1 {
				err = fmt.Errorf("release tier, model %s: %w", model, err)
			}
			return runs, err
		}
	}
	return runs, nil
}

func (b *Bench) runOne(ctx context.Context, db store.DB, sc BenchStartConfig, log *slog.Logger, model string) (*store.Run, error) {
	s := b.Spec
	cfg := bench.DefaultConfig()
	cfg.Logger, cfg.Progress, cfg.OnProgress, cfg.RestartPerCell = log, sc.Progress, sc.OnProgress, s.RestartPerCell
	cfg.RequestTimeout = s.RequestTimeout.Std()
	cfg.Run = store.Run{Tier: s.Tier, Labels: b.Labels, Model: model, GPU: trial.GPUIdentity{Name: s.GPU, Count: s.GPUs}, Config: b.Config}
	switch s.Telemetry {
	case "none":
		cfg.ScrapeEvery = 0
	case "auto", "nvml":
		if src, err := trial.OpenNVML(); err == nil {
			defer src.Close()
			cfg.GPU = src
			if id, err := src.Identity(); err == nil && b.Engine != "url" && b.Engine != EngineSimVirtual {
				cfg.Run.GPU = id
			}
		} else if s.Telemetry == "nvml" {
			return nil, fmt.Errorf("--telemetry nvml: %w", err)
		}
	}
	cfg.Run.Engine = b.Engine
	switch b.Engine {
	case "url":
		l, err := bench.URLLauncher(s.URL, model, log)
		if err != nil {
			return nil, AsUsage(err)
		}
		cfg.Launch, cfg.Run.URL = l, s.URL
	case EngineSimVirtual:
		o, err := b.simOptions(model)
		if err != nil {
			return nil, err
		}
		cfg.Launch = simLauncher(o, append([]string{"vllm-sim"}, b.simArgs(model)...), log)
	default:
		command := []string{b.EnginePath, "serve", model}
		if b.Engine == EngineSim {
			command = append([]string{b.EnginePath}, b.simArgs(model)[:6]...)
		}
		logDir := s.LogDir
		if logDir == "" {
			dir := sc.DataDir
			if dir == "" {
				dir = dbopen.DataDir(db.Path())
			}
			logDir = filepath.Join(dir, "logs", "bench")
		}
		if err := os.MkdirAll(logDir, 0o755); err != nil {
			return nil, err
		}
		cfg.Launch = bench.EngineLauncher(trial.EngineConfig{Command: command, Flags: slices.Concat(b.Flags, b.EngineArgs),
			Host: "127.0.0.1", StopGrace: 10 * time.Second, Logger: log, Env: sc.Env}, s.StartupTimeout.Std(), logDir)
	}
	return bench.Execute(ctx, cfg, b.Matrix, db)
}

// StartSim serves the simulator in this process on o's address until ctx
// ends or stop is called; base is its URL, exited closes when it stops.
func StartSim(ctx context.Context, o sim.ServeOptions) (base string, stop func(), exited <-chan struct{}, err error) {
	sctx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		done <- sim.Serve(sctx, o, io.Discard, sim.OnReady(func(addr string) { ready <- addr }))
	}()
	stop = func() { cancel(); <-gone }
	select {
	case addr := <-ready:
		return "http://" + addr, stop, gone, nil
	case err := <-done:
		cancel()
		return "", nil, nil, fmt.Errorf("simulator: %w", err)
	case <-ctx.Done():
		stop()
		return "", nil, nil, ctx.Err()
	case <-time.After(30 * time.Second):
		stop()
		return "", nil, nil, errors.New("simulator not ready after 30 s")
	}
}

// simLauncher starts the in-process simulator and reads it as a running
// server (model and version from its API).
func simLauncher(o sim.ServeOptions, command []string, log *slog.Logger) bench.Launcher {
	return func(ctx context.Context) (bench.Server, bench.ServerInfo, error) {
		base, stop, exited, err := StartSim(ctx, o)
		if err != nil {
			return nil, bench.ServerInfo{}, err
		}
		l, err := bench.URLLauncher(base, "", log)
		if err != nil {
			stop()
			return nil, bench.ServerInfo{}, err
		}
		srv, info, err := l(ctx)
		if err != nil {
			stop()
			return nil, bench.ServerInfo{}, err
		}
		info.Flags = command
		ss := simServer{Server: srv, stop: stop, exited: exited}
		if o.RuntimeFaults() {
			return ss, info, nil // faults are simulated by the live server only
		}
		vl, err := sim.NewVirtualLevels(o)
		if err != nil {
			ss.Stop()
			return nil, bench.ServerInfo{}, err
		}
		return virtualSimServer{simServer: ss, levels: vl, scale: o.TimeScale}, info, nil
	}
}

// virtualSimServer measures the in-process simulator's levels on its
// virtual clock (the HTTP server answers health and identity), so a
// sim-virtual benchmark does not depend on the machine's load: on a busy
// machine the real-clock server's latencies were mostly scheduling delay
// and a 40% slower engine could read as unchanged. Each level then takes
// its simulated time on the wall clock (x --time-scale), as served live.
type virtualSimServer struct {
	simServer
	levels *sim.VirtualLevels
	scale  float64
}

var _ bench.VirtualServer = virtualSimServer{}

func (s virtualSimServer) MeasureLevel(ctx context.Context, idx int, v float64, lw trial.Workload, sc trial.StabilityConfig, slo trial.SLO) (*trial.MeasuredLevel, error) {
	l, err := s.levels.Measure(ctx, idx, v, lw, sc, slo)
	if l == nil || s.scale <= 0 {
		return l, err
	}
	if perr := pace(ctx, l.ElapsedS, s.scale); perr != nil {
		return nil, perr
	}
	return l, err
}

// simServer is the in-process simulator as a bench.Server: Stop ends it.
type simServer struct {
	bench.Server
	stop   func()
	exited <-chan struct{}
}

var _ bench.Server = simServer{}

func (s simServer) Exited() <-chan struct{} { return s.exited }
func (s simServer) Stop() error {
	err := s.Server.Stop()
	s.stop()
	return err
}
