package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// The estimate is the simulator's own accounting: its memory figures are
// PlanMemory's at vLLM's defaults, TP sizes beyond the GPUs are not tried,
// a model too large for one GPU says why, and more GPUs hold more KV.
func TestEstimateTarget(t *testing.T) {
	tg := testTarget(t, "Llama-3.1-70B", "H100-80GB", 2)
	tg.MaxModelLen = 4096
	rows, err := EstimateTarget(context.Background(), EstimateConfig{Target: tg, InputLen: 512, OutputLen: 128})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].TP != 1 || rows[1].TP != 2 {
		t.Fatalf("rows %+v", rows)
	}
	if rows[0].Fits || !strings.Contains(rows[0].Reason, "out of memory") {
		t.Errorf("70B on one H100: %+v", rows[0])
	}
	r := rows[1]
	if !r.Fits || r.KVTokens <= 0 || r.Single == nil || r.Peak == nil {
		t.Fatalf("70B on two H100s: %+v", r)
	}
	// The same figures as the engine's startup accounting.
	tg2 := tg
	tg2.GPUCount = 2
	a, err := ResolveArgs(tg2, defaults(t, tg2, "tensor_parallel_size", 2))
	if err != nil {
		t.Fatal(err)
	}
	plan, se := PlanMemory(tg2, a)
	if se != nil || plan.KVTokens != r.KVTokens || plan.WeightsGiB != r.WeightsGiB {
		t.Errorf("estimate %d KV tokens, %.2f GiB weights; PlanMemory %d, %.2f (%v)", r.KVTokens, r.WeightsGiB, plan.KVTokens, plan.WeightsGiB, se)
	}
	if want := float64(r.KVTokens) / 640; r.ConcurrencyAtRequest != want {
		t.Errorf("concurrency at request %v, want %v", r.ConcurrencyAtRequest, want)
	}
	// The envelope: a batch is faster in total and slower per request.
	if r.Peak.Concurrency <= 1 || r.Peak.OutputTokS <= r.Single.OutputTokS || r.Peak.TPOTP50MS < r.Single.TPOTP50MS {
		t.Errorf("envelope single %+v peak %+v", r.Single, r.Peak)
	}

	if _, err := EstimateTarget(context.Background(), EstimateConfig{Target: tg, InputLen: 4000, OutputLen: 200}); !errors.Is(err, ErrEstimateInput) {
		t.Errorf("a request longer than max_model_len: %v", err)
	}
}
