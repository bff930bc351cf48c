package tuner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/search"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// Engines a SearchSpec accepts.
const (
	EngineVLLM       = "vllm"
	EngineSim        = "sim"
	EngineSimVirtual = "sim-virtual"
)

// TargetSpec names the model and GPU setup of a search or a space, as the
// CLI's target flags do (--model, --gpu, --gpus, --max-model-len,
// --engine-version, --profiles).
type TargetSpec struct {
	Model         string `json:"model"`
	GPU           string `json:"gpu"`
	GPUs          int    `json:"gpus"`
	MaxModelLen   *int   `json:"max_model_len,omitempty"`
	EngineVersion string `json:"engine_version,omitempty"`
	Profiles      string `json:"profiles,omitempty"`

	// DetectGPU names the local GPU when GPU is empty (the CLI asks NVML);
	// nil: GPU is required.
	DetectGPU func() (string, error) `json:"-"`
	// Notes receives remarks for the user (a model read from config.json
	// rather than the catalog); nil discards them.
	Notes io.Writer `json:"-"`
}

// ResolveTarget turns the target options into a spaces.Target; ok is false
// when neither a model nor a GPU was given. Errors are usage errors that
// name the CLI flag.
func (ts TargetSpec) ResolveTarget() (spaces.Target, bool, error) {
	model, gpu := ts.Model, ts.GPU
	if model == "" && gpu == "" {
		return spaces.Target{}, false, nil
	}
	if model == "" {
		return spaces.Target{}, false, Usagef("--model and --gpu go together")
	}
	cat := spaces.DefaultCatalog()
	if p := ts.Profiles; p != "" {
		var err error
		if cat, err = spaces.LoadCatalogFile(p); err != nil {
			return spaces.Target{}, false, AsUsage(err)
		}
	}
	if gpu == "" {
		if ts.DetectGPU == nil {
			return spaces.Target{}, false, Usagef("--model and --gpu go together")
		}
		var err error
		if gpu, err = ts.DetectGPU(); err != nil {
			return spaces.Target{}, false, Usagef("--model and --gpu go together: %v; pass --gpu", err)
		}
	}
	// A model the catalog lacks is read from its config.json (a local
	// directory or the Hugging Face cache), as vLLM itself would.
	home, _ := os.UserHomeDir()
	m, source, err := cat.ModelOrHF(model, spaces.HFCacheDir(os.Getenv, home))
	if err != nil {
		return spaces.Target{}, false, AsUsage(err)
	}
	if source != "catalog" && ts.Notes != nil {
		fmt.Fprintf(ts.Notes, "model %s: not in the catalog, facts read from %s (%d layers, %.2fB parameters)\n", model, source, m.Layers, m.ParamsB)
	}
	g, err := cat.GPU(gpu)
	if err != nil {
		return spaces.Target{}, false, AsUsage(fmt.Errorf("%w; pass --profiles FILE with a gpus: entry for it", err))
	}
	t := spaces.Target{Model: m, GPU: g, GPUCount: max(1, ts.GPUs)}
	if ts.GPUs < 1 {
		return spaces.Target{}, false, Usagef("--gpus must be >= 1")
	}
	// The lower bound is the default space's (a shorter max_model_len is
	// outside the range every config is checked against).
	minLen := 1
	if ds, err := spaces.Default(); err == nil {
		if p, ok := ds.Param("max_model_len"); ok {
			minLen = int(p.Min)
		}
	}
	if ts.MaxModelLen != nil {
		if n := *ts.MaxModelLen; n < minLen || n > m.MaxPositionEmbeddings {
			return spaces.Target{}, false, Usagef("--max-model-len %d outside %d..%d (%s's max_position_embeddings)", n, minLen, m.MaxPositionEmbeddings, m.Name)
		}
		t.MaxModelLen = *ts.MaxModelLen
	}
	t.EngineVersion = ts.EngineVersion
	if t.EngineVersion != "" {
		if err := CheckEngineVersion(t.EngineVersion); err != nil {
			return spaces.Target{}, false, err
		}
	}
	return t, true, nil
}

// engineVersionRE is the shape of a vLLM (PEP 440) version: X.Y[.Z...] with
// optional pre-release, post, dev and local parts (0.11.0, 0.6.3.post1,
// 0.11.1rc2, 0.10.2.dev123+gabcdef.cu128).
var engineVersionRE = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)+((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[A-Za-z0-9]+(\.[A-Za-z0-9]+)*)?$`)

// CheckEngineVersion validates --engine-version: spaces.CompareVersions
// stops at the first non-numeric part (it reads 0.0.bogus as 0.0), so the
// whole string must look like a vLLM version too.
func CheckEngineVersion(v string) error {
	if !engineVersionRE.MatchString(v) {
		return Usagef("--engine-version %q: not a vLLM version (want X.Y.Z, e.g. %s)", v, spaces.DefaultEngineVersion)
	}
	if _, err := spaces.CompareVersions(v, "0"); err != nil {
		return Usagef("--engine-version %q: %v", v, err)
	}
	return nil
}

// LoadSpace reads a user space file (or the embedded default for "");
// bad files are usage errors.
func LoadSpace(path string) (*spaces.Space, error) {
	if path == "" {
		return spaces.Default()
	}
	s, err := spaces.Load(path)
	return s, AsUsage(err)
}

// SearchSpec is one search job: the options of `tuner search` as a typed,
// JSON-tagged value. The CLI fills it from flags, the service from a
// request body; Resolve validates it with the same code and messages (they
// name the CLI flag) for both.
type SearchSpec struct {
	TargetSpec
	Engine         string    `json:"engine"`
	Workload       string    `json:"workload"`
	Requests       *int      `json:"requests,omitempty"`
	Endpoint       string    `json:"endpoint,omitempty"`
	Duration       *Duration `json:"duration,omitempty"`
	Space          string    `json:"space,omitempty"`
	SLO            string    `json:"slo,omitempty"`
	Latency        string    `json:"latency"`
	Trials         int       `json:"trials"`
	Budget         Duration  `json:"budget"`
	TrialTimeout   Duration  `json:"trial_timeout"`
	Patience       int       `json:"patience"`
	Finalists      int       `json:"finalists"`
	Repeats        int       `json:"repeats"`
	Sampler        string    `json:"sampler"`
	Enqueue        []string  `json:"enqueue,omitempty"`
	Seed           uint64    `json:"seed"`
	Resume         bool      `json:"resume,omitempty"`
	NewStudy       bool      `json:"new_study,omitempty"`
	NoPrune        bool      `json:"no_prune,omitempty"`
	NoSurrogate    bool      `json:"no_surrogate,omitempty"`
	Surrogate      string    `json:"surrogate,omitempty"`
	DryRun         bool      `json:"dry_run,omitempty"`
	Proposals      int       `json:"proposals"`
	EngineArgs     []string  `json:"engine_args,omitempty"`
	EngineEnv      []string  `json:"engine_env,omitempty"`
	VLLM           string    `json:"vllm"`
	VLLMSim        string    `json:"vllm_sim,omitempty"`
	LogDir         string    `json:"log_dir,omitempty"`
	Extend         int       `json:"extend"`
	EngineLogMiB   int       `json:"engine_log_mib"`
	StartupTimeout Duration  `json:"startup_timeout"`
	// Worker names this process among the workers of a shared
	// (PostgreSQL) study; "" = hostname:pid.
	Worker string `json:"worker,omitempty"`
	// Lease is how long a shared study's trial stays claimed without a
	// heartbeat; 0 = DefaultLease.
	Lease Duration `json:"lease,omitempty"`
	// ScreenFraction measures each proposal first on this share of the
	// workload's requests and in full only when promising (Screening); 0
	// = off. ScreenKeep is Screening.Keep.
	ScreenFraction float64 `json:"screen_fraction,omitempty"`
	ScreenKeep     float64 `json:"screen_keep,omitempty"`
}

// DefaultSearchSpec returns the defaults of `tuner search`'s flags.
func DefaultSearchSpec() SearchSpec {
	d := DefaultConfig()
	return SearchSpec{
		TargetSpec:     TargetSpec{GPUs: 1},
		Engine:         EngineVLLM,
		Workload:       "chat",
		Latency:        "tpot_p99",
		Trials:         d.MaxTrials,
		Budget:         Duration(d.Budget),
		TrialTimeout:   Duration(d.TrialTimeout),
		Patience:       d.Patience,
		Finalists:      d.Finalists,
		Repeats:        d.Repeats,
		Sampler:        string(search.SamplerTPE),
		Seed:           1,
		Proposals:      5,
		VLLM:           "vllm",
		Extend:         trial.DefaultStabilityConfig().MaxExtensions,
		EngineLogMiB:   int(trial.DefaultMaxLogBytes >> 20),
		StartupTimeout: Duration(trial.DefaultConfig().StartupTimeout),
	}
}

// EngineEnvAllow are the environment names EngineEnv may set besides the
// VLLM_ and NCCL_ prefixes.
var EngineEnvAllow = []string{"CUDA_VISIBLE_DEVICES", "HF_HOME", "HF_HUB_OFFLINE", "HF_TOKEN", "PYTORCH_CUDA_ALLOC_CONF", "OMP_NUM_THREADS", "TOKENIZERS_PARALLELISM", "TRANSFORMERS_OFFLINE"}

// ParseEngineEnv checks K=V engine environment entries against the
// allowlist.
func ParseEngineEnv(kvs []string) ([]string, error) {
	var out []string
	for _, kv := range kvs {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, Usagef("--engine-env %q: want NAME=VALUE", kv)
		}
		allowed := strings.HasPrefix(k, "VLLM_") || strings.HasPrefix(k, "NCCL_")
		for _, a := range EngineEnvAllow {
			allowed = allowed || k == a
		}
		if !allowed {
			return nil, Usagef("--engine-env %s: not on the allowlist (%s, VLLM_*, NCCL_*)", k, strings.Join(EngineEnvAllow, ", "))
		}
		out = append(out, kv)
	}
	return out, nil
}

// Search is a resolved SearchSpec: everything a search needs before the
// store is opened.
type Search struct {
	Spec       SearchSpec
	Engine     string
	ModelArg   string // as the user wrote it (vllm serve takes the HF id)
	Target     spaces.Target
	Space      *spaces.Space // resolved, unpruned (the study key hashes it)
	Pruned     *spaces.Space
	Prune      search.PruneReport
	Workload   trial.Workload
	SLO        trial.SLO
	Metrics    Metrics
	Key        store.StudyKey
	EngineArgs []string
	EngineEnv  []string
	Enqueue    []spaces.Config // complete configs of the space
	EnginePath string
	// Loop holds the budget knobs (the study, workload and progress fields
	// are filled in by Start).
	Loop Config
}

// Validate reports the first problem of the spec as a usage error, as
// Resolve does, without keeping the result.
func (s SearchSpec) Validate() error {
	_, err := s.Resolve()
	return err
}

// Resolve validates the spec and resolves the target, space, workload, SLO,
// budgets and engine. It reads the files the spec names but opens no
// database and starts nothing.
func (s SearchSpec) Resolve() (*Search, error) {
	ss := &Search{Spec: s, Engine: s.Engine, ModelArg: s.Model}
	switch ss.Engine {
	case EngineVLLM, EngineSim, EngineSimVirtual:
	default:
		return nil, Usagef("--engine %q: want vllm, sim or sim-virtual", ss.Engine)
	}
	t, ok, err := s.ResolveTarget()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, Usagef("search needs --model and --gpu")
	}
	if t.EngineVersion == "" {
		t.EngineVersion = spaces.DefaultEngineVersion
	}
	if ss.Workload, err = trial.LoadWorkload(s.Workload); err != nil {
		return nil, Usagef("--workload: %w", err)
	}
	// LoRA tenants put the adapter slots into the space.
	t.Tenants, t.LoRARank = len(ss.Workload.Tenants), ss.Workload.MaxLoRARank()
	ss.Target = t
	sp, err := LoadSpace(s.Space)
	if err != nil {
		return nil, err
	}
	if ss.Space, err = sp.Resolve(t); err != nil {
		return nil, AsUsage(err)
	}
	if s.Requests != nil {
		if *s.Requests < 1 {
			return nil, Usagef("--requests must be >= 1")
		}
		ss.Workload.NumRequests = *s.Requests
	}
	if s.Duration != nil {
		if *s.Duration <= 0 {
			return nil, Usagef("--duration must be > 0")
		}
		ss.Workload.Duration = s.Duration.Std()
	}
	// Refuse up front what no config can run: weights larger than the
	// GPUs, or requests longer than max_model_len (HTTP 400 in every trial).
	if err := ss.Space.CheckWeights(); err != nil {
		return nil, AsUsage(err)
	}
	if err := ss.Space.FitRequests(longestRequest(&ss.Workload)); err != nil {
		return nil, AsUsage(fmt.Errorf("--workload %s: %w", ss.Workload.Name, err))
	}
	if s.Endpoint != "" {
		if ss.Workload.Endpoint, err = trial.ParseEndpoint(s.Endpoint); err != nil {
			return nil, Usagef("--endpoint: %v", err)
		}
	}
	ss.SLO = ss.Workload.SLO
	if v := s.SLO; v != "" {
		if ss.SLO, err = trial.ParseSLO(v); err != nil {
			return nil, Usagef("--slo: %v", err)
		}
	}
	ss.Workload.SLO = ss.SLO
	if ss.Workload.Feedback {
		if _, err := trial.FeedbackTarget(ss.SLO); err != nil {
			return nil, Usagef("--workload %s: %v", ss.Workload.Name, err)
		}
	}
	if err := search.ValidateLatency(s.Latency); err != nil {
		return nil, Usagef("--latency: %v", err)
	}
	ss.Metrics = Metrics{Throughput: "output_throughput", Latency: s.Latency}
	if _, err := search.ParseSampler(s.Sampler); err != nil {
		return nil, Usagef("--sampler: %v", err)
	}
	if ss.Loop, err = s.loopConfig(ss.Metrics); err != nil {
		return nil, err
	}
	if err := s.checkRunnerKnobs(); err != nil {
		return nil, err
	}
	if ss.EngineArgs, err = CheckEngineArgs(s.EngineArgs); err != nil {
		return nil, err
	}
	if ss.EngineEnv, err = ParseEngineEnv(s.EngineEnv); err != nil {
		return nil, err
	}
	if ss.Enqueue, err = ParseEnqueue(s.Enqueue, ss.Space); err != nil {
		return nil, err
	}
	if s.NoSurrogate && s.Surrogate != "" {
		return nil, Usagef("--surrogate and --no-surrogate exclude each other")
	}
	ss.Key = store.StudyKey{
		Model: t.Model.Name, GPU: t.GPU.Name, GPUCount: t.GPUCount, Engine: ss.Engine, EngineVersion: t.EngineVersion,
		Workload: WorkloadKey(ss.Workload), Objectives: ss.Metrics.Objectives(), SLO: ss.SLO.String(), SpaceHash: ss.Space.Hash(),
		ServedModel: ServedModel(ss.ModelArg, t.Model.Name),
	}
	switch ss.Engine {
	case EngineVLLM:
		ss.EnginePath = s.VLLM
		if !s.DryRun {
			if _, err := exec.LookPath(ss.EnginePath); err != nil {
				return nil, Usagef("--engine vllm: %s not found (install vLLM, pass --vllm PATH, or use --engine sim): %v", ss.EnginePath, err)
			}
		}
	case EngineSim:
		if ss.EnginePath, err = FindVLLMSim(s.VLLMSim); err != nil {
			return nil, err
		}
	}
	return ss, nil
}

// loopConfig reads the loop's budgets. A bad value is a usage error naming
// the flag, found before any database is opened or created.
func (s SearchSpec) loopConfig(m Metrics) (Config, error) {
	cfg := DefaultConfig()
	cfg.Metrics = m
	cfg.MaxTrials, cfg.Budget, cfg.TrialTimeout, cfg.Patience = s.Trials, s.Budget.Std(), s.TrialTimeout.Std(), s.Patience
	cfg.Finalists, cfg.Repeats, cfg.Resume = s.Finalists, s.Repeats, s.Resume
	cfg.Screen = Screening{Fraction: s.ScreenFraction, Keep: s.ScreenKeep}
	for _, f := range []struct {
		name string
		v    int
	}{{"trials", cfg.MaxTrials}, {"patience", cfg.Patience}, {"finalists", cfg.Finalists}, {"repeats", cfg.Repeats}} {
		if f.v < 0 {
			return cfg, Usagef("--%s %d: must be >= 0", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"budget", cfg.Budget}, {"trial-timeout", cfg.TrialTimeout}} {
		if f.v < 0 {
			return cfg, Usagef("--%s %s: must be >= 0 (0 = no limit)", f.name, f.v)
		}
	}
	if cfg.MaxTrials == 0 && cfg.Budget == 0 && cfg.Patience == 0 {
		return cfg, Usagef("--trials 0, --budget 0 and --patience 0: unbounded search (set at least one)")
	}
	if err := cfg.Screen.Validate(); err != nil {
		return cfg, Usagef("%v", err)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, AsUsage(err)
	}
	return cfg, nil
}

// checkRunnerKnobs checks the process runner's options: --startup-timeout
// must be positive (the runner would silently take its default for 0),
// --extend and --proposals not negative.
func (s SearchSpec) checkRunnerKnobs() error {
	if s.StartupTimeout <= 0 {
		return Usagef("--startup-timeout %s: must be > 0", s.StartupTimeout.Std())
	}
	if s.Extend < 0 {
		return Usagef("--extend %d: must be >= 0", s.Extend)
	}
	if s.Proposals < 0 {
		return Usagef("--proposals %d: must be >= 0", s.Proposals)
	}
	if s.EngineLogMiB <= 0 {
		return Usagef("--engine-log-mib %d: must be > 0", s.EngineLogMiB)
	}
	return nil
}

// ownedEngineFlags are the engine flags the runner sets itself: the tuner
// owns the listening address of every engine it starts.
var ownedEngineFlags = []string{"host", "port"}

// CheckEngineArgs rejects extra engine arguments that set a flag the
// runner owns, in every spelling vLLM's parser accepts: --port=1, --port
// followed by its value, a bare --host, and underscores for dashes.
func CheckEngineArgs(args []string) ([]string, error) {
	for _, a := range args {
		f := strings.Fields(a)
		if len(f) == 0 || !strings.HasPrefix(f[0], "--") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(f[0], "--"), "=")
		name = strings.ReplaceAll(name, "_", "-")
		if slices.Contains(ownedEngineFlags, name) {
			return nil, Usagef("--engine-arg %q: the tuner sets --host and --port of the engine itself (remove --%s)", a, name)
		}
	}
	return args, nil
}

// FindVLLMSim locates the vllm-sim binary: the option, next to this
// executable, then $PATH. A path that is missing, a directory or not
// executable is a usage error at startup, before anything is written.
func FindVLLMSim(path string) (string, error) {
	if path != "" {
		if err := checkExecutable(path); err != nil {
			return "", Usagef("--vllm-sim %s: %v", path, err)
		}
		return path, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "vllm-sim")
		if checkExecutable(p) == nil {
			return p, nil
		}
	}
	if p, err := exec.LookPath("vllm-sim"); err == nil {
		return p, nil
	}
	return "", Usagef("--engine sim: vllm-sim not found next to tuner or on PATH (build it with `make build` or pass --vllm-sim PATH)")
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

// ParseEnqueue reads enqueue values: vLLM flags, or @FILE with one line of
// flags per config ('#' starts a comment). Each becomes a complete config
// of the space (flags not given take vLLM's default) that must satisfy its
// ranges and constraints; errors are usage errors naming the value or the
// file and line.
func ParseEnqueue(vals []string, sp *spaces.Space) ([]spaces.Config, error) {
	var out []spaces.Config
	add := func(where, line string) error {
		args, err := SplitFlags(line)
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
		return Usagef("--enqueue %s: %w", where, err)
	}
	for _, v := range vals {
		file, ok := strings.CutPrefix(v, "@")
		if !ok {
			if err := add(fmt.Sprintf("%q", v), v); err != nil {
				return nil, err
			}
			continue
		}
		b, err := bounded.ReadFile(file, bounded.Default().Bytes)
		if err != nil {
			return nil, Usagef("--enqueue @%s: %w", file, err)
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

// SplitFlags splits a line of flags as a POSIX shell would for the quoting
// people paste ('...', "..." and backslash escapes), without expanding
// anything.
func SplitFlags(line string) ([]string, error) {
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

// ServedModel is the study key's ServedModel: the model argument when it
// names the model otherwise than the catalog does.
func ServedModel(arg, catalogName string) string {
	if strings.EqualFold(arg, catalogName) {
		return ""
	}
	return arg
}

// WorkloadKey names the workload in the study key: a load sent to the chat
// endpoint is another measurement than the same load on completions.
func WorkloadKey(w trial.Workload) string {
	if w.Endpoint == trial.EndpointChat {
		return w.Name + "+chat-endpoint"
	}
	return w.Name
}

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

// BaseCommand starts the engine without a candidate's flags.
func (ss *Search) BaseCommand() []string {
	switch ss.Engine {
	case EngineSim:
		return []string{ss.EnginePath, "serve", ss.ModelArg, "--gpu", ss.Target.GPU.Name, "--gpu-count", fmt.Sprint(ss.Target.GPUCount)}
	case EngineSimVirtual: // no process: the equivalent vllm-sim command, for --dry-run
		return []string{"vllm-sim", "serve", ss.ModelArg, "--gpu", ss.Target.GPU.Name, "--gpu-count", fmt.Sprint(ss.Target.GPUCount)}
	}
	return []string{ss.EnginePath, "serve", ss.ModelArg}
}

// EngineCommand is the engine's command line for cfg, without the host and
// port the runner adds: the base command, the candidate's flags, the
// workload's LoRA adapters, then the extra engine arguments unchanged.
func (ss *Search) EngineCommand(cfg spaces.Config) []string {
	return slices.Concat(ss.BaseCommand(), cfg.Flags(), ss.Workload.LoRAArgs(), ss.EngineArgs)
}

// ApplyPrune prunes the space over the study's own and the other studies'
// observations with the package's default settings (the ones the
// search-quality benchmark measures) for this study's objectives and SLO.
func (ss *Search) ApplyPrune(own, other []search.Observation) {
	o := search.DefaultPruneOptions()
	o.Disabled, o.Objectives, o.SLO = ss.Spec.NoPrune, ss.Metrics.Objectives(), ss.SLO
	ss.Pruned, ss.Prune = search.Prune(ss.Space, slices.Concat(own, other), o)
}

// History reads the finished trials of the same model and GPU from other
// studies (for pruning and warm start) and the study's own.
func History(ctx context.Context, st store.DB, key store.StudyKey, studyID string) (own, other []search.Observation, err error) {
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

// CheckResumable refuses a resume when no study has these options but a
// study of the same model and GPU setup does: a changed option (another
// SLO, workload or space) would otherwise start a new study at trial #1
// without a word. It names the study and the options that differ.
func CheckResumable(ctx context.Context, st store.DB, key store.StudyKey) error {
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
	return Usagef("--resume: no study has these options, so a new one would start at trial #1; %s. Run with that study's options to resume it, or add --new-study",
		strings.Join(lines, "; "))
}

// CheckJoin refuses to run a worker of study id with options that give
// another study: the error names each option that differs.
func CheckJoin(ctx context.Context, st store.DB, id string, key store.StudyKey) error {
	if key.ID() == id {
		return nil
	}
	o, err := st.Study(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Usagef("--study %s: no such study in this database", id)
	}
	if err != nil {
		return err
	}
	return Usagef("--study %s: these options give another study (%s): it differs in %s; run with the study's options, or give only --study to use the spec its first worker recorded",
		id, key.ID(), strings.Join(keyDiff(o.Key, key), ", "))
}

// keyDiff names the study-key fields of b that differ from a, with both
// values.
func keyDiff(a, b store.StudyKey) []string {
	var d []string
	add := func(name, x, y string) {
		if x != y {
			d = append(d, fmt.Sprintf("%s (%s, now %s)", name, cmp.Or(x, "-"), cmp.Or(y, "-")))
		}
	}
	add("model", a.Model, b.Model)
	add("served model", a.ServedModel, b.ServedModel)
	add("GPU", fmt.Sprintf("%dx %s", a.GPUCount, a.GPU), fmt.Sprintf("%dx %s", b.GPUCount, b.GPU))
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
