package sim

import (
	"fmt"
	"strings"

	"github.com/vllm-tuner/tuner/spaces"
)

// Phase is one simulated startup phase and its realistic duration.
type Phase struct {
	Name    string
	Seconds float64
}

// Startup phase durations at --startup-scale 1 (reference §2.2: 8B on one
// H100 takes ~30-90 s to /health, ~15-25 s with --enforce-eager).
const (
	processInitS     = 6.0
	ncclInitS        = 4.0
	weightLoadGiBs   = 2.5 // page-cached safetensors
	weightLoadFixedS = 1.0
	compileBaseS     = 8.0
	compilePerLayerS = 0.1
	profileS         = 3.0
	graphPerSizeS    = 0.3
	apiServerS       = 1.0
)

// StartupPhases returns the phases of a successful start, up to
// "Application startup complete."; each lasts Seconds at --startup-scale 1.
func StartupPhases(t spaces.Target, a EngineArgs, plan MemoryPlan) []Phase {
	ph := []Phase{{"init", processInitS}}
	if a.TensorParallelSize > 1 || a.DataParallelSize > 1 {
		ph[0].Seconds += ncclInitS
	}
	ph = append(ph, Phase{"load_weights", weightLoadFixedS + plan.WeightsGiB/weightLoadGiBs})
	if !a.EnforceEager {
		ph = append(ph, Phase{"torch_compile", compileBaseS + compilePerLayerS*float64(t.Model.Layers)})
	}
	ph = append(ph, Phase{"profile", profileS})
	if !a.EnforceEager {
		ph = append(ph, Phase{"cuda_graphs", graphPerSizeS * float64(plan.CaptureSizes)})
	}
	ph = append(ph, Phase{"api_server", apiServerS})
	return ph
}

// failurePhases returns the phases a failing start goes through before it
// dies: argument errors die at once, memory errors at the stage they hit.
func failurePhases(t spaces.Target, a EngineArgs, plan MemoryPlan, err *StartupError) []Phase {
	all := StartupPhases(t, a, plan)
	stop := "init"
	switch {
	case err.Kind == ErrInvalidArgument:
		return []Phase{{"init", 2}}
	case strings.Contains(err.Error(), "Free memory on device"):
		stop = "init"
	case strings.Contains(err.Error(), "CUDA out of memory") && plan.KVTokens > 0:
		stop = "cuda_graphs"
	case strings.Contains(err.Error(), "CUDA out of memory") && plan.ActivationGiB == 0:
		stop = "load_weights"
	default:
		stop = "profile"
	}
	var out []Phase
	for _, p := range all {
		out = append(out, p)
		if p.Name == stop {
			break
		}
	}
	return out
}

func sumPhases(ph []Phase) float64 {
	var s float64
	for _, p := range ph {
		s += p.Seconds
	}
	return s
}

// SuccessLines are the vLLM-like log lines of a successful start, in order;
// the server interleaves them with the phase delays.
func SuccessLines(t spaces.Target, a EngineArgs, plan MemoryPlan) map[string][]string {
	w := map[string][]string{}
	w["init"] = []string{
		fmt.Sprintf("Using max model len %d", a.MaxModelLen),
	}
	if a.EnableChunkedPrefill {
		w["init"] = append(w["init"], fmt.Sprintf("Chunked prefill is enabled with max_num_batched_tokens=%d.", a.MaxNumBatchedTokens))
	}
	if a.AsyncScheduling {
		w["init"] = append(w["init"], "Asynchronous scheduling is enabled.")
	}
	w["init"] = append(w["init"], fmt.Sprintf(
		"Initializing a V1 LLM engine (v%s) with config: model=%s, max_seq_len=%d, tensor_parallel_size=%d, data_parallel_size=%d, enforce_eager=%s, kv_cache_dtype=%s, enable_prefix_caching=%s",
		t.Version(), t.Model.Name, a.MaxModelLen, a.TensorParallelSize, a.DataParallelSize,
		pyBool(a.EnforceEager), a.KVCacheDtype, pyBool(a.EnablePrefixCaching)))
	w["load_weights"] = []string{
		"Starting to load model " + t.Model.Name + "...",
		fmt.Sprintf("Model loading took %.2f GiB and %.2f seconds", plan.WeightsGiB, weightLoadFixedS+plan.WeightsGiB/weightLoadGiBs),
	}
	if a.EnforceEager {
		w["load_weights"] = append(w["load_weights"], "Cudagraph is disabled under eager mode")
	} else {
		w["torch_compile"] = []string{fmt.Sprintf("torch.compile takes %.2f s in total", compileBaseS+compilePerLayerS*float64(t.Model.Layers))}
	}
	w["profile"] = []string{
		fmt.Sprintf("Memory profiling takes %.2f seconds. Total non KV cache memory: %.2fGiB; torch peak memory increase: %.2fGiB; non-torch forward increase memory: %.2fGiB; weights memory: %.2fGiB.",
			profileS, plan.WeightsGiB+plan.ActivationGiB+plan.NonTorchGiB, plan.ActivationGiB, plan.NonTorchGiB, plan.WeightsGiB),
		fmt.Sprintf("Available KV cache memory: %.2f GiB", plan.KVGiB),
		fmt.Sprintf("GPU KV cache size: %s tokens", commas(plan.KVTokens)),
		fmt.Sprintf("Maximum concurrency for %s tokens per request: %.2fx", commas(a.MaxModelLen), plan.MaxConcurrency),
	}
	if !a.EnforceEager {
		w["cuda_graphs"] = []string{fmt.Sprintf("Graph capturing finished in %.0f secs, took %.2f GiB", graphPerSizeS*float64(plan.CaptureSizes), plan.GraphGiB)}
	}
	w["api_server"] = []string{
		fmt.Sprintf("init engine (profile, create kv cache, warmup model) took %.2f seconds", sumPhases(StartupPhases(t, a, plan))-processInitS),
		fmt.Sprintf("Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: %d", plan.NumBlocks),
	}
	return w
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// commas renders 450816 as "450,816" like Python's "{:,}".
func commas(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
