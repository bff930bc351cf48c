package sim

import (
	"context"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/internal/benchcpu"
	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// trial500 is what both benchmarks simulate: one 500-request trial of
// Llama-3.1-8B on an H100 (vLLM defaults, ShareGPT-like lengths, 64
// concurrent) on the virtual clock.
func trial500(b *testing.B) (spaces.Target, spaces.Config, trial.Workload, *Runner) {
	tg := testTarget(b, "Llama-3.1-8B", "H100-80GB", 1)
	w := trial.Workload{Name: "bench", Prompt: trial.LengthDist{Kind: "uniform", Min: 128, Max: 2048},
		Output: trial.LengthDist{Kind: "uniform", Min: 32, Max: 512}, Arrival: trial.Arrival{Kind: "closed", Concurrency: 64},
		NumRequests: 500, Seed: 1}
	return tg, defaults(b, tg), w, newRunner(b, tg)
}

// BenchmarkVirtualTrial500 is the 500-request trial (trial500), metric
// summary included. Target: under 50 ms of CPU per trial.
func BenchmarkVirtualTrial500(b *testing.B) {
	_, cfg, w, r := trial500(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := benchcpu.Process()
	for i := 0; i < b.N; i++ {
		if _, err := r.Run(ctx, cfg, w); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchmarkSimulate500 is the simulation alone (no metric summary): the
// engine and the virtual clock for the same 500 requests.
func BenchmarkSimulate500(b *testing.B) {
	tg, cfg, w, r := trial500(b)
	a, plan, se := r.Start(cfg)
	if se != nil {
		b.Fatal(se)
	}
	specs := w.Requests()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := benchcpu.Process()
	for i := 0; i < b.N; i++ {
		e := NewEngine(tg, a, r.calib, plan)
		if _, _, err := simulate(context.Background(), []*Engine{e}, specs, true, 64, 0, a.MaxModelLen, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// reportCPU reports CPU ms per 500-request trial (GC included; the
// process's CPU time measures the simulator's cost on a shared machine
// better than wall time) and simulated requests per CPU second.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	cpu := benchcpu.Process() - cpu0
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/trial")
	b.ReportMetric(float64(500*b.N)/cpu.Seconds(), "sim-req/cpu-s")
}
