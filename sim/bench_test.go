package sim

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/trial"
)

// BenchmarkVirtualTrial500 is one 500-request trial of Llama-3.1-8B on an
// H100 (vLLM defaults, ShareGPT-like lengths, 64 concurrent) on the virtual
// clock. Target: under 50 ms of CPU per trial.
func BenchmarkVirtualTrial500(b *testing.B) {
	tg := testTarget(b, "Llama-3.1-8B", "H100-80GB", 1)
	cfg := defaults(b, tg)
	w := trial.Workload{Name: "bench", Prompt: trial.LengthDist{Kind: "uniform", Min: 128, Max: 2048},
		Output: trial.LengthDist{Kind: "uniform", Min: 32, Max: 512}, Arrival: trial.Arrival{Kind: "closed", Concurrency: 64},
		NumRequests: 500, Seed: 1}
	c := DefaultConfig()
	c.Target = tg
	r, err := NewRunner(c)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
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
	tg := testTarget(b, "Llama-3.1-8B", "H100-80GB", 1)
	cfg := defaults(b, tg)
	w := trial.Workload{Name: "bench", Prompt: trial.LengthDist{Kind: "uniform", Min: 128, Max: 2048},
		Output: trial.LengthDist{Kind: "uniform", Min: 32, Max: 512}, Arrival: trial.Arrival{Kind: "closed", Concurrency: 64},
		NumRequests: 500, Seed: 1}
	c := DefaultConfig()
	c.Target = tg
	r, err := NewRunner(c)
	if err != nil {
		b.Fatal(err)
	}
	a, plan, se := r.Start(cfg)
	if se != nil {
		b.Fatal(se)
	}
	specs := w.Requests()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		e := NewEngine(tg, a, r.calib, plan)
		if _, _, err := simulate(context.Background(), []*Engine{e}, specs, true, 64, 0, a.MaxModelLen, nil, nil); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, cpu0)
}

// cpuTime is the process's user+system CPU time: on a shared machine it
// measures the simulator's cost better than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports CPU ms per 500-request trial (GC included) and simulated
// requests per CPU second.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	cpu := cpuTime() - cpu0
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/trial")
	b.ReportMetric(float64(500*b.N)/cpu.Seconds(), "sim-req/cpu-s")
}
