package spaces

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func target(t testing.TB, model, gpu string, n int, version string) Target {
	t.Helper()
	tg, err := DefaultCatalog().Target(model, gpu, n)
	if err != nil {
		t.Fatal(err)
	}
	tg.MaxModelLen, tg.EngineVersion = 8192, version
	return tg
}

func resolved(t testing.TB, tg Target) *Space {
	t.Helper()
	r, err := ResolveDefault(tg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// vLLM's hardware-dependent defaults (arg_utils.py get_batch_defaults):
// >= 70 GiB and not A100 -> 1024 seqs / 8192 tokens, else 256 / 2048.
func TestGPUDependentDefaults(t *testing.T) {
	tests := []struct {
		gpu          string
		seqs, tokens int
	}{
		{"H100-80GB", 1024, 8192},
		{"H200-141GB", 1024, 8192},
		{"A100-80GB", 256, 2048},
		{"A100-40GB", 256, 2048},
		{"L40S-48GB", 256, 2048},
	}
	for _, tt := range tests {
		t.Run(tt.gpu, func(t *testing.T) {
			c := resolved(t, target(t, "Llama-3.1-8B", tt.gpu, 1, "")).DefaultConfig()
			if got := c.Int("max_num_seqs"); got != tt.seqs {
				t.Errorf("max_num_seqs default = %d, want %d", got, tt.seqs)
			}
			if got := c.Int("max_num_batched_tokens"); got != tt.tokens {
				t.Errorf("max_num_batched_tokens default = %d, want %d", got, tt.tokens)
			}
			want := map[string]string{
				"gpu_memory_utilization": "0.9", "block_size": "16", "enable_chunked_prefill": "true",
				"enable_prefix_caching": "true", "kv_cache_dtype": "auto", "tensor_parallel_size": "1",
				"data_parallel_size": "1", "enforce_eager": "false", "long_prefill_token_threshold": "0",
				"scheduling_policy": "fcfs", "async_scheduling": "false", "max_model_len": "8192",
			}
			for k, v := range want {
				if got, _ := c.Get(k); got.String() != v {
					t.Errorf("%s default = %s, want %s", k, got, v)
				}
			}
		})
	}
}

func TestVersionGating(t *testing.T) {
	tests := []struct {
		version          string
		swap, schedSteps bool
		util             string
		async            string
	}{
		{"0.10.1", true, true, "0.9", "false"},
		{"0.11.0", true, false, "0.9", "false"},
		{"0.12.0", true, false, "0.9", "true"},
		{"0.18.0", false, false, "0.9", "true"},
		{"0.21.0", false, false, "0.92", "true"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			s := resolved(t, target(t, "Llama-3.1-8B", "H100", 1, tt.version))
			if _, ok := s.Param("swap_space"); ok != tt.swap {
				t.Errorf("swap_space known = %v, want %v", ok, tt.swap)
			}
			if _, ok := s.Param("num_scheduler_steps"); ok != tt.schedSteps {
				t.Errorf("num_scheduler_steps known = %v, want %v", ok, tt.schedSteps)
			}
			c := s.DefaultConfig()
			if got, _ := c.Get("gpu_memory_utilization"); got.String() != tt.util {
				t.Errorf("util default %s, want %s", got, tt.util)
			}
			if got, _ := c.Get("async_scheduling"); got.String() != tt.async {
				t.Errorf("async default %s, want %s", got, tt.async)
			}
			if c.Has("swap_space") || c.Has("num_scheduler_steps") || c.Has("max_num_partial_prefills") {
				t.Errorf("untuned flags leaked into the default config: %s", c)
			}
		})
	}
}

func TestResolveDropsImpossibleLevels(t *testing.T) {
	tests := []struct {
		model string
		gpus  int
		tp    []float64
	}{
		{"Llama-3.1-8B", 1, []float64{1}},
		{"Llama-3.1-8B", 4, []float64{1, 2, 4}},
		{"Llama-3.1-70B", 8, []float64{1, 2, 4, 8}},
		{"Qwen2.5-7B", 8, []float64{1, 2, 4}}, // 28 heads: 8 does not divide
	}
	for _, tt := range tests {
		s := resolved(t, target(t, tt.model, "H100", tt.gpus, ""))
		p, _ := s.Param("tensor_parallel_size")
		if !equalFloats(p.Values, tt.tp) {
			t.Errorf("%s on %d GPUs: tp levels %v, want %v", tt.model, tt.gpus, p.Values, tt.tp)
		}
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestConstraints(t *testing.T) {
	s := resolved(t, target(t, "Llama-3.1-8B", "H100", 2, ""))
	base := s.DefaultConfig()
	tests := []struct {
		name string
		set  map[string]Value
		want string // constraint name, "" for valid, "range" for a range error
	}{
		{"default", nil, ""},
		{"no chunked prefill, small budget", map[string]Value{"enable_chunked_prefill": BoolValue(false), "max_num_batched_tokens": IntValue(4096)}, "chunked-prefill-budget"},
		{"no chunked prefill, budget = max_model_len", map[string]Value{"enable_chunked_prefill": BoolValue(false), "max_num_batched_tokens": IntValue(8192)}, ""},
		{"budget below seqs", map[string]Value{"max_num_seqs": IntValue(1024), "max_num_batched_tokens": IntValue(512)}, "batched-tokens-vs-seqs"},
		{"tp x dp over GPUs", map[string]Value{"tensor_parallel_size": IntValue(2), "data_parallel_size": IntValue(2)}, "gpus-available"},
		{"tp 2 fits", map[string]Value{"tensor_parallel_size": IntValue(2)}, ""},
		{"util out of range", map[string]Value{"gpu_memory_utilization": FloatValue(0.99)}, "range"},
		{"bad choice", map[string]Value{"kv_cache_dtype": StringValue("int3")}, "range"},
		{"wrong kind", map[string]Value{"enforce_eager": IntValue(1)}, "range"},
		{"unknown", map[string]Value{"max_num_sequences": IntValue(1)}, "range"},
		{"fixed violated", map[string]Value{"max_model_len": IntValue(4096)}, "range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			for k, v := range tt.set {
				c = c.With(k, v)
			}
			err := s.Validate(c)
			var ce *ConstraintError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("want valid, got %v", err)
			case tt.want == "":
			case err == nil:
				t.Fatalf("want rejection (%s), got valid", tt.want)
			case !errors.Is(err, ErrInvalidConfig):
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			case tt.want == "range":
				if errors.As(err, &ce) {
					t.Fatalf("want a range error, got constraint %v", err)
				}
			case !errors.As(err, &ce) || ce.Constraint != tt.want:
				t.Fatalf("want constraint %s, got %v", tt.want, err)
			}
		})
	}
}

func TestDefaultAlwaysAdmissible(t *testing.T) {
	// A user range that excludes vLLM's default must not reject the default config.
	s, err := Parse("narrow.yaml", []byte("params:\n  - name: max_num_seqs\n    min: 32\n    max: 256\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(target(t, "Llama-3.1-8B", "H100", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	c := r.DefaultConfig()
	if c.Int("max_num_seqs") != 1024 {
		t.Fatalf("default max_num_seqs = %d", c.Int("max_num_seqs"))
	}
	if err := r.Validate(c); err != nil {
		t.Fatalf("default config rejected: %v", err)
	}
	if err := r.Validate(c.With("max_num_seqs", IntValue(512))); err == nil {
		t.Fatal("512 outside the user range accepted")
	}
	// Nor a constraint that rules out its layout (a TP level that cannot
	// hold the weights): it still rules out every other config there.
	e, err := ParseExpr("tensor_parallel_size != 1")
	if err != nil {
		t.Fatal(err)
	}
	r.Constraints = append(r.Constraints, Constraint{Name: "no-tp1", Expr: e, Src: "tensor_parallel_size != 1"})
	if err := r.Validate(c); err != nil {
		t.Fatalf("default config rejected by a constraint: %v", err)
	}
	var ce *ConstraintError
	if err := r.Validate(c.With("max_num_seqs", IntValue(64))); !errors.As(err, &ce) || ce.Constraint != "no-tp1" {
		t.Fatalf("a non-default config at TP 1: %v, want the no-tp1 constraint's error", err)
	}
	// isDefault, which Validate asks instead of building the default, is
	// equality with it.
	rng := rand.New(rand.NewPCG(5, 6))
	for _, cfg := range []Config{c, c.Without("max_num_seqs"), c.With("max_num_seqs", IntValue(1024)), c.With("unknown", IntValue(1)),
		randomConfig(r, rng), randomConfig(r, rng), randomConfig(r, rng)} {
		if got, want := r.isDefault(cfg), cfg.Equal(c); got != want {
			t.Errorf("isDefault(%s) = %v, want %v", cfg, got, want)
		}
	}
}

// randomConfig draws a config from the tuned params of s (not necessarily
// satisfying the constraints).
func randomConfig(s *Space, r *rand.Rand) Config {
	c := s.DefaultConfig()
	for _, p := range s.Tuned() {
		if d := p.Discrete(); d != nil {
			c = c.With(p.Name, d[r.IntN(len(d))])
			continue
		}
		c = c.With(p.Name, p.FromFloat(p.Min+r.Float64()*(p.Max-p.Min)))
	}
	return c
}

func TestFlagsRoundTrip(t *testing.T) {
	s := resolved(t, target(t, "Llama-3.1-70B", "H100", 8, ""))
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		c := randomConfig(s, r)
		flags := c.Flags()
		back, err := s.ParseFlags(flags)
		if err != nil {
			t.Fatalf("parse %v: %v", flags, err)
		}
		back, err = s.Normalize(back)
		if err != nil {
			t.Fatal(err)
		}
		if !back.Equal(c) || back.ID() != c.ID() {
			t.Fatalf("round trip changed the config:\n in  %s\n out %s", c, back)
		}
	}
}

func TestFlagSpelling(t *testing.T) {
	c := NewConfig(map[string]Value{
		"enable_prefix_caching":  BoolValue(false),
		"enforce_eager":          BoolValue(true),
		"max_num_seqs":           IntValue(128),
		"gpu_memory_utilization": FloatValue(0.85),
		"kv_cache_dtype":         StringValue("fp8"),
	})
	got := strings.Join(c.Flags(), " ")
	want := "--no-enable-prefix-caching --enforce-eager --gpu-memory-utilization 0.85 --kv-cache-dtype fp8 --max-num-seqs 128"
	if got != want {
		t.Fatalf("flags\n got %s\nwant %s", got, want)
	}
}

func TestParseFlagsForms(t *testing.T) {
	s := resolved(t, target(t, "Llama-3.1-8B", "H100", 1, ""))
	tests := []struct {
		args    []string
		want    string
		wantErr string
	}{
		{[]string{"--max_num_seqs", "64"}, "max_num_seqs=64", ""},
		{[]string{"--max-num-batched-tokens=16k"}, "max_num_batched_tokens=16000", ""},
		{[]string{"--max-num-batched-tokens", "16K"}, "max_num_batched_tokens=16384", ""},
		{[]string{"--no-enable-chunked-prefill", "--enforce-eager"}, "enable_chunked_prefill=false enforce_eager=true", ""},
		{[]string{"--swap-space", "8"}, "swap_space=8", ""},
		{[]string{"--max-num-seqs"}, "", "needs a value"},
		{[]string{"--kv-cache-dtype", "int3"}, "", "invalid choice"},
		{[]string{"--frobnicate", "1"}, "", "unrecognized argument --frobnicate"},
		{[]string{"--enforce-eager=true"}, "", "takes no value"},
		{[]string{"serve"}, "", "unexpected argument"},
		{[]string{"--max-num-seqs", "1.5k"}, "max_num_seqs=1500", ""},
		{[]string{"--max-num-seqs", "12x"}, "", "invalid int"},
	}
	for _, tt := range tests {
		c, err := s.ParseFlags(tt.args)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: error %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if c.String() != tt.want {
			t.Errorf("%v: got %s, want %s", tt.args, c, tt.want)
		}
	}
}

func TestConfigYAMLGolden(t *testing.T) {
	c := resolved(t, target(t, "Llama-3.1-8B", "H100", 1, "")).DefaultConfig()
	checkGolden(t, "default-h100.config.yaml", c.YAML())
}

// One golden --config file per vLLM loader generation, for a config with
// booleans both ways: the drop-false loader (0.6.1-0.27.x) would silently
// keep a `key: false` flag at its default, so false is written as `no-key:
// true`; the no-key loader (0.28.0+) reads `key: false` as --no-key.
func TestConfigYAMLPerLoader(t *testing.T) {
	c := resolved(t, target(t, "Llama-3.1-8B", "H100", 1, "")).DefaultConfig().
		With("enable_prefix_caching", BoolValue(false)).With("enforce_eager", BoolValue(true))
	tests := []struct {
		version, golden string
		loader          ConfigLoader
	}{
		{"0.6.1", "loader-drop-false.config.yaml", LoaderDropFalse},
		{"0.11.0", "loader-drop-false.config.yaml", LoaderDropFalse},
		{"0.27.1", "loader-drop-false.config.yaml", LoaderDropFalse},
		{"0.28.0", "loader-no-key.config.yaml", LoaderNoKey},
		{"0.28.0rc1", "loader-no-key.config.yaml", LoaderNoKey},
		{"0.31.0", "loader-no-key.config.yaml", LoaderNoKey},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			if l, err := ConfigLoaderFor(tt.version); err != nil || l != tt.loader {
				t.Fatalf("loader %v, %v; want %v", l, err, tt.loader)
			}
			y, err := c.YAMLFor(tt.version)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.golden, y)
		})
	}
	for _, v := range []string{"0.5.5", "0.6.0"} {
		if _, err := c.YAMLFor(v); !errors.Is(err, ErrNoConfigFile) || !strings.Contains(err.Error(), "command line") {
			t.Errorf("%s: err %v, want ErrNoConfigFile naming the command line", v, err)
		}
	}
	if _, err := c.YAMLFor("bogus"); err == nil {
		t.Error("bad version accepted")
	}
}

func TestConfigIDStable(t *testing.T) {
	// The ID is persisted in the store: it must not change between releases.
	c := resolved(t, target(t, "Llama-3.1-8B", "H100", 1, "")).DefaultConfig()
	if got, want := c.ID(), "fc65fe4bb83a"; got != want {
		t.Fatalf("default config ID = %s, want %s (IDs are persisted; do not change the canonical form)", got, want)
	}
}

func TestConfigJSONRoundTrip(t *testing.T) {
	s := resolved(t, target(t, "Llama-3.1-8B", "A100", 1, ""))
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 200; i++ {
		c := randomConfig(s, r).With("gpu_memory_utilization", FloatValue(1))
		b, err := c.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Config
		if err := back.UnmarshalJSON(b); err != nil {
			t.Fatal(err)
		}
		if !back.Equal(c) {
			t.Fatalf("json round trip: %s -> %s -> %s", c, b, back)
		}
	}
}

func TestBadSpaceFiles(t *testing.T) {
	tests := []struct {
		file string
		line int
		want string
	}{
		{"bad-unknown-key.yaml", 4, "maxx"},
		{"bad-min-gt-max.yaml", 4, "min 16384 > max 4096"},
		{"bad-default-range.yaml", 7, "default 0.99 outside the range"},
		{"bad-unknown-flag.yaml", 4, "vLLM has no engine flag --max-num-sequences"},
		{"bad-kind.yaml", 3, "cannot change kind"},
		{"bad-constraint.yaml", 3, `unknown identifier "max_num_batchd_tokens"`},
		{"bad-syntax.yaml", 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := filepath.Join("testdata", tt.file)
			_, err := Load(path)
			if err == nil {
				t.Fatal("loaded a bad file")
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("want *FileError, got %T %v", err, err)
			}
			if fe.File != path || fe.Line != tt.line {
				t.Errorf("located at %s:%d, want %s:%d (%v)", fe.File, fe.Line, path, tt.line, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("message %q lacks %q", err, tt.want)
			}
		})
	}
}

func TestUserSpaceFile(t *testing.T) {
	s, err := Load("testdata/user-space.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Resolve(target(t, "Llama-3.1-8B", "H100", 1, ""))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := r.Param("max_num_seqs")
	if p.Min != 32 || p.Max != 512 || !p.Log {
		t.Errorf("max_num_seqs override: %+v", p)
	}
	if dp, ok := r.Param("data_parallel_size"); !ok || dp.Active() {
		t.Error("data_parallel_size not dropped (or no longer known)")
	}
	if err := r.Validate(r.DefaultConfig()); err != nil {
		t.Errorf("default config of the user space: %v", err)
	}
	c := r.DefaultConfig()
	if c.Has("data_parallel_size") || c.Has("scheduling_policy") {
		t.Errorf("dropped/untuned params in config: %s", c)
	}
	if !c.Has("enforce_eager") {
		t.Error("fixed param missing from config")
	}
	for _, tp := range r.Tuned() {
		if tp.Name == "enforce_eager" {
			t.Error("fixed param still tuned")
		}
	}
	if err := r.Validate(c.With("max_num_batched_tokens", IntValue(16384))); err == nil {
		t.Error("user constraint not enforced")
	}
}

func TestEmbeddedCatalog(t *testing.T) {
	cat := DefaultCatalog()
	for _, name := range []string{"A100-80GB", "H100-80GB", "H200-141GB", "L40S-48GB"} {
		if _, err := cat.GPU(name); err != nil {
			t.Error(err)
		}
	}
	m, err := cat.Model("meta-llama/Llama-3.1-8B-Instruct")
	if err != nil {
		t.Fatal(err)
	}
	// 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 128 KiB per token (vllm.md §2.5).
	if got := m.KVBytesPerToken(2); got != 131072 {
		t.Errorf("8B KV bytes/token = %v, want 131072", got)
	}
	if _, err := cat.Model("no-such-model"); !errors.Is(err, ErrUnknownProfile) {
		t.Errorf("unknown model: %v", err)
	}
}

func TestUserCatalogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(path, []byte("gpus:\n  - name: B200\n    memory_gib: 178\n    bandwidth_gbs: 8000\n    bf16_tflops: 2250\n    fp8_tflops: 4500\n"), 0o644)
	cat, err := LoadCatalogFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := cat.GPU("b200"); err != nil || g.MemoryGiB != 178 {
		t.Fatalf("user GPU: %+v %v", g, err)
	}
	os.WriteFile(path, []byte("gpus:\n  - name: X\n    memory_gib: -1\n"), 0o644)
	if _, err := LoadCatalogFile(path); err == nil || !strings.Contains(err.Error(), "memory_gib") {
		t.Fatalf("bad profile accepted: %v", err)
	}
}

func TestParseHumanInt(t *testing.T) {
	tests := map[string]int{"1k": 1000, "1K": 1024, "25.6k": 25600, "32K": 32768, "8192": 8192, "1M": 1 << 20}
	for in, want := range tests {
		if got, err := ParseHumanInt(in); err != nil || got != want {
			t.Errorf("ParseHumanInt(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "k", "1.5", "0.1K", "-1k", "1e99k"} {
		if _, err := ParseHumanInt(bad); err == nil {
			t.Errorf("ParseHumanInt(%q) accepted", bad)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"0.10.2", "0.11", -1}, {"0.11.0", "0.11", 0}, {"0.18.0", "0.18", 0}, {"v0.12.1", "0.12", 1},
		{"0.11.0rc1", "0.11.0", 0}, {"0.11.1+cu128", "0.11.0", 1}, {"1.0", "0.99.9", 1},
	}
	for _, tt := range tests {
		if got, err := CompareVersions(tt.a, tt.b); err != nil || got != tt.want {
			t.Errorf("CompareVersions(%s, %s) = %d, %v; want %d", tt.a, tt.b, got, err, tt.want)
		}
	}
	if _, err := CompareVersions("abc", "1"); err == nil {
		t.Error("bad version accepted")
	}
}

func TestCatalogTarget(t *testing.T) {
	tg, err := DefaultCatalog().Target("meta-llama/Llama-3.1-70B-Instruct", "h100", 4)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Model.Name != "Llama-3.1-70B" || tg.GPU.Name != "H100-80GB" || tg.GPUCount != 4 {
		t.Errorf("target %+v", tg)
	}
	if tg, _ := DefaultCatalog().Target("tiny", "A100", 0); tg.GPUCount != 1 {
		t.Errorf("gpus 0 gave %d GPUs, want 1", tg.GPUCount)
	}
	// The error lists the known names, sorted: the models when the model
	// is unknown, the GPUs when the GPU is.
	cat := DefaultCatalog()
	var models, gpus []string
	for _, m := range cat.Models {
		models = append(models, m.Name)
	}
	for _, g := range cat.GPUs {
		gpus = append(gpus, g.Name)
	}
	slices.Sort(models)
	slices.Sort(gpus)
	for _, bad := range []struct{ model, gpu, known string }{
		{"no-such-model", "H100", strings.Join(models, ", ")},
		{"Llama-3.1-8B", "TPU", strings.Join(gpus, ", ")},
	} {
		_, err := cat.Target(bad.model, bad.gpu, 1)
		if !errors.Is(err, ErrUnknownProfile) {
			t.Errorf("Target(%q, %q): %v, want ErrUnknownProfile", bad.model, bad.gpu, err)
		} else if !strings.HasSuffix(err.Error(), "(known: "+bad.known+")") {
			t.Errorf("Target(%q, %q): %v, want the known names %s", bad.model, bad.gpu, err, bad.known)
		}
	}
}
