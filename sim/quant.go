package sim

import (
	"math"

	"github.com/vllm-tuner/tuner/spaces"
)

// Weight formats and the mixture-of-experts layout (reference §5.3
// "Quantization"): what the weights weigh on one GPU, what one step reads of
// them, and how fast the GEMMs run in the format.

// quantMethod is the method the engine runs: the --quantization given, or
// the checkpoint's own (vLLM picks the Marlin kernel for awq/gptq
// checkpoints on GPUs that have it, compute capability >= 8.0).
func (a EngineArgs) quantMethod(m spaces.Model) string {
	if a.Quantization != "" && a.Quantization != "auto" {
		return a.Quantization
	}
	switch m.Quantization {
	case "awq":
		return "awq_marlin"
	case "gptq":
		return "gptq_marlin"
	}
	return m.Quantization
}

// dtypeBytes is the activation (and unquantized weight) element size.
func (a EngineArgs) dtypeBytes(m spaces.Model) float64 {
	switch a.Dtype {
	case "float32", "float":
		return 4
	case "bfloat16", "float16", "half":
		return 2
	}
	return m.DtypeBytes
}

// servedModel is the model as the engine holds it: weights in the served
// dtype (quantized ones keep their width).
func (a EngineArgs) servedModel(m spaces.Model) spaces.Model {
	m.DtypeBytes = a.dtypeBytes(m)
	return m
}

// weightsPerGPU is what one GPU holds: the weights split by TP; with
// expert parallelism the routed experts are split over all TP x DP GPUs
// instead of being copied to every DP replica.
func weightsPerGPU(m spaces.Model, a EngineArgs) float64 {
	total := a.servedModel(m).WeightBytesAs(a.quantMethod(m))
	return m.ShardBytes(total, a.TensorParallelSize, a.DataParallelSize, a.EnableExpertParallel)
}

// quantFlopsScale multiplies the GEMM throughput for the weight format:
// FP8 GEMMs on GPUs with FP8 tensor cores (compute capability >= 8.9) run
// at the FP8 rate less the cost of quantizing activations per token; on
// older GPUs FP8 is weight-only (Marlin) and dequantizes into BF16 GEMMs,
// as do the 4-bit Marlin kernels; the legacy awq and gptq kernels
// dequantize far less efficiently at large batch; float32 has no tensor
// cores.
func quantFlopsScale(method string, dtypeBytes float64, g spaces.GPU) float64 {
	if dtypeBytes >= 4 {
		return 0.07 // FP32 CUDA cores vs dense BF16 tensor cores (H100: 67 vs 990 TFLOPS)
	}
	switch method {
	case "fp8":
		if g.FP8TFLOPS > 0 && (g.ComputeCapability == 0 || g.ComputeCapability >= 8.9) {
			return 0.8 * g.FP8TFLOPS / g.BF16TFLOPS
		}
		return 0.9
	case "awq_marlin", "gptq_marlin":
		return 0.85
	case "gptq":
		return 0.5
	case "awq":
		return 0.35
	}
	return 1
}

// expertBytesRead is the share of the routed experts' weights a step of n
// tokens reads: each token picks k of E experts, so an expert goes unread
// with probability (1-k/E)^n (decode at batch 1 reads k experts, large
// batches all of them).
func expertReadShare(m spaces.Model, n float64) float64 {
	if m.Experts == 0 {
		return 1
	}
	miss := 1 - float64(m.ExpertsPerToken)/float64(m.Experts)
	return 1 - math.Pow(miss, n)
}
