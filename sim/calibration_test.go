package sim

import (
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

// within reports whether got is within tol (relative) of want.
func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

// Calibration anchors of issue 3 (reference ../shared/reference/vllm.md §5.4).
// Each case names the public source of its figure.
func TestCalibrationBatchOne(t *testing.T) {
	cases := []struct {
		gpu        string
		tpot, ttft float64 // ms; 0 = not checked
		source     string
	}{
		{"H100-80GB", 6.5, 40, "TPOT: yobitelcomm.github.io/bench concurrency sweep (Llama-3.1-8B, 1xH100, vLLM 0.21, conc 1: TPOT p50 6.5 ms); " +
			"TTFT: 1024 prompt tokens at ~27k tok/s prefill (vllm.md §5.2: 8B on H100 ~36 us/token) = ~40 ms"},
		{"A100-80GB", 10, 0, "A100-80GB HBM roofline 16.06 GB / 2.039 TB/s at ~80% (vllm.md §5.4 toy step model: 10.2 ms; §6.5: 10 ms)"},
		{"A100-40GB", 13, 0, "johnmusgrave.com 'vLLM throughput-latency sweep on NVIDIA A100' (Llama-3.1-8B, A100-40GB, C=1: ~75 tok/s = 13.3 ms TPOT)"},
	}
	for _, c := range cases {
		t.Run(c.gpu, func(t *testing.T) {
			tg := testTarget(t, "Llama-3.1-8B", c.gpu, 1)
			res := run(t, tg, defaults(t, tg), closedWorkload(1024, 128, 1, 4))
			if res.Status != trial.StatusOK {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			m := res.Metrics()
			t.Logf("%s: TPOT %.2f ms (want ~%.1f), TTFT %.1f ms (want ~%.0f); source: %s", c.gpu, m.TPOT.Mean, c.tpot, m.TTFT.Mean, c.ttft, c.source)
			if !within(m.TPOT.Mean, c.tpot, 0.25) {
				t.Errorf("TPOT %.2f ms, want %.1f +-25%%", m.TPOT.Mean, c.tpot)
			}
			if c.ttft > 0 && !within(m.TTFT.Mean, c.ttft, 0.25) {
				t.Errorf("TTFT %.1f ms, want %.0f +-25%%", m.TTFT.Mean, c.ttft)
			}
		})
	}
}

// Prefill throughput of 8B: ~27k tok/s on H100, ~8k on A100 (vllm.md §5.2:
// "8B on H100 ~36 us/token (~27k tok/s); A100 ~110-140 us/token (7-9k
// tok/s)", derived from dense BF16 peak x the MFU of inference-sim's
// hardware_config.json, consistent with MLPerf v5.1 FP8 5.8k tok/s).
func TestCalibrationPrefillThroughput(t *testing.T) {
	for _, c := range []struct {
		gpu  string
		want float64
	}{{"H100-80GB", 27000}, {"A100-80GB", 8000}} {
		tg := testTarget(t, "Llama-3.1-8B", c.gpu, 1)
		res := run(t, tg, defaults(t, tg), closedWorkload(4096, 1, 32, 128))
		got := res.Metrics().TotalTokenThroughput
		t.Logf("%s prefill %.0f tok/s (want ~%.0f)", c.gpu, got, c.want)
		if !within(got, c.want, 0.25) {
			t.Errorf("%s prefill %.0f tok/s, want %.0f +-25%%", c.gpu, got, c.want)
		}
	}
}

// Decode-heavy 128 in / 1024 out on H100: ~7k output tok/s at 64 concurrent
// and 10k-20k at 256 (vllm.md §5.4 "Decode-heavy (128 in / 1024 out), H100:
// C=64 -> 7.0k tok/s; C=256 -> 14.4k tok/s", a roofline over the published
// 8B batch-1 ITL and HBM bandwidth).
func TestCalibrationDecodeHeavy(t *testing.T) {
	if testing.Short() {
		t.Skip("long workload")
	}
	tg := testTarget(t, "Llama-3.1-8B", "H100-80GB", 1)
	cfg := defaults(t, tg)
	res64 := run(t, tg, cfg, closedWorkload(128, 1024, 64, 192))
	res256 := run(t, tg, cfg, closedWorkload(128, 1024, 256, 512))
	r64, r256 := res64.Metrics().OutputThroughput, res256.Metrics().OutputThroughput
	t.Logf("decode-heavy H100: C=64 %.0f tok/s (want ~7000), C=256 %.0f tok/s (want 10k-20k)", r64, r256)
	if !within(r64, 7000, 0.25) {
		t.Errorf("C=64: %.0f tok/s, want 7000 +-25%%", r64)
	}
	if r256 < 10000 || r256 > 20000 {
		t.Errorf("C=256: %.0f tok/s, want 10k-20k", r256)
	}
}

// KV capacity: vLLM logs "GPU KV cache size: 450,816 tokens" for
// Llama-3.1-8B on H100 at gpu-memory-utilization 0.92 (vllm.md §2.2 step 7
// and §2.5 worked numbers: 55.05 GiB available).
func TestCalibrationKVCapacity(t *testing.T) {
	tg := testTarget(t, "Llama-3.1-8B", "H100-80GB", 1)
	tg.MaxModelLen = 8192
	for _, v := range []string{"0.11.0", "0.21.0"} {
		tg.EngineVersion = v
		_, plan, se := newRunner(t, tg).Start(defaults(t, tg, "gpu_memory_utilization", 0.92))
		if se != nil {
			t.Fatal(se)
		}
		t.Logf("vLLM %s: KV %d tokens, %.2f GiB available, max concurrency %.2fx (want ~450,816)", v, plan.KVTokens, plan.KVGiB, plan.MaxConcurrency)
		if !within(float64(plan.KVTokens), 450816, 0.10) {
			t.Errorf("vLLM %s: KV %d tokens, want 450,816 +-10%%", v, plan.KVTokens)
		}
	}
}

// Llama-3.1-70B (141 GB of BF16 weights) does not fit one 80 GB GPU; with
// TP4 it starts (vllm.md §5.1: 70B = 140 GB bf16).
func TestCalibration70B(t *testing.T) {
	w := closedWorkload(512, 16, 1, 2)
	t1 := testTarget(t, "Llama-3.1-70B", "H100-80GB", 1)
	res := run(t, t1, defaults(t, t1), w)
	if res.Status != trial.StatusFailed || res.Failure != trial.FailOOM {
		t.Errorf("70B TP1: %s/%s, want failed/oom", res.Status, res.Failure)
	}
	t4 := testTarget(t, "Llama-3.1-70B", "H100-80GB", 4)
	res = run(t, t4, defaults(t, t4, "tensor_parallel_size", 4), w)
	if res.Status != trial.StatusOK {
		t.Errorf("70B TP4: %s %s, want ok", res.Status, res.Error)
	}
	t.Logf("70B TP4: KV %d tokens, TPOT %.2f ms", res.KVCacheTokens, res.Metrics().TPOT.Mean)
}
