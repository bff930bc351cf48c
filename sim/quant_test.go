package sim

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// batch1 is a single-stream decode-heavy workload (TPOT = one step).
func batch1() trial.Workload { return closedWorkload(128, 256, 1, 8) }

// Quantized weights (reference §5.3): FP8 halves the weight bytes and, on
// FP8 tensor cores, speeds prefill too; on an A100 it is weight-only
// (decode gains, prefill as BF16); an AWQ 4-bit checkpoint weighs about a
// third and decodes fastest at batch 1; the legacy awq kernel loses at
// large batch to awq_marlin.
func TestQuantizationSpeedAndMemory(t *testing.T) {
	type run struct {
		name, model, gpu, quant string
	}
	type fig struct{ weights, tpot, ttft float64 }
	figs := map[string]fig{}
	for _, r := range []run{
		{"h100-bf16", "Llama-3.1-8B", "H100", "auto"},
		{"h100-fp8", "Llama-3.1-8B", "H100", "fp8"},
		{"a100-bf16", "Llama-3.1-8B", "A100-80GB", "auto"},
		{"a100-fp8", "Llama-3.1-8B", "A100-80GB", "fp8"},
		{"h100-awq", "Llama-3.1-8B-AWQ", "H100", "auto"},
	} {
		tg := testTarget(t, r.model, r.gpu, 1)
		tg.MaxModelLen = 4096
		cfg := defaults(t, tg, "quantization", r.quant)
		_, plan, se := newRunner(t, tg).Start(cfg)
		if se != nil {
			t.Fatalf("%s: %v", r.name, se)
		}
		long := closedWorkload(4000, 2, 1, 4) // prefill-bound TTFT
		figs[r.name] = fig{plan.WeightsGiB, runOK(t, tg, cfg, batch1()).TPOT.Median, runOK(t, tg, cfg, long).TTFT.Median}
		t.Logf("%-10s weights %5.2f GiB  TPOT %.2f ms  TTFT(4000) %.1f ms", r.name, figs[r.name].weights, figs[r.name].tpot, figs[r.name].ttft)
	}
	ratio := func(a, b string, f func(fig) float64) float64 { return f(figs[a]) / f(figs[b]) }
	w := func(f fig) float64 { return f.weights }
	tpot := func(f fig) float64 { return f.tpot }
	ttft := func(f fig) float64 { return f.ttft }
	checks := []struct {
		what   string
		got    float64
		lo, hi float64
	}{
		{"fp8/bf16 weights", ratio("h100-fp8", "h100-bf16", w), 0.5, 0.6},
		{"awq/bf16 weights", ratio("h100-awq", "h100-bf16", w), 0.3, 0.4},
		{"bf16/fp8 decode speed-up H100", ratio("h100-bf16", "h100-fp8", tpot), 1.4, 1.9},
		{"bf16/fp8 prefill speed-up H100", ratio("h100-bf16", "h100-fp8", ttft), 1.3, 2.0},
		{"bf16/fp8 decode speed-up A100", ratio("a100-bf16", "a100-fp8", tpot), 1.4, 1.9},
		{"bf16/fp8 prefill speed-up A100 (weight-only)", ratio("a100-bf16", "a100-fp8", ttft), 0.85, 1.0},
		{"bf16/awq decode speed-up H100", ratio("h100-bf16", "h100-awq", tpot), 1.8, 3.0},
	}
	for _, c := range checks {
		if c.got < c.lo || c.got > c.hi {
			t.Errorf("%s = %.2f, want in [%.2f, %.2f]", c.what, c.got, c.lo, c.hi)
		}
	}
	// Large batches: the legacy awq kernel dequantizes slowly.
	tg := testTarget(t, "Llama-3.1-8B-AWQ", "H100", 1)
	tg.MaxModelLen = 4096
	heavy := closedWorkload(1024, 128, 128, 256)
	marlin := runOK(t, tg, defaults(t, tg, "quantization", "awq_marlin"), heavy).OutputThroughput
	legacy := runOK(t, tg, defaults(t, tg, "quantization", "awq", "dtype", "float16"), heavy).OutputThroughput
	if !(marlin > 1.3*legacy) {
		t.Errorf("awq_marlin %.0f tok/s vs awq %.0f at batch 128: want Marlin well ahead", marlin, legacy)
	}
}

func runOK(t *testing.T, tg spaces.Target, cfg spaces.Config, w trial.Workload) *trial.Metrics {
	t.Helper()
	res := run(t, tg, cfg, w)
	if res.Status != trial.StatusOK {
		t.Fatalf("%s: %s", res.String(), res.Error)
	}
	return res.Metrics()
}

// vLLM's quantization refusals, with its messages.
func TestQuantizationRefusals(t *testing.T) {
	tests := []struct {
		model, gpu string
		kv         []any
		want       string
	}{
		{"Llama-3.1-8B", "H100", []any{"quantization", "awq"}, "Cannot find the config file for awq"},
		{"Llama-3.1-8B-AWQ", "H100", []any{"quantization", "fp8"}, "Quantization method specified in the model config (awq) does not match the quantization method specified in the `quantization` argument (fp8)."},
		{"Llama-3.1-8B-AWQ", "H100", []any{"quantization", "awq", "dtype", "bfloat16"}, "torch.bfloat16 is not supported for quantization method awq"},
	}
	for _, tt := range tests {
		tg := testTarget(t, tt.model, tt.gpu, 1)
		a, err := ResolveArgs(tg, defaults(t, tg, tt.kv...))
		if err != nil {
			t.Fatal(err)
		}
		se := a.Validate(tg)
		if se == nil || !errors.Is(se, ErrInvalidArgument) || !strings.Contains(se.Error(), tt.want) {
			t.Errorf("%s %v: %v, want %q", tt.model, tt.kv, se, tt.want)
		}
	}
	// A GPU below fp8's minimum capability (a user profile, e.g. a T4).
	tg := testTarget(t, "tiny", "L4", 1)
	tg.GPU.ComputeCapability = 7.5
	a, _ := ResolveArgs(tg, defaults(t, tg, "quantization", "fp8"))
	if se := a.Validate(tg); se == nil || !strings.Contains(se.Error(), "Minimum capability: 80. Current capability: 75.") {
		t.Errorf("fp8 on 7.5: %v", se)
	}
}

// A MoE holds all its experts but computes with the routed ones: Mixtral
// (46.7B, 12.9B active) weighs like a 47B model and decodes at batch 1
// about like a 13B one; with expert parallelism over DP 2 the experts are
// split between the GPUs, so a replica per GPU fits where it does not
// without.
func TestMoEActiveVsTotal(t *testing.T) {
	tg := testTarget(t, "Mixtral-8x7B", "H100", 2)
	tg.MaxModelLen = 4096
	cfg := defaults(t, tg, "tensor_parallel_size", 2)
	r := newRunner(t, tg)
	_, plan, se := r.Start(cfg)
	if se != nil {
		t.Fatal(se)
	}
	if math.Abs(plan.WeightsGiB-46.7e9*2/2/gib) > 0.5 {
		t.Errorf("weights per GPU %.2f GiB, want total/TP", plan.WeightsGiB)
	}
	moe := runOK(t, tg, cfg, batch1()).TPOT.Median
	dense := testTarget(t, "Llama-3.1-70B", "H100", 2)
	dense.MaxModelLen = 4096
	d70 := runOK(t, dense, defaults(t, dense, "tensor_parallel_size", 2), batch1()).TPOT.Median
	if !(moe < 0.5*d70) {
		t.Errorf("Mixtral TPOT %.2f ms vs Llama-70B %.2f: want active-parameter speed", moe, d70)
	}
	// DP 2 without EP: a full copy per GPU does not fit an 80 GB H100.
	noEP := run(t, tg, defaults(t, tg, "data_parallel_size", 2), batch1())
	if noEP.Status != trial.StatusFailed || noEP.Failure != trial.FailOOM {
		t.Errorf("Mixtral DP2 without EP: %s, want failed:oom", noEP.String())
	}
	ep := run(t, tg, defaults(t, tg, "data_parallel_size", 2, "enable_expert_parallel", true), closedWorkload(512, 128, 32, 128))
	tp := run(t, tg, defaults(t, tg, "tensor_parallel_size", 2), closedWorkload(512, 128, 32, 128))
	if ep.Status != trial.StatusOK || tp.Status != trial.StatusOK {
		t.Fatalf("EP %s (%s), TP %s", ep.String(), ep.Error, tp.String())
	}
	t.Logf("Mixtral 2xH100: TP2 %.0f tok/s %d KV tokens; DP2+EP %.0f tok/s %d KV tokens", tp.Metrics().OutputThroughput, tp.KVCacheTokens, ep.Metrics().OutputThroughput, ep.KVCacheTokens)
}

// Expert parallelism changes nothing for a dense model (vLLM ignores it)
// and, for a MoE, moves memory and adds the all-to-all.
func TestExpertParallel(t *testing.T) {
	tg := testTarget(t, "Qwen1.5-MoE-A2.7B", "H100", 2)
	w := closedWorkload(512, 128, 64, 256)
	off := run(t, tg, defaults(t, tg, "data_parallel_size", 2), w)
	on := run(t, tg, defaults(t, tg, "data_parallel_size", 2, "enable_expert_parallel", true), w)
	if off.Status != trial.StatusOK || on.Status != trial.StatusOK {
		t.Fatalf("%s %s", off.String(), on.String())
	}
	if !(on.KVCacheTokens > off.KVCacheTokens) || on.Metrics().OutputThroughput == off.Metrics().OutputThroughput {
		t.Errorf("EP: %d KV tokens %.0f tok/s; without: %d %.0f", on.KVCacheTokens, on.Metrics().OutputThroughput, off.KVCacheTokens, off.Metrics().OutputThroughput)
	}
}
