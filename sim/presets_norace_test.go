//go:build !race

// Pure computation (the simulator, one goroutine, over the whole catalog):
// built without -race only, run by `make norace` (see the Makefile).

package sim

import (
	"context"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// TestPresetsMeaningfulOnCatalog runs vLLM's default config on every
// catalog model x GPU (the fewest GPUs it starts on) with every shipped
// preset, noise-free on the virtual clock: no preset may measure an
// overloaded run as if it were a steady state. An open-loop preset at a
// fixed rate overloads the small targets (8 req/s of chat: 2.8 req/s served
// on Llama-3.1-8B/L40S, 0.8 on Qwen2-72B/4xL40S); in capacity mode the
// trial's primary level is the SLO capacity, or it says that no rate from
// 1 req/s up meets the SLO (capacity 0); a closed loop is steady anywhere.
func TestPresetsMeaningfulOnCatalog(t *testing.T) {
	cat := spaces.DefaultCatalog()
	for _, name := range trial.BuiltinWorkloads() {
		w, err := trial.LoadWorkload(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cat.Models {
			for _, g := range cat.GPUs {
				for _, n := range []int{1, 2, 4, 8} {
					tg, _ := cat.Target(m.Name, g.Name, n)
					tg.MaxModelLen = 16384
					res, err := newRunner(t, tg).Run(context.Background(), defaults(t, tg, "tensor_parallel_size", n), w)
					if err != nil {
						t.Fatal(err)
					}
					if res.Status == trial.StatusFailed {
						continue // does not start on n GPUs: try more
					}
					pm, primary := res.Metrics(), res.Levels[res.Primary]
					t.Logf("%s on %s %dx%s: %s, %d levels, capacity %.3g, %.0f tok/s, TTFT p99 %.0f ms",
						name, m.Name, n, g.Name, res.String(), len(res.Levels), res.Capacity, pm.OutputThroughput, pm.TTFT.P99)
					switch {
					case w.Capacity && res.Capacity > 0:
						if !primary.SLOMet || pm.Overloaded {
							t.Errorf("%s on %s %dx%s: capacity %.3g at a level that fails the SLO: %v", name, m.Name, n, g.Name, res.Capacity, primary.Violations)
						}
					case w.Capacity:
						if primary.SLOMet {
							t.Errorf("%s on %s %dx%s: capacity 0 but the primary level meets the SLO", name, m.Name, n, g.Name)
						}
					case pm.Overloaded || res.Overloaded():
						t.Errorf("%s on %s %dx%s: the preset overloads the target: %s", name, m.Name, n, g.Name, res.Stability.Reason)
					}
					break
				}
			}
		}
	}
}
