package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/vllm-tuner/tuner/bounded"
	"github.com/vllm-tuner/tuner/spaces"
)

// ServeOptions is a parsed `vllm-sim serve` command line.
type ServeOptions struct {
	Model           string
	ServedModelName string
	GPU             string
	GPUCount        int // 0: as many as TP x DP needs
	Version         string
	Host            string
	Port            int
	Seed            uint64
	StartupScale    float64
	TimeScale       float64
	Slowdown        float64 // multiplies every engine step's time (1 = calibrated)
	// Host is the simulated machine: flags ignored, a known gain, drift.
	Machine         Host
	Profiles        string // extra GPU/model profile file
	HFCache         string // Hugging Face hub cache, for models the catalog lacks
	NumGPUBlocks    int    // --num-gpu-blocks-override (0: off)
	DisableLogStats bool
	// LoRA holds --enable-lora, --lora-modules and --max-cpu-loras (the
	// slots, --max-loras and --max-lora-rank, are engine parameters).
	LoRA LoRAOptions
	// Engine holds the engine flags given (config file and CLI), by
	// parameter name; the rest take vLLM's defaults for the target.
	Engine spaces.Config
	Faults Faults
}

// LoRAOptions are vllm serve's LoRA server flags.
type LoRAOptions struct {
	Enable      bool
	Modules     []LoRAModule
	MaxCPULoras int
}

// Faults are the fault-injection knobs (all off by default), seeded by --seed.
type Faults struct {
	StartupFail       bool    // die during startup with an engine error
	HangBeforeHealthy bool    // load, then never become healthy (never listen)
	CrashAfter        int     // exit 1 after this many finished requests
	HTTP500           float64 // probability of answering a request with HTTP 500
	MalformedSSE      float64 // probability of one malformed SSE chunk in a stream
	SlowTokens        float64 // multiply every step's duration (1 = off)
	IgnoreSIGTERM     bool    // ignore SIGTERM (only SIGKILL stops the process)
	RuntimeOOMAfter   int     // CUDA OOM in the engine after this many requests
}

// DefaultServeOptions are vllm serve's defaults plus the simulator's.
func DefaultServeOptions() ServeOptions {
	return ServeOptions{GPU: "H100-80GB", Version: spaces.DefaultEngineVersion, Port: 8000,
		StartupScale: 1, TimeScale: 1, Slowdown: 1, Faults: Faults{SlowTokens: 1}}
}

// ArgError is an argparse error: vLLM prints usage and the message on
// stderr and exits 2 before any GPU work.
type ArgError struct{ Msg string }

func (e *ArgError) Error() string { return "vllm serve: error: " + e.Msg }

// Usage is argparse's usage line.
const Usage = "usage: vllm serve [model_tag] [options]"

// argKind is how a flag takes its value.
type argKind int

const (
	argValue   argKind = iota // --x V or --x=V
	argTrue                   // store_true: --x
	argBoolOpt                // BooleanOptionalAction: --x / --no-x
	argList                   // nargs='+': --x V [V ...]
)

type simFlag struct {
	kind  argKind
	apply func(o *ServeOptions, v string) error
}

func intFlag(set func(*ServeOptions, int)) simFlag {
	return simFlag{kind: argValue, apply: func(o *ServeOptions, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("invalid int value: '%s'", v)
		}
		set(o, n)
		return nil
	}}
}

func floatFlag(set func(*ServeOptions, float64)) simFlag {
	return simFlag{kind: argValue, apply: func(o *ServeOptions, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f != f {
			return fmt.Errorf("invalid float value: '%s'", v)
		}
		set(o, f)
		return nil
	}}
}

func strFlag(set func(*ServeOptions, string)) simFlag {
	return simFlag{kind: argValue, apply: func(o *ServeOptions, v string) error { set(o, v); return nil }}
}

func trueFlag(set func(*ServeOptions)) simFlag {
	return simFlag{kind: argTrue, apply: func(o *ServeOptions, _ string) error { set(o); return nil }}
}

func noop(k argKind) simFlag {
	return simFlag{kind: k, apply: func(*ServeOptions, string) error { return nil }}
}

// serverFlags are the flags of vllm serve that are not engine parameters of
// the search space, plus the simulator's own (names with underscores).
var serverFlags = map[string]simFlag{
	"model":             strFlag(func(o *ServeOptions, v string) { o.Model = v }),
	"port":              intFlag(func(o *ServeOptions, n int) { o.Port = n }),
	"host":              strFlag(func(o *ServeOptions, v string) { o.Host = v }),
	"served_model_name": strFlag(func(o *ServeOptions, v string) { o.ServedModelName = v }),
	"seed": intFlag(func(o *ServeOptions, n int) {
		o.Seed = uint64(n)
	}),
	"num_gpu_blocks_override": intFlag(func(o *ServeOptions, n int) { o.NumGPUBlocks = n }),
	"disable_log_stats":       trueFlag(func(o *ServeOptions) { o.DisableLogStats = true }),
	"enable_lora": {kind: argBoolOpt, apply: func(o *ServeOptions, v string) error {
		o.LoRA.Enable = v != "false"
		return nil
	}},
	"lora_modules": {kind: argList, apply: func(o *ServeOptions, v string) error {
		m, err := ParseLoRAModule(v)
		if err != nil {
			return err
		}
		o.LoRA.Modules = append(o.LoRA.Modules, m)
		return nil
	}},
	"max_cpu_loras":       intFlag(func(o *ServeOptions, n int) { o.LoRA.MaxCPULoras = n }),
	"fully_sharded_loras": noop(argBoolOpt),
	// Accepted for compatibility, no effect in the simulator.
	"disable_log_requests":            noop(argTrue),
	"enable_log_requests":             noop(argBoolOpt),
	"disable_uvicorn_access_log":      noop(argTrue),
	"trust_remote_code":               noop(argBoolOpt),
	"enable_force_include_usage":      noop(argBoolOpt),
	"enable_prompt_tokens_details":    noop(argBoolOpt),
	"load_format":                     noop(argValue),
	"uvicorn_log_level":               noop(argValue),
	"max_logprobs":                    noop(argValue),
	"tokenizer":                       noop(argValue),
	"download_dir":                    noop(argValue),
	"generation_config":               noop(argValue),
	"show_hidden_metrics_for_version": noop(argValue),
	"gpu":                             strFlag(func(o *ServeOptions, v string) { o.GPU = v }),
	"gpu_count":                       intFlag(func(o *ServeOptions, n int) { o.GPUCount = n }),
	"sim_version":                     strFlag(func(o *ServeOptions, v string) { o.Version = v }),
	"sim_profiles":                    strFlag(func(o *ServeOptions, v string) { o.Profiles = v }),
	"startup_scale":                   floatFlag(func(o *ServeOptions, f float64) { o.StartupScale = f }),
	"time_scale":                      floatFlag(func(o *ServeOptions, f float64) { o.TimeScale = f }),
	"slowdown":                        floatFlag(func(o *ServeOptions, f float64) { o.Slowdown = f }),
	"ignore_tuning_flags":             trueFlag(func(o *ServeOptions) { o.Machine.IgnoreTuningFlags = true }),
	"tuned_speedup":                   floatFlag(func(o *ServeOptions, f float64) { o.Machine.TunedSpeedup = f }),
	"drift":                           floatFlag(func(o *ServeOptions, f float64) { o.Machine.Drift = f }),
	"drift_period":                    floatFlag(func(o *ServeOptions, f float64) { o.Machine.DriftPeriod = f }),
	"drift_seed":                      intFlag(func(o *ServeOptions, n int) { o.Machine.DriftSeed = uint64(n) }),
	"fault_startup_fail":              trueFlag(func(o *ServeOptions) { o.Faults.StartupFail = true }),
	"fault_hang_before_healthy":       trueFlag(func(o *ServeOptions) { o.Faults.HangBeforeHealthy = true }),
	"fault_ignore_sigterm":            trueFlag(func(o *ServeOptions) { o.Faults.IgnoreSIGTERM = true }),
	"fault_crash_after":               intFlag(func(o *ServeOptions, n int) { o.Faults.CrashAfter = n }),
	"fault_runtime_oom_after":         intFlag(func(o *ServeOptions, n int) { o.Faults.RuntimeOOMAfter = n }),
	"fault_http500":                   floatFlag(func(o *ServeOptions, f float64) { o.Faults.HTTP500 = f }),
	"fault_malformed_sse":             floatFlag(func(o *ServeOptions, f float64) { o.Faults.MalformedSSE = f }),
	"fault_slow_tokens":               floatFlag(func(o *ServeOptions, f float64) { o.Faults.SlowTokens = f }),
}

// shortFlags are vLLM's short aliases.
var shortFlags = map[string]string{"-tp": "tensor_parallel_size", "-dp": "data_parallel_size", "-q": "quantization"}

// dtypeAliases are the --dtype spellings vLLM accepts besides the space's.
var dtypeAliases = map[string]string{"half": "float16", "float": "float32"}

// kvCacheDtypes are the values vLLM 0.8-0.11 accept for --kv-cache-dtype
// (the search space only tunes auto and fp8).
var kvCacheDtypes = []string{"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc"}

// ParseServeArgs parses the arguments after `vllm-sim serve` the way vLLM's
// FlexibleArgumentParser does: a positional model, --x V and --x=V, dashes
// or underscores, --x/--no-x for booleans, human-readable ints, --config
// FILE (YAML; the command line wins over the file), version-gated engine
// flags (a flag the emulated vLLM version lacks is unrecognized). Errors are
// *ArgError (exit 2); a missing or unreadable --config file is one too.
func ParseServeArgs(args []string) (ServeOptions, error) {
	o := DefaultServeOptions()
	space, err := spaces.Default()
	if err != nil {
		return o, err
	}
	p := &argParser{space: space, engine: map[string]string{}}
	// The config file goes first so that the command line overrides it. It
	// is read by the loader of the vLLM version impersonated (--sim-version
	// on the command line), as that version would read it.
	if file, ok, err := findConfigArg(args); err != nil {
		return o, err
	} else if ok {
		loader, err := spaces.ConfigLoaderFor(cliVersion(args, o.Version))
		if err != nil {
			return o, &ArgError{Msg: fmt.Sprintf("argument --sim-version: invalid version value: %v", err)}
		}
		if loader == spaces.LoaderNone {
			return o, &ArgError{Msg: "unrecognized arguments: --config"}
		}
		cargs, err := configFileArgs(file, loader)
		if err != nil {
			return o, err
		}
		if err := p.parse(&o, cargs, true); err != nil {
			return o, err
		}
	}
	if err := p.parse(&o, args, false); err != nil {
		return o, err
	}
	// Version-gated engine flags and their values.
	if _, err := spaces.CompareVersions(o.Version, "0"); err != nil {
		return o, &ArgError{Msg: fmt.Sprintf("argument --sim-version: invalid version value: '%s'", o.Version)}
	}
	m := map[string]spaces.Value{}
	for _, name := range p.order {
		raw := p.engine[name]
		flag := spaces.FlagName(name)
		prm, ok := space.Param(name)
		if !ok {
			f, _ := spaces.LookupFlag(name)
			if !f.In(o.Version) {
				p.unknown = append(p.unknown, p.spelled[name])
				continue
			}
			_, v, err := f.Param(raw)
			if err != nil {
				return o, &ArgError{Msg: fmt.Sprintf("argument %s: %v", flag, err)}
			}
			m[name] = v
			continue
		}
		if !versionHas(o.Version, prm) {
			p.unknown = append(p.unknown, p.spelled[name])
			continue
		}
		if prm.Kind == spaces.Bool {
			m[name] = spaces.BoolValue(raw == "true")
			continue
		}
		if a, ok := dtypeAliases[raw]; ok && name == "dtype" {
			raw = a
		}
		if name == "kv_cache_dtype" {
			if !contains(kvCacheDtypes, raw) {
				return o, &ArgError{Msg: fmt.Sprintf("argument %s: invalid choice: '%s' (choose from %s)", flag, raw, quoteList(kvCacheDtypes))}
			}
			m[name] = spaces.StringValue(raw)
			continue
		}
		v, err := prm.ParseValue(raw)
		if err != nil {
			switch prm.Kind {
			case spaces.Categorical:
				return o, &ArgError{Msg: fmt.Sprintf("argument %s: invalid choice: '%s' (choose from %s)", flag, raw, quoteList(prm.Choices))}
			case spaces.Int:
				return o, &ArgError{Msg: fmt.Sprintf("argument %s: invalid human_readable_int value: '%s'", flag, raw)}
			default:
				return o, &ArgError{Msg: fmt.Sprintf("argument %s: invalid %s value: '%s'", flag, prm.Kind, raw)}
			}
		}
		m[name] = v
	}
	if len(p.unknown) > 0 {
		return o, &ArgError{Msg: "unrecognized arguments: " + strings.Join(p.unknown, " ")}
	}
	if o.Model == "" {
		return o, &ArgError{Msg: "the following arguments are required: model_tag"}
	}
	if o.Port < 0 || o.Port > 65535 {
		return o, &ArgError{Msg: fmt.Sprintf("argument --port: invalid port %d", o.Port)}
	}
	if err := checkServeOptions(&o); err != nil {
		return o, err
	}
	o.Engine = spaces.NewConfig(m)
	return o, nil
}

type argParser struct {
	space   *spaces.Space
	engine  map[string]string // param name -> raw value ("true"/"false" for bools)
	order   []string
	spelled map[string]string
	unknown []string
}

func (p *argParser) setEngine(name, raw, spelled string) {
	if _, ok := p.engine[name]; !ok {
		p.order = append(p.order, name)
	}
	p.engine[name] = raw
	if p.spelled == nil {
		p.spelled = map[string]string{}
	}
	p.spelled[name] = spelled
}

func (p *argParser) parse(o *ServeOptions, args []string, fromConfig bool) error {
	positional := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			p.unknown = append(p.unknown, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			if positional == 0 && !fromConfig {
				o.Model = a
				positional++
				continue
			}
			p.unknown = append(p.unknown, a)
			continue
		}
		if short, ok := shortFlags[a]; ok {
			if i+1 >= len(args) {
				return &ArgError{Msg: fmt.Sprintf("argument %s/%s: expected one argument", spaces.FlagName(short), a)}
			}
			i++
			p.setEngine(short, args[i], a)
			continue
		}
		if !strings.HasPrefix(a, "--") {
			p.unknown = append(p.unknown, a)
			continue
		}
		flag, val, hasVal := strings.Cut(a, "=")
		name := spaces.ParamName(flag)
		if name == "config" {
			if !hasVal {
				i++ // the file was read already
			}
			continue
		}
		takeValue := func() (string, error) {
			if hasVal {
				return val, nil
			}
			if i+1 >= len(args) || (strings.HasPrefix(args[i+1], "--") && len(args[i+1]) > 2) {
				return "", &ArgError{Msg: fmt.Sprintf("argument %s: expected one argument", flag)}
			}
			i++
			return args[i], nil
		}
		if sf, ok := serverFlags[name]; ok {
			switch sf.kind {
			case argList:
				var vals []string
				if hasVal {
					vals = append(vals, val)
				}
				for i+1 < len(args) && !(strings.HasPrefix(args[i+1], "-") && len(args[i+1]) > 1) {
					i++
					vals = append(vals, args[i])
				}
				if len(vals) == 0 {
					return &ArgError{Msg: fmt.Sprintf("argument %s: expected at least one argument", flag)}
				}
				for _, v := range vals {
					if err := sf.apply(o, v); err != nil {
						return &ArgError{Msg: fmt.Sprintf("argument %s: %v", flag, err)}
					}
				}
			case argValue:
				v, err := takeValue()
				if err != nil {
					return err
				}
				if err := sf.apply(o, v); err != nil {
					return &ArgError{Msg: fmt.Sprintf("argument %s: %v", flag, err)}
				}
			default:
				if hasVal {
					return &ArgError{Msg: fmt.Sprintf("argument %s: ignored explicit argument '%s'", flag, val)}
				}
				_ = sf.apply(o, "")
			}
			continue
		}
		if strings.HasPrefix(name, "no_") {
			if sf, ok := serverFlags[strings.TrimPrefix(name, "no_")]; ok && sf.kind == argBoolOpt {
				_ = sf.apply(o, "false")
				continue
			}
		}
		prm, ok := p.space.Param(name)
		negated := false
		if !ok && strings.HasPrefix(name, "no_") {
			if q, ok2 := p.space.Param(strings.TrimPrefix(name, "no_")); ok2 && q.Kind == spaces.Bool {
				prm, ok, negated = q, true, true
			}
		}
		if !ok {
			if f, known := spaces.LookupFlag(name); known {
				// A vLLM flag the simulator does not model: accepted, its
				// value checked by type, and named in the startup log.
				if f.Type == spaces.FlagBool {
					p.setEngine(f.Name, "true", flag)
					continue
				}
				v, err := takeValue()
				if err != nil {
					return err
				}
				p.setEngine(f.Name, v, flag)
				continue
			}
			if f, known := spaces.LookupFlag(strings.TrimPrefix(name, "no_")); known && f.Type == spaces.FlagBool {
				p.setEngine(f.Name, "false", flag)
				continue
			}
			p.unknown = append(p.unknown, a)
			if !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") && positional > 0 {
				// argparse leaves the value of an unknown flag unrecognized too
				i++
				p.unknown = append(p.unknown, args[i])
			}
			continue
		}
		if prm.Kind == spaces.Bool {
			if hasVal {
				return &ArgError{Msg: fmt.Sprintf("argument %s/--no-%s: ignored explicit argument '%s'",
					spaces.FlagName(prm.Name), strings.TrimPrefix(spaces.FlagName(prm.Name), "--"), val)}
			}
			p.setEngine(prm.Name, strconv.FormatBool(!negated), flag)
			continue
		}
		v, err := takeValue()
		if err != nil {
			return err
		}
		p.setEngine(prm.Name, v, flag)
	}
	return nil
}

// findConfigArg returns the value of --config if given (only one allowed).
func findConfigArg(args []string) (string, bool, error) {
	var file string
	found := false
	for i := 0; i < len(args); i++ {
		flag, val, hasVal := strings.Cut(args[i], "=")
		if spaces.ParamName(flag) != "config" || !strings.HasPrefix(flag, "--") {
			continue
		}
		if found {
			return "", false, &ArgError{Msg: "only one --config argument is allowed"}
		}
		found = true
		if hasVal {
			file = val
			continue
		}
		if i+1 >= len(args) {
			return "", false, &ArgError{Msg: "argument --config: expected one argument"}
		}
		file = args[i+1]
		i++
	}
	return file, found, nil
}

// cliVersion is the last --sim-version on the command line, else def.
func cliVersion(args []string, def string) string {
	v := def
	for i := 0; i < len(args); i++ {
		flag, val, hasVal := strings.Cut(args[i], "=")
		if !strings.HasPrefix(flag, "--") || spaces.ParamName(flag) != "sim_version" {
			continue
		}
		if hasVal {
			v = val
		} else if i+1 < len(args) {
			v = args[i+1]
			i++
		}
	}
	return v
}

// configFileArgs turns a vLLM --config YAML file into arguments the way the
// given loader generation does (spaces.ConfigLoader): keys are flag names
// without dashes, true -> --key, false -> --no-key (LoaderNoKey, when the
// flag has a --no- form) or nothing (LoaderDropFalse), lists -> repeated
// values, mappings -> a JSON string, model: -> the model.
func configFileArgs(path string, loader spaces.ConfigLoader) ([]string, error) {
	if !strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml") {
		return nil, &ArgError{Msg: fmt.Sprintf("argument --config: config file must be a YAML file (.yaml or .yml), got '%s'", path)}
	}
	b, err := bounded.ReadFile(path, bounded.Default().Bytes)
	if err != nil {
		return nil, &ArgError{Msg: fmt.Sprintf("argument --config: can't open '%s': %v", path, err)}
	}
	return configArgs(path, b, loader)
}

func configArgs(file string, b []byte, loader spaces.ConfigLoader) ([]string, error) {
	var m map[string]any
	if err := bounded.DecodeYAML(file, b, &m); errors.Is(err, bounded.ErrLimit) {
		return nil, &ArgError{Msg: "argument --config: " + err.Error()}
	} else if err != nil && len(bytes.TrimSpace(b)) > 0 {
		return nil, &ArgError{Msg: fmt.Sprintf("argument --config: invalid YAML: %v", err)}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		flag := "--" + k
		switch v := m[k].(type) {
		case bool:
			switch {
			case v:
				out = append(out, flag)
			case loader == spaces.LoaderNoKey && hasNoForm(k):
				out = append(out, "--no-"+k)
			}
		case []any:
			for _, x := range v {
				out = append(out, flag, fmt.Sprint(x))
			}
		case map[string]any:
			j, _ := json.Marshal(v)
			out = append(out, flag, string(j))
		case nil:
		default:
			if spaces.ParamName(k) == "model" {
				out = append(out, "--model", fmt.Sprint(v))
				continue
			}
			out = append(out, flag, fmt.Sprint(v))
		}
	}
	return out, nil
}

// hasNoForm reports whether --no-KEY is an option of vllm serve (a
// BooleanOptionalAction): the engine booleans of the space and the server's.
func hasNoForm(key string) bool {
	name := spaces.ParamName(key)
	if sf, ok := serverFlags[name]; ok {
		return sf.kind == argBoolOpt
	}
	space, err := spaces.Default()
	if err != nil {
		return false
	}
	if p, ok := space.Param(name); ok {
		return p.Kind == spaces.Bool
	}
	f, ok := spaces.LookupFlag(name)
	return ok && f.Type == spaces.FlagBool
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = "'" + s + "'"
	}
	return strings.Join(q, ", ")
}
