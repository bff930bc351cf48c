package sim

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

func TestParseServeArgs(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		errHas string // "" = success
		check  func(t *testing.T, o ServeOptions)
	}{
		{name: "positional model and defaults", args: []string{"meta-llama/Llama-3.1-8B-Instruct"},
			check: func(t *testing.T, o ServeOptions) {
				if o.Model != "meta-llama/Llama-3.1-8B-Instruct" || o.Port != 8000 || o.GPU != "H100-80GB" || o.Version != spaces.DefaultEngineVersion || o.Engine.Len() != 0 {
					t.Errorf("%+v", o)
				}
			}},
		{name: "spellings", args: []string{"m", "--max-num-seqs", "64", "--max_num_batched_tokens=8k", "--no-enable-prefix-caching", "--enforce-eager", "-tp", "2", "--port=9000", "--host", "127.0.0.1", "--gpu", "A100", "--gpu-count", "4", "--seed", "3", "--startup-scale", "0.01", "--time-scale=0.5", "--served-model-name", "x"},
			check: func(t *testing.T, o ServeOptions) {
				c := o.Engine
				if c.Int("max_num_seqs") != 64 || c.Int("max_num_batched_tokens") != 8000 || c.Bool("enable_prefix_caching") || !c.Has("enable_prefix_caching") ||
					!c.Bool("enforce_eager") || c.Int("tensor_parallel_size") != 2 {
					t.Errorf("engine %v", c)
				}
				if o.Port != 9000 || o.Host != "127.0.0.1" || o.GPU != "A100" || o.GPUCount != 4 || o.Seed != 3 || o.StartupScale != 0.01 || o.TimeScale != 0.5 || o.ServedModelName != "x" {
					t.Errorf("%+v", o)
				}
			}},
		{name: "binary human int", args: []string{"m", "--max-model-len", "32K"}, check: func(t *testing.T, o ServeOptions) {
			if o.Engine.Int("max_model_len") != 32768 {
				t.Errorf("max_model_len %d", o.Engine.Int("max_model_len"))
			}
		}},
		{name: "config file, CLI wins", args: []string{"m", "--config", "testdata/serve.yaml", "--max-num-seqs", "128"},
			check: func(t *testing.T, o ServeOptions) {
				c := o.Engine
				if o.Port != 8004 || c.Int("max_num_seqs") != 128 || c.Int("max_num_batched_tokens") != 4000 || c.Float("gpu_memory_utilization") != 0.85 ||
					c.Bool("enable_prefix_caching") || c.Str("kv_cache_dtype") != "fp8" {
					t.Errorf("%+v engine %v", o, c)
				}
			}},
		{name: "faults", args: []string{"m", "--fault-crash-after", "5", "--fault-http500=0.5", "--fault-malformed-sse", "0.1", "--fault-slow-tokens", "3", "--fault-ignore-sigterm", "--fault-startup-fail", "--fault-hang-before-healthy", "--fault-runtime-oom-after", "7"},
			check: func(t *testing.T, o ServeOptions) {
				f := o.Faults
				if f.CrashAfter != 5 || f.HTTP500 != 0.5 || f.MalformedSSE != 0.1 || f.SlowTokens != 3 || !f.IgnoreSIGTERM || !f.StartupFail || !f.HangBeforeHealthy || f.RuntimeOOMAfter != 7 {
					t.Errorf("%+v", f)
				}
			}},
		{name: "version-gated flag accepted by old version", args: []string{"m", "--sim-version", "0.10.0", "--num-scheduler-steps", "4", "--swap-space", "8"},
			check: func(t *testing.T, o ServeOptions) {
				if o.Engine.Int("num_scheduler_steps") != 4 || o.Engine.Float("swap_space") != 8 {
					t.Errorf("%v", o.Engine)
				}
			}},
		{name: "no-op vLLM flags", args: []string{"m", "--disable-log-requests", "--load-format", "dummy", "--trust-remote-code", "--dtype", "auto"}},
		{name: "unknown flag", args: []string{"m", "--foo", "--bar=1"}, errHas: "unrecognized arguments: --foo --bar=1"},
		{name: "removed flag", args: []string{"m", "--sim-version", "0.18.0", "--swap-space", "4"}, errHas: "unrecognized arguments: --swap-space"},
		{name: "removed V0 flag", args: []string{"m", "--num-scheduler-steps", "8"}, errHas: "unrecognized arguments: --num-scheduler-steps"},
		{name: "extra positional", args: []string{"m", "n"}, errHas: "unrecognized arguments: n"},
		{name: "bad int", args: []string{"m", "--max-num-seqs", "lots"}, errHas: "argument --max-num-seqs: invalid human_readable_int value: 'lots'"},
		{name: "bad choice", args: []string{"m", "--kv-cache-dtype", "int3"}, errHas: "invalid choice: 'int3'"},
		{name: "bad policy", args: []string{"m", "--scheduling-policy", "lifo"}, errHas: "invalid choice: 'lifo' (choose from 'fcfs', 'priority')"},
		{name: "missing value", args: []string{"m", "--port"}, errHas: "argument --port: expected one argument"},
		{name: "bool with value", args: []string{"m", "--enforce-eager=true"}, errHas: "ignored explicit argument 'true'"},
		{name: "missing model", args: []string{"--port", "1"}, errHas: "the following arguments are required: model_tag"},
		{name: "config not yaml", args: []string{"m", "--config", "x.json"}, errHas: "must be a YAML file"},
		{name: "config missing", args: []string{"m", "--config", "testdata/nope.yaml"}, errHas: "can't open"},
		{name: "two configs", args: []string{"m", "--config", "a.yaml", "--config=b.yaml"}, errHas: "only one --config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o, err := ParseServeArgs(c.args)
			if c.errHas == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if c.check != nil {
					c.check(t, o)
				}
				return
			}
			var ae *ArgError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), c.errHas) {
				t.Fatalf("err %v, want *ArgError containing %q", err, c.errHas)
			}
			if !strings.HasPrefix(err.Error(), "vllm serve: error: ") {
				t.Errorf("message %q lacks argparse's prefix", err)
			}
		})
	}
}

func TestResolveArgsDerivedDefaults(t *testing.T) {
	a100 := testTarget(t, "Llama-3.1-8B", "A100-80GB", 1)
	h := testTarget(t, "Llama-3.1-8B", "H100-80GB", 1)
	cases := []struct {
		name     string
		tg       spaces.Target
		cfg      map[string]spaces.Value
		seqs     int
		budget   int
		maxLen   int
		version  string
		wantUtil float64
	}{
		{"H100 defaults", h, nil, 1024, 8192, 131072, "", 0.9},
		{"A100 defaults", a100, nil, 256, 2048, 131072, "", 0.9},
		{"util 0.92 from 0.21", h, nil, 1024, 8192, 131072, "0.21.0", 0.92},
		{"seqs clipped to budget", h, map[string]spaces.Value{"max_num_batched_tokens": spaces.IntValue(512)}, 512, 512, 131072, "", 0.9},
		{"no chunking: budget = max_model_len", h, map[string]spaces.Value{"enable_chunked_prefill": spaces.BoolValue(false), "max_model_len": spaces.IntValue(16384)}, 1024, 16384, 16384, "", 0.9},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := c.tg
			tg.EngineVersion = c.version
			a, err := ResolveArgs(tg, spaces.NewConfig(c.cfg))
			if err != nil {
				t.Fatal(err)
			}
			if a.MaxNumSeqs != c.seqs || a.MaxNumBatchedTokens != c.budget || a.MaxModelLen != c.maxLen || a.GPUMemoryUtilization != c.wantUtil {
				t.Errorf("got seqs %d budget %d max_len %d util %v", a.MaxNumSeqs, a.MaxNumBatchedTokens, a.MaxModelLen, a.GPUMemoryUtilization)
			}
		})
	}
}

func TestCommas(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 450816: "450,816", 1194384: "1,194,384", -1234: "-1,234"} {
		if got := commas(n); got != want {
			t.Errorf("commas(%d) = %q, want %q", n, got, want)
		}
	}
}

func FuzzParseServeArgs(f *testing.F) {
	f.Add("m --max-num-seqs 64 --no-enable-prefix-caching")
	f.Add("m --max_num_batched_tokens=8k -tp 2 --port 1")
	f.Add("--config testdata/serve.yaml m --fault-http500 0.5")
	f.Add("m --sim-version 0.18 --swap-space 4 --enforce-eager=1 --")
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		o, err := ParseServeArgs(args)
		if err != nil {
			var ae *ArgError
			if !errors.As(err, &ae) {
				t.Fatalf("non-argparse error %T: %v", err, err)
			}
			return
		}
		if o.Model == "" {
			t.Fatal("success without a model")
		}
		// Every engine value parsed is of its parameter's kind.
		space, _ := spaces.Default()
		for _, n := range o.Engine.Names() {
			p, ok := space.Param(n)
			v, _ := o.Engine.Get(n)
			if !ok || v.Kind() != p.Kind {
				t.Fatalf("engine %s=%v: unknown or wrong kind", n, v)
			}
		}
	})
}

// What the tuner renders (Config.Flags for the command line, Config.YAMLFor
// for --config) parses back to the same engine config, on every --config
// loader generation the simulator impersonates.
func TestRenderedConfigRoundTrip(t *testing.T) {
	tg := h100(t, 2)
	cfg := defaults(t, tg, "enable_prefix_caching", false, "kv_cache_dtype", "fp8", "gpu_memory_utilization", 0.87,
		"max_num_batched_tokens", 16384, "tensor_parallel_size", 2, "async_scheduling", true, "enable_chunked_prefill", false)
	o, err := ParseServeArgs(append([]string{"m"}, cfg.Flags()...))
	if err != nil {
		t.Fatal(err)
	}
	if !o.Engine.Equal(cfg) {
		t.Errorf("flags round trip:\n got %v\nwant %v", o.Engine, cfg)
	}
	for _, version := range []string{"0.9.2", "0.11.0", "0.27.1", "0.28.0", "0.30.1"} {
		y, err := cfg.YAMLFor(version)
		if err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		path := t.TempDir() + "/cand.yaml"
		if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		o, err = ParseServeArgs([]string{"m", "--config", path, "--port", "8123", "--sim-version", version})
		if err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		if !o.Engine.Equal(cfg) || o.Port != 8123 {
			t.Errorf("%s: yaml round trip:\n got %v\nwant %v\nyaml:\n%s", version, o.Engine, cfg, y)
		}
	}
}

// Each --config loader generation reads `false` as that vLLM release does:
// dropped before 0.28.0 (the flag keeps its default), --no-key from 0.28.0,
// and no --config at all before 0.6.1.
func TestConfigLoaderGenerations(t *testing.T) {
	path := t.TempDir() + "/c.yaml"
	if err := os.WriteFile(path, []byte("enable-prefix-caching: false\nenforce-eager: true\nno-enable-chunked-prefill: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		version    string
		wantPrefix string // "unset", "false"
		wantErrHas string
	}{
		{version: "0.6.0", wantErrHas: "unrecognized arguments: --config"},
		{version: "0.11.0", wantPrefix: "unset"},
		{version: "0.27.1", wantPrefix: "unset"},
		{version: "0.28.0", wantPrefix: "false"},
		{version: "0.30.1", wantPrefix: "false"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			o, err := ParseServeArgs([]string{"m", "--config", path, "--sim-version", tt.version})
			if tt.wantErrHas != "" {
				var ae *ArgError
				if !errors.As(err, &ae) || !strings.Contains(err.Error(), tt.wantErrHas) {
					t.Fatalf("err %v, want ArgError with %q", err, tt.wantErrHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := "unset"
			if v, ok := o.Engine.Get("enable_prefix_caching"); ok {
				got = v.String()
			}
			if got != tt.wantPrefix {
				t.Errorf("enable_prefix_caching %s, want %s", got, tt.wantPrefix)
			}
			// true keys pass through on every generation, no-KEY: true too
			if !o.Engine.Bool("enforce_eager") || !o.Engine.Has("enable_chunked_prefill") || o.Engine.Bool("enable_chunked_prefill") {
				t.Errorf("engine %v", o.Engine)
			}
		})
	}
}
