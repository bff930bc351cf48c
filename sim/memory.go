package sim

import (
	"fmt"
	"math"

	"github.com/vllm-tuner/tuner/spaces"
)

const gib = float64(1 << 30)

// Memory constants of the startup accounting (reference §2.5, §5.5).
const (
	cudaContextGiB    = 0.30 // CUDA context, outside torch and outside the budget
	otherProcessesGiB = 0.15 // what a clean GPU already has in use
	nonTorchGiBTP1    = 0.20 // cuBLAS/NCCL workspaces, inside the budget
	nonTorchGiBTPn    = 0.60
	activationBaseGiB = 0.25
	graphBytesPerUnit = 115 // per capture size x layer x hidden unit
)

// MemoryPlan is the startup memory accounting of one GPU of one engine
// replica, in GiB unless stated.
type MemoryPlan struct {
	TotalGiB        float64 `json:"total_gib"`
	FreeGiB         float64 `json:"free_gib"`
	BudgetGiB       float64 `json:"budget_gib"` // gpu_memory_utilization x total
	WeightsGiB      float64 `json:"weights_gib"`
	LoRAGiB         float64 `json:"lora_gib,omitempty"` // max_loras slots at max_lora_rank
	ActivationGiB   float64 `json:"activation_gib"`
	NonTorchGiB     float64 `json:"non_torch_gib"`
	GraphGiB        float64 `json:"graph_gib"` // 0 with enforce_eager
	GraphInBudget   bool    `json:"graph_in_budget"`
	KVGiB           float64 `json:"kv_gib"` // "Available KV cache memory"
	KVBytesPerToken float64 `json:"kv_bytes_per_token"`
	NumBlocks       int     `json:"num_blocks"`
	KVTokens        int     `json:"kv_tokens"`
	MaxConcurrency  float64 `json:"max_concurrency"` // for max_model_len requests
	CaptureSizes    int     `json:"capture_sizes"`
	MaxCaptureSize  int     `json:"max_capture_size"`
	PeakGiB         float64 `json:"peak_gib"` // used on this GPU once loaded
	GPUs            int     `json:"gpus"`     // GPUs the engine uses (TP x DP)
}

// PeakTotalGiB is the memory used on all GPUs together.
func (p MemoryPlan) PeakTotalGiB() float64 { return p.PeakGiB * float64(p.GPUs) }

// kvBytesPerTokenGPU is the KV cache size of one token on one TP rank: the
// KV heads are split across ranks up to TP = kv_heads and replicated beyond.
func kvBytesPerTokenGPU(m spaces.Model, a EngineArgs) float64 {
	perRank := math.Max(1, float64(m.KVHeads)/float64(a.TensorParallelSize))
	return 2 * float64(m.Layers) * perRank * float64(m.HeadDim) * a.kvElemBytes(m)
}

// PlanMemory does the startup memory accounting of vLLM's gpu_worker and
// kv_cache_utils for one GPU: budget = util x total; minus weights/TP, the
// activation peak of the profiling run (grows with max_num_batched_tokens,
// and the sampler warm-up with max_num_seqs), non-torch memory and, from
// vLLM 0.21 on, the CUDA-graph pool; the rest is the KV pool. It fails the
// way vLLM does, with its log lines.
func PlanMemory(t spaces.Target, a EngineArgs) (MemoryPlan, *StartupError) {
	m, g := t.Model, t.GPU
	tp := float64(a.TensorParallelSize)
	p := MemoryPlan{TotalGiB: g.MemoryGiB, GPUs: a.TensorParallelSize * a.DataParallelSize}
	p.FreeGiB = g.MemoryGiB - otherProcessesGiB
	p.BudgetGiB = a.GPUMemoryUtilization * g.MemoryGiB
	if p.BudgetGiB > p.FreeGiB {
		return p, &StartupError{Kind: ErrOOM, Lines: []string{fmt.Sprintf(
			"ValueError: Free memory on device (%.2f/%.2f GiB) on startup is less than desired GPU memory utilization (%g, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
			p.FreeGiB, p.TotalGiB, a.GPUMemoryUtilization, p.BudgetGiB)}}
	}
	p.WeightsGiB = weightsPerGPU(m, a) / gib
	if p.WeightsGiB+cudaContextGiB > p.FreeGiB {
		return p, cudaOOM(p, math.Min(p.WeightsGiB, 1.96), p.FreeGiB-cudaContextGiB-math.Min(p.WeightsGiB, p.FreeGiB))
	}
	p.ActivationGiB = activationBaseGiB + m.ProfileActivationBytes(a.MaxNumBatchedTokens, a.MaxNumSeqs, a.dtypeBytes(m), a.TensorParallelSize)/gib
	if p.WeightsGiB+p.ActivationGiB+cudaContextGiB > p.FreeGiB {
		return p, cudaOOM(p, p.ActivationGiB, p.FreeGiB-cudaContextGiB-p.WeightsGiB)
	}
	p.NonTorchGiB = nonTorchGiBTP1
	if a.TensorParallelSize > 1 {
		p.NonTorchGiB = nonTorchGiBTPn
	}
	p.CaptureSizes, p.MaxCaptureSize = spaces.CaptureSizes(a.MaxNumSeqs)
	if !a.EnforceEager {
		p.GraphGiB = float64(p.CaptureSizes) * float64(m.Layers) * float64(m.Hidden) * graphBytesPerUnit / math.Sqrt(tp) / gib
	}
	p.GraphInBudget = spaces.GraphInBudget(t.Version())
	// LoRA slots are allocated with the model, before the KV cache.
	p.LoRAGiB = loraSlotsGiB(m, a)
	p.KVGiB = p.BudgetGiB - p.WeightsGiB - p.LoRAGiB - p.ActivationGiB - p.NonTorchGiB
	if p.GraphInBudget {
		p.KVGiB -= p.GraphGiB
	}
	avail := fmt.Sprintf("Available KV cache memory: %.2f GiB", p.KVGiB)
	if p.KVGiB <= 0 {
		return p, &StartupError{Kind: ErrOOM, Lines: []string{avail,
			"ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."}}
	}
	p.KVBytesPerToken = kvBytesPerTokenGPU(m, a)
	blockBytes := p.KVBytesPerToken * float64(a.BlockSize)
	p.NumBlocks = int(p.KVGiB * gib / blockBytes)
	p.KVTokens = p.NumBlocks * a.BlockSize
	need := float64(a.MaxModelLen) * p.KVBytesPerToken
	if need > p.KVGiB*gib || p.NumBlocks < ceilDiv(a.MaxModelLen, a.BlockSize) {
		est := (p.KVTokens / a.BlockSize) * a.BlockSize
		return p, &StartupError{Kind: ErrKVTooSmall, Lines: []string{avail, fmt.Sprintf(
			"ValueError: To serve at least one request with the models's max seq len (%d), (%.2f GiB KV cache is needed, which is larger than the available KV cache memory (%.2f GiB). Based on the available memory, the estimated maximum model length is %d. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
			a.MaxModelLen, need/gib, p.KVGiB, est)}}
	}
	p.MaxConcurrency = float64(p.NumBlocks) / float64(ceilDiv(a.MaxModelLen, a.BlockSize))
	p.PeakGiB = p.BudgetGiB + cudaContextGiB
	if !p.GraphInBudget {
		p.PeakGiB += p.GraphGiB
		if p.PeakGiB > p.FreeGiB {
			return p, cudaOOM(p, p.GraphGiB, p.FreeGiB-p.BudgetGiB-cudaContextGiB)
		}
	}
	return p, nil
}

func cudaOOM(p MemoryPlan, tried, free float64) *StartupError {
	free = math.Max(0, free)
	return &StartupError{Kind: ErrOOM, Lines: []string{fmt.Sprintf(
		"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %.2f GiB. GPU 0 has a total capacity of %.2f GiB of which %.2f GiB is free. Including non-PyTorch memory, this process has %.2f GiB memory in use.",
		tried, p.TotalGiB, free, p.TotalGiB-free-otherProcessesGiB)}}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
