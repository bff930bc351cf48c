package sim

import "testing"

func TestExplore(t *testing.T) {
	tg := testTarget(t, "Llama-3.1-8B", "H100-80GB", 2)
	tg.MaxModelLen = 8192
	base := defaults(t, tg)
	show := func(name string, kv ...any) {
		cfg := defaults(t, tg, kv...)
		_ = base
		r1 := run(t, tg, cfg, closedWorkload(1024, 128, 1, 5))
		r2 := run(t, tg, cfg, closedWorkload(1024, 256, 256, 1000))
		if r1.Metrics() == nil {
			t.Logf("%-28s %s %s", name, r1.Status, r1.Error)
			return
		}
		m1, m2 := r1.Metrics(), r2.Metrics()
		t.Logf("%-28s kv=%7d vram=%.1f b1tpot=%.2f ttft=%.1f | sat out=%.0f tpot=%.1f ttft=%.0f p99itl=%.0f pre=%v", name, r1.KVCacheTokens, r1.PeakVRAMGiB, m1.TPOT.Mean, m1.TTFT.Mean, m2.OutputThroughput, m2.TPOT.Mean, m2.TTFT.Mean, m2.ITL.P99, r2.Telemetry.Preemptions)
	}
	show("default")
	show("mns=64", "max_num_seqs", 64)
	show("mns=128", "max_num_seqs", 128)
	show("mbt=2048", "max_num_batched_tokens", 2048)
	show("mbt=16384", "max_num_batched_tokens", 16384)
	show("util=0.5", "gpu_memory_utilization", 0.5)
	show("util=0.3", "gpu_memory_utilization", 0.3)
	show("util=0.25", "gpu_memory_utilization", 0.25)
	show("fp8", "kv_cache_dtype", "fp8")
	show("eager", "enforce_eager", true)
	show("tp2", "tensor_parallel_size", 2)
	show("dp2", "data_parallel_size", 2)
	show("async", "async_scheduling", true)
	show("bs8", "block_size", 8)
	show("bs128", "block_size", 128)
	show("nochunk", "enable_chunked_prefill", false, "max_num_batched_tokens", 8192)
	show("lpt256", "long_prefill_token_threshold", 256)
	show("noprefix", "enable_prefix_caching", false)
	show("priority", "scheduling_policy", "priority")
	for _, c := range []int{1, 4} {
		t70 := testTarget(t, "Llama-3.1-70B", "H100-80GB", c)
		t70.MaxModelLen = 8192
		r := run(t, t70, defaults(t, t70, "tensor_parallel_size", c), closedWorkload(1024, 128, 1, 3))
		t.Logf("70B tp%d: %s %s %s kv=%d", c, r.Status, r.Failure, r.Error, r.KVCacheTokens)
		if m := r.Metrics(); m != nil {
			t.Logf("   tpot=%.2f ttft=%.1f", m.TPOT.Mean, m.TTFT.Mean)
		}
	}
}
