package bench

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// RunVersion is the version of the Run record; bump it on incompatible changes.
const RunVersion = 1

// State is how a run ended.
type State string

const (
	StateRunning State = "running" // in progress (or its process died: readers report partial)
	StateOK      State = "ok"      // every cell measured
	StatePartial State = "partial" // stopped early: the finished cells are kept
	StateFailed  State = "failed"  // nothing measured; see Reason
)

// Run is a stored benchmark run: its labels and the results of its cells.
// The raw per-request data of each cell is kept beside it (Cell.RawKey).
type Run struct {
	V       int    `json:"v"`
	ID      string `json:"id"`
	State   State  `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Session string `json:"session,omitempty"` // writer session (store)
	// Source: "run" (tuner bench run) or "import" (a vLLM bench JSON).
	Source        string            `json:"source"`
	Model         string            `json:"model"`
	GPU           trial.GPUIdentity `json:"gpu"`
	Engine        string            `json:"engine"` // vllm, sim, url or the imported backend
	EngineVersion string            `json:"engine_version,omitempty"`
	URL           string            `json:"url,omitempty"`
	Config        *spaces.Config    `json:"config,omitempty"`
	Flags         []string          `json:"flags,omitempty"` // the engine's full command line (or the imported run's)
	Matrix        string            `json:"matrix"`
	MatrixHash    string            `json:"matrix_hash"`
	Tier          string            `json:"tier,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	Start         time.Time         `json:"start"`
	End           time.Time         `json:"end,omitzero"`
	Cells         []CellResult      `json:"cells"`
}

// CellResult is one cell's measurement: its load levels in order.
type CellResult struct {
	Name     string         `json:"name"`
	Workload trial.Workload `json:"workload"`
	Levels   []LevelResult  `json:"levels"`
	// Capacity is the highest load level meeting the SLO (0: none did, or
	// no SLO); CapacitySearched when the cell searched it (capacity: true).
	Capacity         float64 `json:"capacity,omitempty"`
	CapacitySearched bool    `json:"capacity_searched,omitempty"`
	// Feedback is the feedback controller's outcome and trace (feedback:
	// true cells; its windows are Levels, Capacity its sustained rate).
	Feedback *trial.Feedback `json:"feedback,omitempty"`
	Error    string          `json:"error,omitempty"` // why the cell stopped early
	RawKey   string          `json:"raw_key,omitempty"`
	RawBytes int             `json:"raw_bytes,omitempty"`
	Requests int             `json:"requests"`
}

// LevelResult is one load level of a cell.
type LevelResult struct {
	Concurrency int               `json:"concurrency,omitempty"`
	Rate        float64           `json:"rate,omitempty"`
	Metrics     trial.Metrics     `json:"metrics"`
	SLOMet      bool              `json:"slo_met"`
	Violations  []string          `json:"violations,omitempty"`
	Stability   trial.Stability   `json:"stability"`
	SuccessRate float64           `json:"success_rate"`
	Errors      map[string]int    `json:"errors,omitempty"` // error class -> measured requests
	ErrorSample map[string]string `json:"error_sample,omitempty"`
	Telemetry   trial.Telemetry   `json:"telemetry"`
	// Per GPU: output tokens/s per GPU and joules per output token (NVML energy).
	OutputTokSPerGPU float64 `json:"output_tok_s_per_gpu,omitempty"`
	JoulesPerToken   float64 `json:"joules_per_token,omitempty"`
	// WindowThroughput is the output rate of each steady-state window (the
	// throughput samples a regression test compares).
	WindowThroughput []float64 `json:"window_throughput,omitempty"`
	ElapsedS         float64   `json:"elapsed_s"`
}

// Load is the level's load: concurrency (closed loop) or rate.
func (l *LevelResult) Load() float64 {
	if l.Concurrency > 0 {
		return float64(l.Concurrency)
	}
	return l.Rate
}

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

// Curve is a cell's QPS-vs-latency curve: one point per load level, in
// increasing load.
type CurvePoint struct {
	Load       float64 `json:"load"`
	Closed     bool    `json:"closed"`
	QPS        float64 `json:"qps"` // achieved request throughput
	OutputTokS float64 `json:"output_tok_s"`
	TTFTP50    float64 `json:"ttft_p50_ms"`
	TTFTP99    float64 `json:"ttft_p99_ms"`
	TPOTP50    float64 `json:"tpot_p50_ms"`
	TPOTP99    float64 `json:"tpot_p99_ms"`
	E2ELP50    float64 `json:"e2el_p50_ms"`
	E2ELP99    float64 `json:"e2el_p99_ms"`
	SLOMet     bool    `json:"slo_met"`
}

// Curve returns the cell's QPS-vs-latency curve.
func (c *CellResult) Curve() []CurvePoint {
	var out []CurvePoint
	for i := range c.Levels {
		l := &c.Levels[i]
		m := &l.Metrics
		out = append(out, CurvePoint{Load: l.Load(), Closed: l.Concurrency > 0, QPS: m.RequestThroughput, OutputTokS: m.OutputThroughput,
			TTFTP50: m.TTFT.Median, TTFTP99: m.TTFT.P99, TPOTP50: m.TPOT.Median, TPOTP99: m.TPOT.P99,
			E2ELP50: m.E2EL.Median, E2ELP99: m.E2EL.P99, SLOMet: l.SLOMet})
	}
	slices.SortStableFunc(out, func(a, b CurvePoint) int {
		switch {
		case a.Load < b.Load:
			return -1
		case a.Load > b.Load:
			return 1
		}
		return 0
	})
	return out
}

// capacityAtSLO is the highest load whose level met the SLO (0: none).
func capacityAtSLO(levels []LevelResult, slo trial.SLO) float64 {
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
func ReportCell(name string, reqs []Request, slo trial.SLO) CellResult {
	c := CellResult{Name: name, Requests: len(reqs)}
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
	c.Levels = make([]LevelResult, len(bounds))
	var wg sync.WaitGroup
	for i, b := range bounds {
		wg.Go(func() {
			lr := reqs[b[0]:b[1]]
			m := Summarize(lr, slo)
			met, viol := slo.Check(&m)
			l := LevelResult{Concurrency: lr[0].Level + 1, Metrics: m, SLOMet: met, Violations: viol}
			l.Errors, l.SuccessRate = errorCounts(lr)
			c.Levels[i] = l
		})
	}
	wg.Wait()
	c.Capacity = capacityAtSLO(c.Levels, slo)
	return c
}
