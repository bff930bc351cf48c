package sim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vllm-tuner/tuner/spaces"
)

// EngineArgs are the engine flags the simulator honours, with vLLM's
// defaults resolved for a target.
type EngineArgs struct {
	MaxNumSeqs                int
	MaxNumBatchedTokens       int
	GPUMemoryUtilization      float64
	BlockSize                 int
	EnableChunkedPrefill      bool
	EnablePrefixCaching       bool
	KVCacheDtype              string
	TensorParallelSize        int
	DataParallelSize          int
	MaxModelLen               int
	EnforceEager              bool
	LongPrefillTokenThreshold int
	SchedulingPolicy          string
	AsyncScheduling           bool
	SwapSpace                 float64 // accepted, unused by V1 (as in vLLM)
	NumSchedulerSteps         int     // V0 multi-step: tokens per streamed chunk
	MaxNumPartialPrefills     int
	Quantization              string // "auto": the checkpoint's (see quantMethod)
	Dtype                     string
	EnableExpertParallel      bool
	// LoRA: the slots are space parameters, the rest server flags
	// (--enable-lora, --lora-modules, --max-cpu-loras).
	MaxLoras    int
	MaxLoraRank int
	EnableLoRA  bool
	LoRAModules []LoRAModule
	MaxCPULoras int
}

// StartupError is an engine failure during startup: the log lines vLLM
// prints for it (root cause first) and the failure class a tuner records.
type StartupError struct {
	Kind  error    // ErrOOM, ErrKVTooSmall, ErrInvalidArgument or ErrStartupFault
	Lines []string // log lines, without the final RuntimeError
}

func (e *StartupError) Error() string {
	if len(e.Lines) == 0 {
		return e.Kind.Error()
	}
	return e.Lines[len(e.Lines)-1]
}

func (e *StartupError) Unwrap() error { return e.Kind }

// Kinds of startup failure. They are distinct from package trial's errors so
// that sim does not dictate trial's taxonomy; Runner maps them to classes.
var (
	ErrOOM             = errors.New("out of memory")
	ErrKVTooSmall      = errors.New("kv cache too small")
	ErrInvalidArgument = errors.New("invalid engine argument")
	ErrStartupFault    = errors.New("injected startup failure")
)

func invalid(format string, args ...any) *StartupError {
	return &StartupError{Kind: ErrInvalidArgument, Lines: []string{"ValueError: " + fmt.Sprintf(format, args...)}}
}

// ResolveArgs builds the engine arguments for a target: vLLM's defaults for
// it (GPU-dependent ones included), overlaid with the values of cfg. Names
// cfg holds that the space does not know, or that the target's vLLM version
// does not have, are an ErrInvalidArgument (vLLM: unrecognized arguments).
// Names absent from cfg get vLLM's derived defaults: max_num_seqs is
// clipped to max_num_batched_tokens, and without chunked prefill the token
// budget defaults to max_model_len.
func ResolveArgs(t spaces.Target, cfg spaces.Config) (EngineArgs, error) {
	base, err := spaces.Default()
	if err != nil {
		return EngineArgs{}, err
	}
	return resolveArgs(base, nil, t, cfg)
}

// resolveArgs is ResolveArgs with the default space already parsed and,
// optionally, already resolved for t (rs may be nil).
func resolveArgs(base, rs *spaces.Space, t spaces.Target, cfg spaces.Config) (EngineArgs, error) {
	version := t.EngineVersion
	if version == "" {
		version = spaces.DefaultEngineVersion
	}
	var unknown []string
	for _, name := range cfg.Names() {
		p, ok := base.Param(name)
		if !ok {
			if f, known := spaces.LookupFlag(name); known && f.In(version) {
				continue // accepted, not modelled (Unmodelled names it)
			}
		}
		if !ok || !versionHas(version, p) {
			unknown = append(unknown, spaces.FlagName(name))
		}
	}
	if len(unknown) > 0 {
		return EngineArgs{}, &StartupError{Kind: ErrInvalidArgument,
			Lines: []string{"vllm serve: error: unrecognized arguments: " + strings.Join(unknown, " ")}}
	}
	if t.GPUCount <= 0 {
		t.GPUCount = 1
	}
	mml := t.MaxModelLen
	if v, ok := cfg.Get("max_model_len"); ok {
		mml = v.Int()
	}
	if mml <= 0 {
		mml = t.Model.MaxPositionEmbeddings
	}
	if rs == nil {
		var err error
		if rs, err = resolveFor(base, t); err != nil {
			return EngineArgs{}, err
		}
	}
	get := func(name string) spaces.Value {
		if v, ok := cfg.Get(name); ok {
			return v
		}
		if p, ok := rs.Param(name); ok {
			return p.Default
		}
		if p, ok := base.Param(name); ok {
			return p.Default
		}
		return spaces.Value{}
	}
	a := EngineArgs{
		MaxNumSeqs:                get("max_num_seqs").Int(),
		MaxNumBatchedTokens:       get("max_num_batched_tokens").Int(),
		GPUMemoryUtilization:      get("gpu_memory_utilization").Float(),
		BlockSize:                 get("block_size").Int(),
		EnableChunkedPrefill:      get("enable_chunked_prefill").Bool(),
		EnablePrefixCaching:       get("enable_prefix_caching").Bool(),
		KVCacheDtype:              get("kv_cache_dtype").Str(),
		TensorParallelSize:        get("tensor_parallel_size").Int(),
		DataParallelSize:          get("data_parallel_size").Int(),
		MaxModelLen:               mml,
		EnforceEager:              get("enforce_eager").Bool(),
		LongPrefillTokenThreshold: get("long_prefill_token_threshold").Int(),
		SchedulingPolicy:          get("scheduling_policy").Str(),
		AsyncScheduling:           get("async_scheduling").Bool(),
		SwapSpace:                 get("swap_space").Float(),
		NumSchedulerSteps:         max(1, get("num_scheduler_steps").Int()),
		MaxNumPartialPrefills:     max(1, get("max_num_partial_prefills").Int()),
		Quantization:              get("quantization").Str(),
		Dtype:                     get("dtype").Str(),
		EnableExpertParallel:      get("enable_expert_parallel").Bool(),
		MaxLoras:                  get("max_loras").Int(),
		MaxLoraRank:               get("max_lora_rank").Int(),
	}
	// vLLM's derived defaults (EngineArgs._set_default_args, SchedulerConfig).
	if !cfg.Has("max_num_batched_tokens") && !a.EnableChunkedPrefill {
		a.MaxNumBatchedTokens = max(a.MaxNumBatchedTokens, a.MaxModelLen)
	}
	if !cfg.Has("max_num_seqs") && a.MaxNumSeqs > a.MaxNumBatchedTokens {
		a.MaxNumSeqs = a.MaxNumBatchedTokens
	}
	if a.KVCacheDtype == "" {
		a.KVCacheDtype = "auto"
	}
	if a.SchedulingPolicy == "" {
		a.SchedulingPolicy = "fcfs"
	}
	return a, nil
}

// Unmodelled lists the flags of cfg the simulator accepts but does not
// model (vLLM flags outside the built-in space), as "--flag=value".
func Unmodelled(cfg spaces.Config) []string {
	base, err := spaces.Default()
	if err != nil {
		return nil
	}
	var out []string
	for _, name := range cfg.Names() {
		if _, ok := base.Param(name); ok {
			continue
		}
		v, _ := cfg.Get(name)
		out = append(out, spaces.FlagName(name)+"="+v.String())
	}
	return out
}

// UnmodelledLine is the log line that names the flags the simulation
// ignores ("" when none).
func UnmodelledLine(cfg spaces.Config) string {
	u := Unmodelled(cfg)
	if len(u) == 0 {
		return ""
	}
	return "vllm-sim: accepted but not modelled (no effect on the simulated performance): " + strings.Join(u, " ")
}

func versionHas(version string, p *spaces.Param) bool {
	if p.Since != "" {
		if c, err := spaces.CompareVersions(version, p.Since); err == nil && c < 0 {
			return false
		}
	}
	if p.Until != "" {
		if c, err := spaces.CompareVersions(version, p.Until); err == nil && c >= 0 {
			return false
		}
	}
	return true
}

// Validate applies vLLM's configuration checks (vllm/config/scheduler.py
// verify_max_model_len, ParallelConfig, ModelConfig; reference §1.3). They
// run before any GPU work; vLLM raises ValueError and the server exits 1.
func (a EngineArgs) Validate(t spaces.Target) *StartupError {
	m := t.Model
	gpus := max(1, t.GPUCount)
	switch {
	case a.MaxNumSeqs < 1:
		return invalid("max_num_seqs (%d) must be >= 1.", a.MaxNumSeqs)
	case a.MaxNumBatchedTokens < 1:
		return invalid("max_num_batched_tokens (%d) must be >= 1.", a.MaxNumBatchedTokens)
	case a.GPUMemoryUtilization <= 0 || a.GPUMemoryUtilization > 1:
		return invalid("GPU memory utilization must be within (0, 1]. Got %g.", a.GPUMemoryUtilization)
	case a.BlockSize < 1:
		return invalid("block_size (%d) must be a positive integer.", a.BlockSize)
	case a.TensorParallelSize < 1 || a.DataParallelSize < 1:
		return invalid("tensor_parallel_size and data_parallel_size must be >= 1.")
	case a.MaxModelLen > m.MaxPositionEmbeddings:
		return invalid("User-specified max_model_len (%d) is greater than the derived max_model_len (max_position_embeddings=%d or model_max_length=None in model's config.json). To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.", a.MaxModelLen, m.MaxPositionEmbeddings)
	case a.MaxModelLen < 1:
		return invalid("max_model_len (%d) must be >= 1.", a.MaxModelLen)
	case m.Heads%a.TensorParallelSize != 0:
		return invalid("Total number of attention heads (%d) must be divisible by tensor parallel size (%d).", m.Heads, a.TensorParallelSize)
	case a.TensorParallelSize*a.DataParallelSize > gpus:
		return invalid("World size (%d) is larger than the number of available GPUs (%d) in this node.", a.TensorParallelSize*a.DataParallelSize, gpus)
	case !a.EnableChunkedPrefill && a.MaxNumBatchedTokens < a.MaxModelLen:
		return invalid("max_num_batched_tokens (%d) is smaller than max_model_len (%d). This effectively limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease max_model_len.", a.MaxNumBatchedTokens, a.MaxModelLen)
	case a.MaxNumBatchedTokens < a.MaxNumSeqs:
		return invalid("max_num_batched_tokens (%d) must be greater than or equal to max_num_seqs (%d).", a.MaxNumBatchedTokens, a.MaxNumSeqs)
	case a.LongPrefillTokenThreshold < 0 || a.LongPrefillTokenThreshold > a.MaxModelLen:
		return invalid("long_prefill_token_threshold (%d) must be >= 0 and <= max_model_len (%d).", a.LongPrefillTokenThreshold, a.MaxModelLen)
	case a.MaxNumPartialPrefills > 1:
		return &StartupError{Kind: ErrInvalidArgument, Lines: []string{"NotImplementedError: Concurrent Partial Prefill is not supported by the V1 engine (max_num_partial_prefills > 1)."}}
	case a.SchedulingPolicy != "fcfs" && a.SchedulingPolicy != "priority":
		return invalid("scheduling policy %q is not supported.", a.SchedulingPolicy)
	case a.KVCacheDtype != "auto" && !strings.HasPrefix(a.KVCacheDtype, "fp8") && a.KVCacheDtype != "bfloat16" && a.KVCacheDtype != "float16":
		return invalid("Unknown kv cache dtype: %s", a.KVCacheDtype)
	}
	if se := a.validateQuant(t); se != nil {
		return se
	}
	return a.validateLoRA()
}

// validateQuant applies ModelConfig._verify_quantization and the methods'
// get_min_capability / get_supported_act_dtypes checks.
func (a EngineArgs) validateQuant(t spaces.Target) *StartupError {
	m, g := t.Model, t.GPU
	q := a.Quantization
	if q == "" || q == "auto" {
		return nil
	}
	ckpt := m.Quantization
	switch {
	case ckpt != "" && spaces.QuantFamily(q) != ckpt:
		return invalid("Quantization method specified in the model config (%s) does not match the quantization method specified in the `quantization` argument (%s).", ckpt, q)
	case ckpt == "" && q != "fp8":
		return invalid("Cannot find the config file for %s", q)
	}
	minCap := map[string]float64{"fp8": 8.0, "awq": 7.5, "awq_marlin": 8.0, "gptq": 6.0, "gptq_marlin": 8.0}[q]
	if cc := g.ComputeCapability; cc > 0 && cc < minCap {
		return invalid("The quantization method %s is not supported for the current GPU. Minimum capability: %d. Current capability: %d.", q, int(minCap*10), int(cc*10))
	}
	if (q == "awq" || q == "gptq") && a.Dtype == "bfloat16" {
		return invalid("torch.bfloat16 is not supported for quantization method %s. Supported dtypes: [torch.float16]", q)
	}
	return nil
}

// kvElemBytes is the size of one KV element.
func (a EngineArgs) kvElemBytes(m spaces.Model) float64 {
	if strings.HasPrefix(a.KVCacheDtype, "fp8") {
		return 1
	}
	return a.dtypeBytes(m)
}

// resolveFor resolves the space for t with the model's own max length (the
// config's max_model_len is applied and checked separately).
func resolveFor(base *spaces.Space, t spaces.Target) (*spaces.Space, error) {
	if t.GPUCount <= 0 {
		t.GPUCount = 1
	}
	t.MaxModelLen = 0
	rs, err := base.Resolve(t)
	if err != nil {
		return nil, &StartupError{Kind: ErrInvalidArgument, Lines: []string{"ValueError: " + err.Error()}}
	}
	return rs, nil
}
