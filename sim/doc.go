// Package sim is the simulated vLLM: it owns the performance model (per-GPU
// efficiency constants in Calib; the hardware and model facts come from
// package spaces' catalog), the startup memory accounting (PlanMemory), one
// discrete-event engine core per data-parallel rank (Engine: a V1-like
// continuous-batching scheduler over a KV block pool with prefix caching and
// recompute preemption, and a roofline step-time model), and two drivers
// for it:
//
//   - the virtual clock: Runner.Run(ctx, cfg, workload) evaluates a config
//     on a trial.Workload in milliseconds of CPU, deterministic for a seed
//     (noise off: the exact ground truth), and returns a trial.Result whose
//     metrics come from trial.Summarize (vLLM bench's definitions) and
//     whose latency breakdown is read from the same phase histograms the
//     server exports;
//   - the real clock: Serve runs an OpenAI-compatible HTTP server with
//     vLLM's endpoints, log lines, failure behaviour, /metrics names (the
//     per-request queue, prefill, decode, inference and e2e histograms
//     from the scheduler's timestamps, as vLLM V1 records them) and fault
//     injection; cmd/vllm-sim is its command line (ParseServeArgs
//     emulates vLLM's argparse).
//
// Model of one engine step (reference/vllm.md §5.2): GEMM time
// max(weights/TP / (HBM x MemEff), 2 x params/TP x tokens / (FLOPS x MFU x
// N/(N+32))) plus attention time max(KV bytes read / bandwidth, attention
// FLOPs / FLOPS), a fixed cost, two all-reduces per layer with TP > 1,
// kernel-launch cost per layer without CUDA graphs, and CPU scheduling
// time that async scheduling overlaps; optional seeded log-normal noise
// (~2%) and rare jitter.
//
// Weight formats, experts and adapters (quant.go, lora.go): weights take
// the --quantization method's width (a pre-quantized checkpoint's by
// default) and GEMMs its speed (FP8 tensor cores from compute capability
// 8.9, weight-only FP8 before, Marlin and legacy 4-bit kernels); a mixture
// of experts holds all experts, computes with the routed ones and reads
// those its tokens were routed to, and --enable-expert-parallel splits the
// experts over TP x DP GPUs (an all-to-all per layer); --enable-lora
// allocates --max-loras slots of --max-lora-rank before the KV cache, a
// step batches at most max_loras adapters and an adapter not in a slot is
// loaded (LRU) before its step.
//
// Text prompts sent to the server are counted as about four bytes per
// token (textTokens); chat messages add four template tokens each. Token-id
// prompts are counted exactly, and their block hashes drive prefix caching.
// Generated text cycles through a small word list, one word per token.
// Without ignore_eos the output length is drawn (seeded) from a geometric
// distribution with mean 256, bounded by min_tokens and max_tokens.
package sim
