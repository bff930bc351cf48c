package sim

import (
	"math"
	"testing"
)

// TestBreakdownVirtual: on the virtual clock the engine sees every request
// exactly when the client does, so queue + prefill + decode from the
// engine's histograms is the client's mean E2EL, queue + prefill its mean
// TTFT; and the phases move the way the load moves them (a queue builds
// only when requests outnumber max_num_seqs).
func TestBreakdownVirtual(t *testing.T) {
	tg := h100(t, 1)
	cfg := defaults(t, tg, "max_num_seqs", 8)
	w := closedWorkload(1024, 64, 4, 64)
	w.Levels = []float64{4, 32}
	res := run(t, tg, cfg, w)
	if !res.Usable() || len(res.Levels) != 2 {
		t.Fatalf("%s: %s", res.String(), res.Error)
	}
	var queue [2]float64
	for i, l := range res.Levels {
		b, m := l.Metrics.Breakdown, &l.Metrics
		if b == nil {
			t.Fatalf("level %d: no breakdown", i)
		}
		t.Logf("c=%d: queue %.1f ms, prefill %.1f ms, decode %.1f ms, client %.3f ms; E2EL mean %.1f ms, TTFT mean %.1f ms",
			l.Concurrency, b.Queue.Mean, b.Prefill.Mean, b.Decode.Mean, b.ClientMS, b.ClientE2ELMS, b.ClientTTFTMS)
		if b.EngineRequests != b.ClientRequests || b.ClientRequests != m.Completed {
			t.Errorf("c=%d: engine counted %d, client %d, metrics %d", l.Concurrency, b.EngineRequests, b.ClientRequests, m.Completed)
		}
		if d := math.Abs(b.EngineMS()-b.ClientE2ELMS) / b.ClientE2ELMS; d > 1e-4 {
			t.Errorf("c=%d: queue+prefill+decode %.3f ms vs E2EL %.3f ms (%.2g)", l.Concurrency, b.EngineMS(), b.ClientE2ELMS, d)
		}
		if d := math.Abs(b.Queue.Mean + b.Prefill.Mean - b.ClientTTFTMS); d > 1e-3*b.ClientTTFTMS {
			t.Errorf("c=%d: queue+prefill %.3f ms vs TTFT %.3f ms", l.Concurrency, b.Queue.Mean+b.Prefill.Mean, b.ClientTTFTMS)
		}
		if !within(b.EngineE2E.Mean, b.ClientE2ELMS, 1e-3*b.ClientE2ELMS) {
			t.Errorf("c=%d: engine e2e %.3f ms vs client %.3f ms", l.Concurrency, b.EngineE2E.Mean, b.ClientE2ELMS)
		}
		queue[i] = b.Queue.Mean
	}
	// At 4 in flight under max_num_seqs 8 nothing waits for a slot; at 32
	// three quarters of the requests wait for one.
	if queue[0] > 0.05*res.Levels[0].Metrics.E2EL.Mean || queue[1] < 0.5*res.Levels[1].Metrics.E2EL.Mean {
		t.Errorf("queue means %.1f ms (c=4) and %.1f ms (c=32)", queue[0], queue[1])
	}
}
