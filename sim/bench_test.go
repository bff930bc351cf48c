package sim

import (
	"context"
	"testing"

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
	for i := 0; i < b.N; i++ {
		if _, err := r.Run(ctx, cfg, w); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(500*b.N)/b.Elapsed().Seconds(), "sim-req/s")
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
	for i := 0; i < b.N; i++ {
		e := NewEngine(tg, a, r.calib, plan)
		if _, _, err := simulate(context.Background(), []*Engine{e}, specs, true, 64, 0, a.MaxModelLen); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(500*b.N)/b.Elapsed().Seconds(), "sim-req/s")
}
