package sim

import (
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

func h100(t *testing.T, gpus int) spaces.Target {
	tg := testTarget(t, "Llama-3.1-8B", "H100-80GB", gpus)
	tg.MaxModelLen = 8192
	return tg
}

func mustOK(t *testing.T, res trial.Result) *trial.Metrics {
	t.Helper()
	if res.Status != trial.StatusOK {
		t.Fatalf("status %s/%s: %s", res.Status, res.Failure, res.Error)
	}
	return res.Metrics()
}

// Under saturation, more max-num-seqs raises throughput and TPOT (vllm.md §5.3).
func TestShapeMaxNumSeqs(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(1024, 256, 512, 600)
	var prevOut, prevTPOT float64
	for _, s := range []int{32, 64, 128, 256} {
		m := mustOK(t, run(t, tg, defaults(t, tg, "max_num_seqs", s), w))
		t.Logf("max_num_seqs %4d: %.0f out tok/s, TPOT %.1f ms", s, m.OutputThroughput, m.TPOT.Mean)
		if m.OutputThroughput <= prevOut || m.TPOT.Mean <= prevTPOT {
			t.Errorf("max_num_seqs %d: throughput %.0f (prev %.0f) and TPOT %.1f (prev %.1f) should both rise", s, m.OutputThroughput, prevOut, m.TPOT.Mean, prevTPOT)
		}
		prevOut, prevTPOT = m.OutputThroughput, m.TPOT.Mean
	}
}

// A larger max-num-batched-tokens lowers TTFT (prompts take fewer steps, and
// under load the decodes leave a small budget little room for prefill) and
// raises p99 ITL (decodes share steps with bigger chunks); vllm.md §5.3.
func TestShapeMaxNumBatchedTokens(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(1024, 256, 256, 400)
	var prevTTFT, prevITL float64 = math.Inf(1), 0
	for _, b := range []int{512, 2048, 8192} {
		m := mustOK(t, run(t, tg, defaults(t, tg, "max_num_batched_tokens", b, "max_num_seqs", 256), w))
		t.Logf("max_num_batched_tokens %5d: TTFT mean %.0f ms p99 %.0f ms, ITL p99 %.1f ms, %.0f out tok/s", b, m.TTFT.Mean, m.TTFT.P99, m.ITL.P99, m.OutputThroughput)
		if m.TTFT.Mean >= prevTTFT || m.ITL.P99 <= prevITL {
			t.Errorf("budget %d: TTFT %.0f (prev %.0f) should fall and ITL p99 %.1f (prev %.1f) rise", b, m.TTFT.Mean, prevTTFT, m.ITL.P99, prevITL)
		}
		prevTTFT, prevITL = m.TTFT.Mean, m.ITL.P99
	}
}

// Lower gpu-memory-utilization shrinks the KV pool and, past a point, causes
// preemptions (vllm.md §5.3).
func TestShapeMemoryUtilization(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(1024, 512, 256, 400)
	prevKV := math.MaxInt
	var preemptAtHigh, preemptAtLow float64
	for _, u := range []float64{0.9, 0.7, 0.5, 0.3} {
		res := run(t, tg, defaults(t, tg, "gpu_memory_utilization", u), w)
		mustOK(t, res)
		t.Logf("util %.2f: KV %d tokens, preemptions %.0f, VRAM %.1f GiB", u, res.KVCacheTokens, res.Telemetry.Preemptions, res.PeakVRAMGiB)
		if res.KVCacheTokens >= prevKV {
			t.Errorf("util %.2f: KV %d tokens should be below %d", u, res.KVCacheTokens, prevKV)
		}
		prevKV = res.KVCacheTokens
		if u == 0.9 {
			preemptAtHigh = res.Telemetry.Preemptions
		}
		preemptAtLow = res.Telemetry.Preemptions
	}
	if preemptAtHigh != 0 || preemptAtLow == 0 {
		t.Errorf("preemptions: %.0f at util 0.9 (want 0), %.0f at 0.3 (want > 0)", preemptAtHigh, preemptAtLow)
	}
}

// kv-cache-dtype fp8 halves the bytes per token: about twice the tokens.
func TestShapeFP8KV(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(128, 8, 1, 1)
	auto := run(t, tg, defaults(t, tg), w)
	fp8 := run(t, tg, defaults(t, tg, "kv_cache_dtype", "fp8"), w)
	ratio := float64(fp8.KVCacheTokens) / float64(auto.KVCacheTokens)
	t.Logf("KV tokens auto %d, fp8 %d (x%.3f)", auto.KVCacheTokens, fp8.KVCacheTokens, ratio)
	if !within(ratio, 2, 0.01) {
		t.Errorf("fp8/auto KV tokens = %.3f, want 2", ratio)
	}
}

// enforce-eager raises batch-1 TPOT by ~1.3x (sgl-project/sglang PR #1401:
// Llama-3-8B bs=1 decode 7.06 ms with CUDA graphs vs 9.28 ms eager).
func TestShapeEnforceEager(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(128, 128, 1, 3)
	g := mustOK(t, run(t, tg, defaults(t, tg), w)).TPOT.Mean
	e := mustOK(t, run(t, tg, defaults(t, tg, "enforce_eager", true), w)).TPOT.Mean
	t.Logf("batch-1 TPOT: graphs %.2f ms, eager %.2f ms (x%.2f)", g, e, e/g)
	if !within(e/g, 1.3, 0.1) {
		t.Errorf("eager/graph TPOT = %.2f, want ~1.3", e/g)
	}
	// At large batch the gap shrinks (vllm.md §5.3).
	wb := closedWorkload(128, 128, 128, 256)
	gb := mustOK(t, run(t, tg, defaults(t, tg), wb)).TPOT.Mean
	eb := mustOK(t, run(t, tg, defaults(t, tg, "enforce_eager", true), wb)).TPOT.Mean
	if eb/gb >= e/g {
		t.Errorf("eager penalty at batch 128 (x%.2f) should be below batch 1 (x%.2f)", eb/gb, e/g)
	}
}

// TP2 cuts ITL by ~1.6-1.8x for 8B (vllm.md §5.3).
func TestShapeTensorParallel(t *testing.T) {
	tg := h100(t, 2)
	w := closedWorkload(512, 128, 1, 3)
	one := mustOK(t, run(t, tg, defaults(t, tg), w)).ITL.Mean
	two := mustOK(t, run(t, tg, defaults(t, tg, "tensor_parallel_size", 2), w)).ITL.Mean
	t.Logf("batch-1 ITL: TP1 %.2f ms, TP2 %.2f ms (x%.2f)", one, two, one/two)
	if r := one / two; r < 1.55 || r > 1.85 {
		t.Errorf("TP1/TP2 ITL = %.2f, want 1.6-1.8", r)
	}
}

// Peak VRAM ~= utilisation x HBM per GPU, whatever the load (vllm.md §5.5).
func TestShapePeakVRAM(t *testing.T) {
	tg := h100(t, 2)
	for _, kv := range [][]any{
		{"gpu_memory_utilization", 0.9},
		{"gpu_memory_utilization", 0.8},
		{"gpu_memory_utilization", 0.8, "tensor_parallel_size", 2},
		{"gpu_memory_utilization", 0.85, "data_parallel_size", 2},
	} {
		cfg := defaults(t, tg, kv...)
		light := run(t, tg, cfg, closedWorkload(128, 16, 1, 2))
		heavy := run(t, tg, cfg, closedWorkload(1024, 256, 256, 300))
		gpus := float64(cfg.Int("tensor_parallel_size") * cfg.Int("data_parallel_size"))
		want := cfg.Float("gpu_memory_utilization") * tg.GPU.MemoryGiB * gpus
		t.Logf("%v: peak %.2f GiB (util x HBM x GPUs = %.2f), source %s", kv, light.PeakVRAMGiB, want, light.VRAMSource)
		if light.PeakVRAMGiB != heavy.PeakVRAMGiB {
			t.Errorf("%v: peak VRAM depends on load: %.2f vs %.2f", kv, light.PeakVRAMGiB, heavy.PeakVRAMGiB)
		}
		if !within(light.PeakVRAMGiB, want, 0.04) {
			t.Errorf("%v: peak VRAM %.2f GiB, want %.2f +-4%%", kv, light.PeakVRAMGiB, want)
		}
	}
}

// Prefix caching skips the cached part of the shared prefix: lower TTFT.
func TestShapePrefixCaching(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(256, 32, 8, 64)
	w.PrefixLen = 2048
	on := run(t, tg, defaults(t, tg), w)
	off := run(t, tg, defaults(t, tg, "enable_prefix_caching", false), w)
	a, b := mustOK(t, on).TTFT.Mean, mustOK(t, off).TTFT.Mean
	t.Logf("shared 2048-token prefix: TTFT %.1f ms with prefix caching, %.1f ms without", a, b)
	if a >= 0.6*b {
		t.Errorf("prefix caching TTFT %.1f ms should be well below %.1f ms", a, b)
	}
}

// Async scheduling overlaps CPU scheduling with the GPU step: a few percent
// more throughput and lower ITL; TTFT rises slightly under load (a request
// arriving mid-step misses the already scheduled next step); vllm.md §5.3.
func TestShapeAsyncScheduling(t *testing.T) {
	tg := h100(t, 1)
	w := closedWorkload(512, 128, 64, 400)
	off := mustOK(t, run(t, tg, defaults(t, tg), w))
	on := mustOK(t, run(t, tg, defaults(t, tg, "async_scheduling", true), w))
	t.Logf("async off: %.0f tok/s, ITL %.2f ms, TTFT %.1f ms; on: %.0f tok/s, ITL %.2f ms, TTFT %.1f ms",
		off.OutputThroughput, off.ITL.Mean, off.TTFT.Mean, on.OutputThroughput, on.ITL.Mean, on.TTFT.Mean)
	if g := on.OutputThroughput / off.OutputThroughput; g <= 1 || g > 1.1 {
		t.Errorf("async throughput gain x%.3f, want a few percent", g)
	}
	if on.ITL.Mean >= off.ITL.Mean || on.TTFT.Mean <= off.TTFT.Mean {
		t.Errorf("async: ITL %.2f (off %.2f) should fall, TTFT %.1f (off %.1f) rise", on.ITL.Mean, off.ITL.Mean, on.TTFT.Mean, off.TTFT.Mean)
	}
}
