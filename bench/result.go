package bench

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/trial"
)

// Summarize computes a level's metrics from raw requests with
// trial.Summarize: TTFT, TPOT, E2EL and the token and request counts are
// exact (to the microsecond); ITL pools every gap as rebuilt from each
// request's ITL summary (ITLGaps), and a throughput counted by token
// arrival time is approximate, since the raw data keeps a summary per
// request. Runs store the metrics measured live.
func Summarize(reqs []Request, slo trial.SLO) trial.Metrics {
	recs := make([]trial.Record, len(reqs))
	chunks := make([]time.Duration, 2*len(reqs)) // one backing array
	for i := range reqs {
		recs[i] = reqs[i].record(chunks[2*i : 2*i : 2*i+2])
	}
	m := trial.Summarize(recs, slo)
	recs = nil
	m.ITL = itlOf(reqs, "")
	for c, cm := range m.ByClass {
		cm.ITL = itlOf(reqs, c)
	}
	return m
}

func itlOf(reqs []Request, class string) trial.Dist {
	return trial.Distribution(ITLGaps(reqs, func(r *Request) bool { return class == "" || trial.PromptClass(r.Prompt) == class }))
}

// errorCounts counts the measured requests' error classes.
func errorCounts(reqs []Request) (map[string]int, float64) {
	var n, ok int
	var errs map[string]int
	for i := range reqs {
		if reqs[i].Warmup {
			continue
		}
		n++
		if reqs[i].OK() {
			ok++
			continue
		}
		if errs == nil {
			errs = map[string]int{}
		}
		errs[reqs[i].Err]++
	}
	if n == 0 {
		return errs, 0
	}
	return errs, float64(ok) / float64(n)
}

// capacityAtSLO is the highest load whose level met the SLO (0: none).
func capacityAtSLO(levels []store.LevelResult, slo trial.SLO) float64 {
	if len(slo) == 0 {
		return 0
	}
	best := 0.0
	for i := range levels {
		if levels[i].SLOMet {
			best = math.Max(best, levels[i].Load())
		}
	}
	return best
}

// ReportCell rebuilds a cell's levels from raw requests alone (an imported
// or re-analysed run): level i holds the requests of Level i, each
// summarised by Summarize. Loads are unknown here and left 0 except the
// concurrency, numbered by level.
func ReportCell(name string, reqs []Request, slo trial.SLO) store.CellResult {
	c := store.CellResult{Name: name, Requests: len(reqs)}
	// Runs store levels one after another: split without copying.
	sorted := slices.IsSortedFunc(reqs, func(a, b Request) int { return a.Level - b.Level })
	if !sorted {
		reqs = slices.Clone(reqs)
		slices.SortStableFunc(reqs, func(a, b Request) int { return a.Level - b.Level })
	}
	var bounds [][2]int
	for lo := 0; lo < len(reqs); {
		hi := lo
		for hi < len(reqs) && reqs[hi].Level == reqs[lo].Level {
			hi++
		}
		bounds = append(bounds, [2]int{lo, hi})
		lo = hi
	}
	// Levels are independent: summarise them in parallel (sorting for the
	// percentiles is most of the work).
	c.Levels = make([]store.LevelResult, len(bounds))
	var wg sync.WaitGroup
	for i, b := range bounds {
		wg.Go(func() {
			lr := reqs[b[0]:b[1]]
			m := Summarize(lr, slo)
			met, viol := slo.Check(&m)
			l := store.LevelResult{Concurrency: lr[0].Level + 1, Metrics: m, SLOMet: met, Violations: viol}
			l.Errors, l.SuccessRate = errorCounts(lr)
			c.Levels[i] = l
		})
	}
	wg.Wait()
	c.Capacity = capacityAtSLO(c.Levels, slo)
	return c
}
