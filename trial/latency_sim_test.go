package trial_test

import (
	"context"
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// TestSimLatencyBreakdown runs the real vllm-sim and decomposes each level
// from its /metrics histograms scraped before and after: queue + prefill +
// decode + the client's share is the client's mean E2EL by construction,
// so what is checked is that the engine's part alone is within 2% of it
// (loopback HTTP and SSE cost far less than that), that the engine counted
// the requests the client received, and that the parts move with the load.
func TestSimLatencyBreakdown(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time simulator run")
	}
	tg := simTarget(t)
	cfg := simConfig(t, tg, map[string]spaces.Value{"max_num_seqs": spaces.IntValue(8)})
	w := simWorkload()
	w.Output = trial.LengthDist{Kind: "uniform", Min: 16, Max: 48}
	w.NumRequests, w.Warmup = 48, 0
	w.Levels = []float64{4, 24}
	r := simRunner(t)
	res, err := r.Run(context.Background(), cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	trial.NoLeftoversForTest(t)
	if !res.Usable() || len(res.Levels) != 2 {
		t.Fatalf("trial %s: %s", res.String(), res.Error)
	}
	var queueShare [2]float64
	for i, l := range res.Levels {
		b := l.Metrics.Breakdown
		if b == nil {
			t.Fatalf("c=%d: no breakdown", l.Concurrency)
		}
		sum := b.Queue.Mean + b.Prefill.Mean + b.Decode.Mean + b.ClientMS
		t.Logf("c=%d: queue %.1f + prefill %.1f + decode %.1f + client %.2f = %.1f ms; client E2EL mean %.1f ms (%d requests, engine %d), TTFT %.1f ms",
			l.Concurrency, b.Queue.Mean, b.Prefill.Mean, b.Decode.Mean, b.ClientMS, sum, b.ClientE2ELMS, b.ClientRequests, b.EngineRequests, b.ClientTTFTMS)
		if b.EngineRequests != b.ClientRequests || b.ClientRequests == 0 {
			t.Errorf("c=%d: engine counted %d requests, client %d", l.Concurrency, b.EngineRequests, b.ClientRequests)
		}
		if math.Abs(sum-b.ClientE2ELMS) > 1e-6*b.ClientE2ELMS {
			t.Errorf("c=%d: parts add to %.3f ms, E2EL %.3f ms", l.Concurrency, sum, b.ClientE2ELMS)
		}
		if d := math.Abs(b.EngineMS()-b.ClientE2ELMS) / b.ClientE2ELMS; d > 0.02 {
			t.Errorf("c=%d: engine's queue+prefill+decode %.1f ms is %.1f%% off the client's E2EL %.1f ms (want <= 2%%)", l.Concurrency, b.EngineMS(), 100*d, b.ClientE2ELMS)
		}
		if d := math.Abs(b.Queue.Mean + b.Prefill.Mean - b.ClientTTFTMS); d > 0.02*b.ClientE2ELMS {
			t.Errorf("c=%d: queue+prefill %.1f ms vs client TTFT %.1f ms", l.Concurrency, b.Queue.Mean+b.Prefill.Mean, b.ClientTTFTMS)
		}
		if b.Prefill.Mean <= 0 || b.Decode.Mean <= 0 {
			t.Errorf("c=%d: empty phase: %+v", l.Concurrency, b)
		}
		queueShare[i] = b.Shares()[0]
	}
	// Under max_num_seqs 8, 4 in flight never wait for a slot; 24 do, two
	// thirds of them for most of a request's time.
	if queueShare[0] > 0.05 || queueShare[1] < 0.3 {
		t.Errorf("queue shares %.3f (c=4), %.3f (c=24)", queueShare[0], queueShare[1])
	}
}
