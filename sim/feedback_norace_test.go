//go:build !race

// Pure computation (the feedback controller and capacity bisection on the
// virtual clock, one goroutine): built without -race only, run by `make
// norace` (see the Makefile).

package sim

import (
	"context"
	"math"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

// TestFeedbackAgreesWithBisection: on the virtual clock the feedback
// controller (AIMD on each window's TTFT p95) and capacity mode's
// bisection (at 1% resolution) answer "how many req/s at ttft_p95 <= X"
// within 5% of each other, for two targets and two workloads.
func TestFeedbackAgreesWithBisection(t *testing.T) {
	tg := h100(t, 1)
	cfg := defaults(t, tg, "max_num_seqs", 64)
	r := newRunner(t, tg, func(c *Config) {
		c.Capacity = trial.CapacityConfig{MaxConcurrency: 1024, MaxRate: 10000, Levels: 20, Tolerance: 0.01, Rounds: 3}
	})
	for _, tc := range []struct {
		name    string
		in, out trial.LengthDist
		slo     trial.SLO
	}{
		{"chat ttft_p95<=300ms", trial.LengthDist{Kind: "uniform", Min: 256, Max: 1024}, trial.LengthDist{Kind: "uniform", Min: 64, Max: 192},
			trial.SLO{{Metric: "ttft_p95", Op: "<=", Limit: 300}}},
		{"long-prefill ttft_p99<=1s", trial.LengthDist{Kind: "uniform", Min: 2048, Max: 4096}, trial.LengthDist{Kind: "fixed", Value: 64},
			trial.SLO{{Metric: "ttft_p99", Op: "<=", Limit: 1000}}},
		{"tpot_p95<=25ms", trial.LengthDist{Kind: "uniform", Min: 256, Max: 1024}, trial.LengthDist{Kind: "uniform", Min: 64, Max: 192},
			trial.SLO{{Metric: "tpot_p95", Op: "<=", Limit: 25}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := trial.Workload{Name: "fb", Prompt: tc.in, Output: tc.out, Arrival: trial.Arrival{Kind: "poisson", Rate: 1},
				NumRequests: 200, Seed: 5, SLO: tc.slo}
			bw := w
			bw.Capacity = true
			bis, err := r.Run(context.Background(), cfg, bw)
			if err != nil || !bis.Usable() {
				t.Fatalf("bisection: %v %s %s", err, bis.String(), bis.Error)
			}
			fw := w
			fw.Feedback = true
			fres, err := r.Run(context.Background(), cfg, fw)
			if err != nil || !fres.Usable() {
				t.Fatalf("feedback: %v %s %s", err, fres.String(), fres.Error)
			}
			fb := fres.Feedback
			for _, win := range fb.Windows {
				t.Logf("  t=%6.1fs %-5s %7.3f req/s  %s %8.1f ms  met %v", win.StartS, win.Phase, win.Rate, fb.Metric, win.Tail, win.Met)
			}
			d := (fb.Sustained - bis.Capacity) / bis.Capacity
			t.Logf("feedback sustains %.3f req/s (bounded %v, %d windows), bisection %.3f req/s (%d levels): %+.1f%%",
				fb.Sustained, fb.Bounded, len(fb.Windows), bis.Capacity, len(bis.Levels), 100*d)
			if !fb.Bounded || math.Abs(d) > 0.05 {
				t.Errorf("feedback %.3f req/s vs bisection %.3f req/s (%+.1f%%, want within 5%%)", fb.Sustained, bis.Capacity, 100*d)
			}
			if len(fres.Levels) != len(fb.Windows) || fres.Capacity != fb.Sustained || !fres.Levels[fres.Primary].SLOMet {
				t.Errorf("result: %d levels for %d windows, capacity %v, primary %d", len(fres.Levels), len(fb.Windows), fres.Capacity, fres.Primary)
			}
			// The trace is AIMD: a passing hold window adds a constant
			// step, a failing one multiplies the rate by the backoff.
			for i := 1; i < len(fb.Windows); i++ {
				prev, cur := fb.Windows[i-1], fb.Windows[i]
				if prev.Phase == trial.FeedbackHold && !prev.Met && !within(cur.Rate, 0.9*prev.Rate, 0.002) {
					t.Errorf("window %d: %.3f req/s after a miss at %.3f", i, cur.Rate, prev.Rate)
				}
				if prev.Phase == trial.FeedbackHold && prev.Met && cur.Rate <= prev.Rate {
					t.Errorf("window %d: %.3f req/s after a pass at %.3f", i, cur.Rate, prev.Rate)
				}
				if cur.StartS < prev.StartS+prev.Seconds-1e-9 {
					t.Errorf("window %d starts at %.2fs, before the previous one ended", i, cur.StartS)
				}
			}
		})
	}
}
