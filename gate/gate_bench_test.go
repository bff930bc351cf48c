package gate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Synthetic smoke-tier runs for BenchmarkGateErrorRates: one cell, about 30 s
// of measurement at concurrency 16, so 300 requests and 10 throughput
// windows. Per-request TTFT and TPOT are lognormal (medians 150 ms and 18 ms,
// log-sd 0.5 and 0.12, the spread of a steady decode batch); every run also
// gets its own latency factor, lognormal with log-sd runNoise: 0 (the
// seeded simulator) or 1% (two runs of one config on one GPU never match
// exactly; the U test sees that as a real shift, only the threshold absorbs it).
const (
	benchPairs    = 20
	benchRequests = 300
	benchWindows  = 10
)

func benchRun(r *rand.Rand, id string, slowdown, runNoise float64) Run {
	f := slowdown * math.Exp(runNoise*r.NormFloat64())
	return Run{ID: id, Model: "m", Cells: []Cell{{Name: "smoke", Samples: map[string][]float64{
		"ttft":              lognormal(r, benchRequests, 150*f, 0.5),
		"tpot":              lognormal(r, benchRequests, 18*f, 0.12),
		"output_throughput": lognormal(r, benchWindows, 900/f, 0.02),
	}}}}
}

// BenchmarkGateErrorRates measures the gate itself: for each slowdown of
// NEW (1 = the same config twice) and threshold, 20 base/new pairs per
// iteration, and reports how many of 20 pairs the gate flags (any metric)
// and how many flag TPOT p50. At slowdown 1 that is the false-positive
// count (the issue wants <= 1 of 20), at 1.05 and 1.27 the power (>= 19
// and 20 of 20). More iterations (-benchtime 10x) average over more pairs.
//
//	go test ./gate -run '^$' -bench GateErrorRates -benchtime 10x
func BenchmarkGateErrorRates(b *testing.B) {
	metrics := []string{"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "output_throughput"}
	for _, noise := range []float64{0, 0.01} {
		for _, slow := range []float64{1, 1.05, 1.27} {
			for _, thr := range []float64{0.05, 0.03, 0.02} {
				b.Run(fmt.Sprintf("runnoise=%g%%/slowdown=%.2f/threshold=%g%%", 100*noise, slow, 100*thr), func(b *testing.B) {
					cfg := DefaultConfig()
					cfg.Threshold = thr
					cfg.Metrics = nil
					for _, n := range metrics {
						m, err := ParseMetric(n)
						if err != nil {
							b.Fatal(err)
						}
						cfg.Metrics = append(cfg.Metrics, m)
					}
					var pairs, flagged, tpot int
					for i := 0; b.Loop(); i++ {
						for p := range benchPairs {
							r := rand.New(rand.NewPCG(uint64(i), uint64(p)))
							rep, err := Compare(benchRun(r, "base", 1, noise), benchRun(r, "new", slow, noise), cfg)
							if err != nil {
								b.Fatal(err)
							}
							pairs++
							if rep.Regressed() {
								flagged++
							}
							for _, row := range rep.Rows {
								if row.Metric.Name == "tpot_p50" && row.Verdict == Regression {
									tpot++
								}
							}
						}
					}
					b.ReportMetric(float64(flagged)/float64(pairs)*benchPairs, "flagged/20pairs")
					b.ReportMetric(float64(tpot)/float64(pairs)*benchPairs, "tpot-flagged/20pairs")
				})
			}
		}
	}
}
