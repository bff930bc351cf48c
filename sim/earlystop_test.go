package sim

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/trial"
)

// TestShippedWorkloadStopsEarly serves the shipped short-high-concurrency
// workload (a closed loop at concurrency 256 whose identical requests
// complete in synchronised waves) on the virtual clock, with vllm-sim's
// step noise, and asks the live level's early-stop rule
// (StabilityConfig.StopEarly) at every request as the load generator
// would, with the requests finished by then: the level reaches a steady
// state with a throughput CI within the 2% target and stops before the
// end of the level. On the wall clock this depended on the machine
// keeping the engine's schedule (256 streams on 2 shared cores).
func TestShippedWorkloadStopsEarly(t *testing.T) {
	tg := testTarget(t, "Llama-3.1-8B", "H100-80GB", 1)
	cfg := defaults(t, tg)
	w, err := trial.LoadWorkload("short-high-concurrency")
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, tg)
	a, plan, se := r.Start(cfg)
	if se != nil {
		t.Fatal(se)
	}
	e := NewEngine(tg, a, r.calib, plan, WithNoise(1))
	recs, _, err := simulate(context.Background(), []*Engine{e}, w.Requests(), true, w.Arrival.Concurrency, 0, a.MaxModelLen, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sc := trial.DefaultStabilityConfig()
	sc.Concurrency = w.Arrival.Concurrency
	// Requests in the order the closed loop issues them; next is issued
	// when a user's previous request ends, with every request that ended
	// by then done.
	byEnd := slices.Clone(recs)
	end := func(r trial.Record) time.Duration { return r.Start + r.Latency() }
	slices.SortStableFunc(byEnd, func(x, y trial.Record) int { return cmp.Compare(end(x), end(y)) })
	limit := w.Warmup + w.NumRequests
	for next := w.Warmup + 1; next < limit; next++ {
		at := recs[next].Start
		// done: every request that ended at or before the issue.
		n := sort.Search(len(byEnd), func(i int) bool { return end(byEnd[i]) > at })
		a, stop := sc.StopEarly(next, w.Warmup, w.NumRequests, byEnd[:n])
		if !stop {
			continue
		}
		t.Logf("stopped before request %d of %d: %d done, %+v", next, limit, n, a.Stability)
		if a.CIHalfWidth > sc.CITarget || !a.Stable {
			t.Errorf("stopped on %+v", a.Stability)
		}
		return
	}
	t.Errorf("no early stop over the %d requests of the level (final analysis %+v)", limit, trial.Analyze(recs[:limit], sc).Stability)
}
