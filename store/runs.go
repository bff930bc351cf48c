package store

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// ErrRunState reports an operation on a run in the wrong state.
var ErrRunState = errors.New("wrong run state")

// RunFilter selects runs for Runs (empty fields match all).
type RunFilter struct {
	Model  string
	Tier   string
	Labels map[string]string
}

// RunVersion is the version of the Run record (a benchmark run); bump it on incompatible changes.
const RunVersion = 1

// RunState is how a benchmark run ended.
type RunState string

const (
	RunRunning RunState = "running" // in progress (or its process died: readers report partial)
	RunOK      RunState = "ok"      // every cell measured
	RunPartial RunState = "partial" // stopped early: the finished cells are kept
	RunFailed  RunState = "failed"  // nothing measured (no request served); see Reason
)

// Run is a stored benchmark run: its labels and the results of its cells.
// The raw per-request data of each cell is kept beside it (Cell.RawKey).
type Run struct {
	V       int      `json:"v"`
	ID      string   `json:"id"`
	State   RunState `json:"state"`
	Reason  string   `json:"reason,omitempty"`
	Session string   `json:"session,omitempty"` // writer session (store)
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
	// The peaks vLLM bench reports (imported results): output tokens in
	// its busiest second and the most requests in flight at once; and the
	// time requests waited for a --max-concurrency slot in the client.
	PeakOutputThroughput float64     `json:"peak_output_throughput,omitempty"`
	PeakConcurrency      int         `json:"peak_concurrency,omitempty"`
	ClientQueue          *trial.Dist `json:"client_queue_ms,omitempty"`
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

// LoadString names a level's load ("c=64" closed loop, "8 req/s" open).
func (l *LevelResult) LoadString() string {
	if l.Concurrency > 0 {
		return "c=" + strconv.Itoa(l.Concurrency)
	}
	return strconv.FormatFloat(l.Rate, 'g', 6, 64) + " req/s"
}

// HasRaw reports whether any cell of r kept per-request data.
func (r *Run) HasRaw() bool {
	for i := range r.Cells {
		if r.Cells[i].RawKey != "" && r.Cells[i].Requests > 0 {
			return true
		}
	}
	return false
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

// Match reports whether f selects r.
func (f RunFilter) Match(r *Run) bool {
	if f.Model != "" && r.Model != f.Model || f.Tier != "" && r.Tier != f.Tier {
		return false
	}
	for k, want := range f.Labels {
		if got, ok := r.Labels[k]; !ok || (want != "" && got != want) {
			return false
		}
	}
	return true
}

// RunID is the ID of the run numbered seq ("r<seq>").
func RunID(seq uint64) string { return "r" + strconv.FormatUint(seq, 10) }

// ParseRunID returns the number of a run ID (ErrNotFound for a malformed one).
func ParseRunID(id string) (uint64, error) {
	n, err := strconv.ParseUint(strings.TrimPrefix(id, "r"), 10, 64)
	if err != nil || !strings.HasPrefix(id, "r") || n == 0 {
		return 0, fmt.Errorf("run %q: %w (want r<number>)", id, ErrNotFound)
	}
	return n, nil
}

// RawKey names the raw data of cell i of a run (CellResult.RawKey).
func RawKey(id string, cell int) string { return id + "/" + strconv.Itoa(cell) }

// DecodeRun decodes a stored run record (sealed or plain JSON) and refuses
// one newer than this program.
func DecodeRun(b []byte) (Run, error) {
	var r Run
	if err := DecodeAny(b, &r); err != nil {
		return r, fmt.Errorf("decode run: %w", err)
	}
	if r.V > RunVersion {
		return r, fmt.Errorf("decode run %s: record version %d: %w", r.ID, r.V, ErrTooNew)
	}
	if r.V < 1 {
		return r, fmt.Errorf("decode run %s: record version %d", r.ID, r.V)
	}
	return r, nil
}

// Begin readies r to be stored as the new run numbered seq, written by
// session (state running unless r says otherwise).
func (r *Run) Begin(seq uint64, session string) {
	r.ID, r.V, r.Session = RunID(seq), RunVersion, session
	if r.State == "" {
		r.State = RunRunning
	}
}

// Imported readies a finished run to be stored as the run numbered seq:
// each cell i with raw data (raws[i] not nil) gets its RawKey and RawBytes.
func (r *Run) Imported(seq uint64, raws [][]byte) {
	r.ID, r.V = RunID(seq), RunVersion
	for i := range r.Cells {
		if i < len(raws) && raws[i] != nil {
			r.Cells[i].RawKey, r.Cells[i].RawBytes = RawKey(r.ID, i), len(raws[i])
		}
	}
}

// AddCell appends a finished cell to a running run; raw (its per-request
// data) is to be stored under the cell's RawKey, set here. It fails with
// ErrRunState unless the run is running.
func (r *Run) AddCell(c CellResult, raw []byte) error {
	if r.State != RunRunning {
		return fmt.Errorf("run %s is %s: %w", r.ID, r.State, ErrRunState)
	}
	c.RawKey, c.RawBytes = RawKey(r.ID, len(r.Cells)), len(raw)
	r.Cells = append(r.Cells, c)
	return nil
}

// Finish records a running run's final state (ErrRunState unless running).
func (r *Run) Finish(st RunState, reason string, end time.Time) error {
	if r.State != RunRunning {
		return fmt.Errorf("run %s is %s: %w", r.ID, r.State, ErrRunState)
	}
	r.State, r.Reason, r.End, r.Session = st, reason, end, ""
	return nil
}
