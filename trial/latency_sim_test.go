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
// so what is checked is that the engine's part alone is never more than
// the client saw (the engine's stamps lie inside the client's), and within
// 2% of it (loopback HTTP and SSE cost far less than that) plus what this
// machine's scheduling measured during the run, that the engine counted
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
	probe := probeMachine(r)
	res, err := r.Run(context.Background(), cfg, w)
	if err != nil {
		t.Fatal(err)
	}
	lag := probe.Stop()
	t.Logf("machine: %v", lag)
	// The client's share crosses a few hand-offs per request (send, read of
	// the last chunk), each queued behind up to 24 streams' reads: measured
	// beside scripts/cpuload.sh (-race, load 10-14) 23-184 ms at p90 lags
	// of 12-36 ms.
	busy := liveSlackMs(lag, 2*liveHops)
	trial.NoLeftoversForTest(t)
	if !res.Usable() || len(res.Levels) != 2 {
		t.Fatalf("trial %s: %s", res.String(), res.Error)
	}
	var queueShare, queueMs, queueMax [2]float64
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
		const eps = 1e-6
		if e := b.EngineMS(); e > b.ClientE2ELMS*(1+eps) || e < 0.98*b.ClientE2ELMS-busy {
			t.Errorf("c=%d: engine's queue+prefill+decode %.1f ms vs the client's E2EL %.1f ms (want at most it, at least 98%% of it less %.1f ms)", l.Concurrency, e, b.ClientE2ELMS, busy)
		}
		if ttft := b.Queue.Mean + b.Prefill.Mean; ttft > b.ClientTTFTMS*(1+eps) || ttft < b.ClientTTFTMS-0.02*b.ClientE2ELMS-busy {
			t.Errorf("c=%d: queue+prefill %.1f ms vs client TTFT %.1f ms", l.Concurrency, ttft, b.ClientTTFTMS)
		}
		if b.Prefill.Mean <= 0 || b.Decode.Mean <= 0 {
			t.Errorf("c=%d: empty phase: %+v", l.Concurrency, b)
		}
		queueShare[i] = b.Shares()[0]
		queueMax[i] = 0.05*b.ClientE2ELMS + busy
		queueMs[i] = b.Queue.Mean
	}
	// Under max_num_seqs 8, 4 in flight never wait for a slot (only for the
	// next step, late on a busy machine); 24 do, two thirds of them for
	// most of a request's time.
	if queueMs[0] > queueMax[0] || queueShare[1] < 0.3 {
		t.Errorf("queue %.1f ms (share %.3f, allowed %.1f ms) at c=4, share %.3f at c=24", queueMs[0], queueShare[0], queueMax[0], queueShare[1])
	}
}
