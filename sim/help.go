package sim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/vllm-tuner/tuner/spaces"
)

// simFlagHelp documents the simulator's own flags (those vLLM lacks); every
// one of serverFlags that is not a vLLM flag must be here (a test checks).
var simFlagHelp = map[string]string{
	"gpu":                       "GPU profile to simulate (default H100-80GB; see --sim-profiles)",
	"gpu_count":                 "GPUs present (default: tensor x data parallel size)",
	"sim_version":               "vLLM version to impersonate: flags, defaults, log and error texts, --config loader (default " + spaces.DefaultEngineVersion + ")",
	"sim_profiles":              "YAML file of extra GPU/model profiles (the catalog's schema)",
	"startup_scale":             "multiply the simulated startup phases (0 = start at once; default 1)",
	"time_scale":                "seconds of real time per simulated second (default 1; < 1 runs faster)",
	"slowdown":                  "multiply every engine step's time, e.g. 1.05 for a uniformly 5% slower engine (default 1)",
	"ignore_tuning_flags":       "accept every tuning flag and ignore it: each config runs as vLLM's default (no config can beat it)",
	"tuned_speedup":             "make every config that differs from vLLM's default this factor faster, e.g. 1.05 (a known 5% gain)",
	"drift":                     "spread of the host's speed over time (std of log speed, e.g. 0.05), shared by every vllm-sim of the same --drift-seed (0 = steady)",
	"drift_period":              "seconds of (simulated) time over which the drift moves by about --drift (default 3600)",
	"drift_seed":                "seed of the drift's walk (the same seed on the same clock: the same speed)",
	"fault_startup_fail":        "fault: die during startup with an engine error",
	"fault_hang_before_healthy": "fault: load, then never become healthy (never listen)",
	"fault_ignore_sigterm":      "fault: ignore SIGTERM (only SIGKILL stops the process)",
	"fault_crash_after":         "fault: exit 1 after N finished requests (0 = off)",
	"fault_runtime_oom_after":   "fault: CUDA out of memory in the engine after N requests (0 = off)",
	"fault_http500":             "fault: probability of answering a request with HTTP 500",
	"fault_malformed_sse":       "fault: probability of one malformed SSE chunk in a stream",
	"fault_slow_tokens":         "fault: multiply every step's wall-clock duration (1 = off)",
}

// vllmServerFlagHelp documents the vLLM server flags the simulator acts on;
// the rest of serverFlags are accepted for compatibility and ignored.
var vllmServerFlagHelp = map[string]string{
	"model":                   "model (positional MODEL_TAG preferred): a catalog name, HF id or local directory with config.json",
	"port":                    "port to listen on (default 8000)",
	"host":                    "host to listen on (default all interfaces)",
	"served_model_name":       "model name the API answers to (default: the model)",
	"seed":                    "seed of the simulated noise and faults",
	"num_gpu_blocks_override": "KV cache blocks, instead of the profiled number",
	"disable_log_stats":       "no periodic engine stats in the log",
	"config":                  "YAML file of flags (loaded as --sim-version's vLLM loads it; the command line wins)",
	"enable_lora":             "serve LoRA adapters (slots: --max-loras, --max-lora-rank)",
	"lora_modules":            "adapters to serve: name=path ... or JSON {\"name\", \"path\", \"base_model_name\"}; the rank is read from path/adapter_config.json",
	"max_cpu_loras":           "adapters kept in the CPU cache (default --max-loras); others load from disk",
}

// ServeHelp is `vllm-sim serve --help`: vLLM's usage line, the engine flags
// of the search space the simulator models, the vLLM server flags it acts
// on and its own flags (timing, profiles, faults).
func ServeHelp() string {
	var b strings.Builder
	fmt.Fprintln(&b, Usage)
	fmt.Fprintln(&b, "\nvllm-sim: a simulated `vllm serve` (no GPU). Flags take dashes or underscores, --x V or --x=V.")
	fmt.Fprintln(&b, "\nengine flags (as vLLM's; booleans also as --no-x):")
	if s, err := spaces.Default(); err == nil {
		var rows [][2]string
		for _, p := range s.Params {
			v := strings.ToUpper(p.Name)
			if p.Kind == spaces.Bool {
				v = ""
			}
			h := p.Help
			if p.Since != "" || p.Until != "" {
				h += fmt.Sprintf(" [vLLM %s..%s)", p.Since, p.Until)
			}
			rows = append(rows, [2]string{strings.TrimSpace(spaces.FlagName(p.Name) + " " + v), h})
		}
		writeRows(&b, rows)
	}
	fmt.Fprintln(&b, "\nserver flags:")
	writeRows(&b, flagRows(vllmServerFlagHelp))
	fmt.Fprintln(&b, "\nsimulator flags:")
	writeRows(&b, flagRows(simFlagHelp))
	var ignored []string
	for name := range serverFlags {
		if _, ok := vllmServerFlagHelp[name]; !ok {
			if _, ok := simFlagHelp[name]; !ok {
				ignored = append(ignored, spaces.FlagName(name))
			}
		}
	}
	sort.Strings(ignored)
	fmt.Fprintf(&b, "\naccepted and ignored (no effect in a simulation): %s\n", strings.Join(ignored, " "))
	return b.String()
}

func flagRows(m map[string]string) [][2]string {
	var rows [][2]string
	for name, h := range m {
		f := spaces.FlagName(name)
		if sf, ok := serverFlags[name]; ok && sf.kind == argValue {
			f += " " + strings.ToUpper(name)
		} else if name == "config" {
			f += " FILE"
		}
		rows = append(rows, [2]string{f, h})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
	return rows
}

func writeRows(b *strings.Builder, rows [][2]string) {
	w := 0
	for _, r := range rows {
		w = max(w, len(r[0]))
	}
	for _, r := range rows {
		fmt.Fprintf(b, "  %-*s  %s\n", w, r[0], r[1])
	}
}
