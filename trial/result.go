package trial

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/vllm-tuner/tuner/spaces"
)

// ResultVersion is the schema version of Result; bump it on incompatible changes.
const ResultVersion = 1

// Status is how a trial ended.
type Status string

const (
	StatusOK       Status = "ok"       // measured and stable
	StatusUnstable Status = "unstable" // measured, but steady state not reached (or throttled)
	StatusFailed   Status = "failed"   // no usable measurement; see Failure
)

// FailureClass says why a trial failed. The search learns from it (OOM regions
// are infeasible; a startup timeout may be flaky).
type FailureClass string

const (
	FailNone            FailureClass = ""
	FailOOM             FailureClass = "oom"              // CUDA OOM, no memory for cache blocks, free memory too low
	FailKVTooSmall      FailureClass = "kv_too_small"     // KV pool cannot hold one max_model_len request
	FailInvalidArgument FailureClass = "invalid_argument" // argparse/config validation (exit 2 or ValueError)
	FailStartupTimeout  FailureClass = "startup_timeout"  // /health never became 200
	FailCrashed         FailureClass = "crashed"          // engine exited during load
	FailUnhealthy       FailureClass = "unhealthy"        // /health 503 or requests failing en masse
	FailContextLength   FailureClass = "context_length"   // the engine rejects the workload's longest requests (max_model_len)
	FailInterrupted     FailureClass = "interrupted"      // the tuner was stopped
)

// Memory reports a failure for want of memory: out of memory, or a KV
// cache too small for one max_model_len request.
func (c FailureClass) Memory() bool { return c == FailOOM || c == FailKVTooSmall }

// Typed errors callers branch on with errors.Is; each maps to a FailureClass.
var (
	ErrOOM             = errors.New("engine out of memory")
	ErrKVTooSmall      = errors.New("kv cache too small for max_model_len")
	ErrInvalidArgument = errors.New("engine rejected its arguments")
	ErrStartupTimeout  = errors.New("engine did not become healthy in time")
	ErrCrashed         = errors.New("engine crashed")
	ErrUnhealthy       = errors.New("engine unhealthy")
	ErrContextLength   = errors.New("requests longer than the engine's context")
)

// ClassOf maps an error to its failure class (FailCrashed when unknown).
func ClassOf(err error) FailureClass {
	switch {
	case err == nil:
		return FailNone
	case errors.Is(err, ErrOOM):
		return FailOOM
	case errors.Is(err, ErrKVTooSmall):
		return FailKVTooSmall
	case errors.Is(err, ErrInvalidArgument):
		return FailInvalidArgument
	case errors.Is(err, ErrStartupTimeout):
		return FailStartupTimeout
	case errors.Is(err, ErrUnhealthy):
		return FailUnhealthy
	case errors.Is(err, ErrContextLength):
		return FailContextLength
	}
	return FailCrashed
}

// Dist summarises one latency metric in milliseconds, as vLLM bench reports it
// (percentiles with linear interpolation, like numpy.percentile).
type Dist struct {
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	Std    float64 `json:"std"`
	P90    float64 `json:"p90"`
	P95    float64 `json:"p95"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// Metrics are vLLM bench's aggregates over the measured requests of one load
// level; the throughputs are rates over the steady window (see Summarize).
type Metrics struct {
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	// DurationS is the length of the window the throughputs are counted
	// over (ThroughputWindow: "steady", or "span" as vLLM bench).
	DurationS        float64 `json:"duration_s"`
	ThroughputWindow string  `json:"throughput_window,omitempty"`
	// WindowStartS is where that window starts, from the level's start.
	WindowStartS float64 `json:"window_start_s,omitempty"`
	// BenchDurationS and BenchOutputThroughput are vLLM bench's figures:
	// first measured send to last completion, and the measured requests'
	// output tokens over it.
	BenchDurationS        float64 `json:"bench_duration_s,omitempty"`
	BenchOutputThroughput float64 `json:"bench_output_throughput,omitempty"`
	TotalInputTokens      int     `json:"total_input_tokens"`
	TotalOutputTokens     int     `json:"total_output_tokens"`
	RequestThroughput     float64 `json:"request_throughput"`     // req/s
	OutputThroughput      float64 `json:"output_throughput"`      // tok/s
	TotalTokenThroughput  float64 `json:"total_token_throughput"` // tok/s
	RequestGoodput        float64 `json:"request_goodput"`        // req/s meeting all SLOs
	ErrorRate             float64 `json:"error_rate"`             // failed / (completed + failed)
	// Errors counts the failed measured requests by RequestErrorClass.
	Errors map[string]int `json:"errors,omitempty"`
	// TokenMismatches counts successful requests that returned fewer
	// output tokens than asked for (see Record.TokenMismatch).
	TokenMismatches int `json:"token_mismatches,omitempty"`
	// OfferedRate and AchievedRate are the open-loop requests sent and
	// completed per second while the load is fully on (req/s; 0 for a
	// closed loop), InFlight the requests in flight at the start and the
	// end of that span; Overloaded says the engine did not keep up (see
	// MarkOverload): AchievedRate is then its capacity, and its latencies
	// grow with the run's length, not with the config.
	OfferedRate  float64 `json:"offered_rate,omitempty"`
	AchievedRate float64 `json:"achieved_rate,omitempty"`
	InFlight     [2]int  `json:"in_flight,omitzero"`
	Overloaded   bool    `json:"overloaded,omitempty"`
	TTFT         Dist    `json:"ttft_ms"`
	TPOT         Dist    `json:"tpot_ms"`
	ITL          Dist    `json:"itl_ms"`
	E2EL         Dist    `json:"e2el_ms"`
	// ByClass holds the same aggregates per prompt-length class (short, medium, long).
	ByClass map[string]*Metrics `json:"by_class,omitempty"`
	// Breakdown splits the level's request time into the engine's queue,
	// prefill and decode phases and the client's share (nil when the
	// engine's phase histograms could not be read).
	Breakdown *Breakdown `json:"breakdown,omitempty"`
	// ByTenant holds them per LoRA tenant (workloads with tenants), and
	// Fairness compares the tenants' tails.
	ByTenant map[string]*Metrics `json:"by_tenant,omitempty"`
	Fairness *Fairness           `json:"fairness,omitempty"`
	// PrefixCache is the engine's prefix-cache hit rate over the level
	// (nil when the engine's counters could not be read, or it looked
	// nothing up: prefix caching off).
	PrefixCache *PrefixCache `json:"prefix_cache,omitempty"`
	// Missing names the figures the source did not have (an imported
	// vLLM bench result without p90 or goodput, say), as Value names them
	// ("ttft_p90", "request_goodput"): Value reports them absent and
	// reports print "n/a", never a 0 that was not measured.
	Missing []string `json:"missing,omitempty"`
}

// PrefixCache is what vLLM's prefix cache found over a window, from its
// counters vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total
// (in tokens; vllm:gpu_prefix_cache_* before 0.12): the hit rate is
// rate(hits)/rate(queries), as vLLM's docs compute it.
type PrefixCache struct {
	QueriedTokens float64 `json:"queried_tokens"`
	HitTokens     float64 `json:"hit_tokens"`
	HitRate       float64 `json:"hit_rate"` // fraction 0-1
}

func (p *PrefixCache) String() string {
	return fmt.Sprintf("hit rate %.1f%% (%.0f of %.0f prompt tokens found)", 100*p.HitRate, p.HitTokens, p.QueriedTokens)
}

// NewPrefixCache is the window's reading from the counters' increments;
// nil when nothing was looked up.
func NewPrefixCache(queried, hits float64) *PrefixCache {
	if !(queried > 0) || hits < 0 {
		return nil
	}
	return &PrefixCache{QueriedTokens: queried, HitTokens: hits, HitRate: math.Min(1, hits/queried)}
}

// Lacks reports whether the metric named as Value names it is missing.
func (m *Metrics) Lacks(name string) bool {
	if len(m.Missing) == 0 {
		return false
	}
	return slices.Contains(m.Missing, strings.Replace(name, "_median", "_p50", 1))
}

// Value returns a metric by name: "output_throughput", "request_throughput",
// "total_token_throughput", "request_goodput", "error_rate",
// "prefix_cache_hit_rate" (a fraction; absent when not measured),
// "fairness_<ttft|e2el>_p95" (worst over best tenant, LoRA workloads), or
// "<ttft|tpot|itl|e2el>_<mean|median|p50|p90|p95|p99|max>" in ms.
func (m *Metrics) Value(name string) (float64, bool) {
	if m.Lacks(name) {
		return 0, false
	}
	switch name {
	case "output_throughput":
		return m.OutputThroughput, true
	case "request_throughput":
		return m.RequestThroughput, true
	case "total_token_throughput":
		return m.TotalTokenThroughput, true
	case "request_goodput", "goodput":
		return m.RequestGoodput, true
	case "error_rate":
		return m.ErrorRate, true
	case "prefix_cache_hit_rate":
		if m.PrefixCache == nil {
			return 0, false
		}
		return m.PrefixCache.HitRate, true
	case "fairness_ttft_p95", "fairness_e2el_p95":
		if m.Fairness == nil {
			return 0, false
		}
		if name == "fairness_ttft_p95" {
			return m.Fairness.TTFTP95Ratio, true
		}
		return m.Fairness.E2ELP95Ratio, true
	}
	metric, stat, ok := strings.Cut(name, "_")
	if !ok {
		return 0, false
	}
	var d *Dist
	switch metric {
	case "ttft":
		d = &m.TTFT
	case "tpot":
		d = &m.TPOT
	case "itl":
		d = &m.ITL
	case "e2el":
		d = &m.E2EL
	default:
		return 0, false
	}
	switch stat {
	case "mean":
		return d.Mean, true
	case "median", "p50":
		return d.Median, true
	case "p90":
		return d.P90, true
	case "p95":
		return d.P95, true
	case "p99":
		return d.P99, true
	case "max":
		return d.Max, true
	}
	return 0, false
}

// OverloadText describes an overloaded level: achieved against offered
// rate and the growing backlog.
func (m *Metrics) OverloadText() string {
	return fmt.Sprintf("overloaded: completes %.3g of %.3g req/s offered, requests in flight grow from %d to %d", m.AchievedRate, m.OfferedRate, m.InFlight[0], m.InFlight[1])
}

// Level is the measurement at one load level of a trial.
type Level struct {
	Concurrency int       `json:"concurrency,omitempty"` // closed loop
	Rate        float64   `json:"rate,omitempty"`        // open loop, req/s
	Metrics     Metrics   `json:"metrics"`
	SLOMet      bool      `json:"slo_met"`
	Violations  []string  `json:"violations,omitempty"`
	Stability   Stability `json:"stability"`
}

// Stability is the verdict of the steady-state checks.
type Stability struct {
	Stable       bool    `json:"stable"`
	Reason       string  `json:"reason,omitempty"`
	WarmupS      float64 `json:"warmup_s"`
	Windows      int     `json:"windows"`
	ThroughputCV float64 `json:"throughput_cv"`
	MinKSPValue  float64 `json:"min_ks_p_value"`
	CIHalfWidth  float64 `json:"ci_half_width"` // relative, of throughput
	Extended     int     `json:"extended"`      // times the measurement was extended
	Throttled    bool    `json:"throttled,omitempty"`
	EarlyStopped bool    `json:"early_stopped,omitempty"`
}

// Phases are the wall-clock durations of a trial's parts, in seconds.
type Phases struct {
	WaitFreeS float64 `json:"wait_free_s"` // port and GPU memory released by the previous engine
	StartupS  float64 `json:"startup_s"`   // process start to /health 200
	WarmupS   float64 `json:"warmup_s"`
	MeasureS  float64 `json:"measure_s"`
	StopS     float64 `json:"stop_s"`
	TotalS    float64 `json:"total_s"`
}

// GPUIdentity names the hardware a trial ran on.
type GPUIdentity struct {
	Name      string   `json:"name"`
	Count     int      `json:"count"`
	UUIDs     []string `json:"uuids,omitempty"`
	Driver    string   `json:"driver,omitempty"`
	MemoryGiB float64  `json:"memory_gib,omitempty"`
}

// Telemetry summarises GPU and engine readings over the measurement.
type Telemetry struct {
	Source          string   `json:"source"` // "nvml", "engine-metrics" or "none"
	Samples         int      `json:"samples"`
	PeakMemoryGiB   float64  `json:"peak_memory_gib"` // all GPUs together
	TotalMemoryGiB  float64  `json:"total_memory_gib"`
	MeanUtilPct     float64  `json:"mean_util_pct"`
	MeanPowerW      float64  `json:"mean_power_w"`
	EnergyJ         float64  `json:"energy_j"`
	MaxTempC        float64  `json:"max_temp_c"`
	MinSMClockMHz   float64  `json:"min_sm_clock_mhz"`
	ThrottleReasons []string `json:"throttle_reasons,omitempty"`
	MaxKVCacheUsage float64  `json:"max_kv_cache_usage"` // fraction 0-1
	MaxRunning      float64  `json:"max_running"`
	MaxWaiting      float64  `json:"max_waiting"`
	Preemptions     float64  `json:"preemptions"`
}

// Result is everything one trial produced. It is a plain record: JSON in the
// store, never holding live handles.
type Result struct {
	SchemaVersion int           `json:"schema_version"`
	Config        spaces.Config `json:"config"`
	ConfigID      string        `json:"config_id"`
	Workload      string        `json:"workload"`
	// ServeArgs are the engine arguments the workload needs beyond the
	// config's flags (its LoRA adapters): a recommendation must carry them.
	ServeArgs     []string     `json:"serve_args,omitempty"`
	EngineVersion string       `json:"engine_version,omitempty"`
	GPU           GPUIdentity  `json:"gpu"`
	Status        Status       `json:"status"`
	Failure       FailureClass `json:"failure,omitempty"`
	Error         string       `json:"error,omitempty"`
	Levels        []Level      `json:"levels,omitempty"`
	// Primary indexes Levels: the level the objectives are read from (the
	// fixed level, or the SLO capacity found in capacity mode).
	Primary  int     `json:"primary"`
	Capacity float64 `json:"capacity,omitempty"` // SLO capacity (concurrency or rate) in capacity mode; the sustained rate in feedback mode
	// Feedback is feedback mode's outcome and trace (its windows are Levels).
	Feedback      *Feedback `json:"feedback,omitempty"`
	Telemetry     Telemetry `json:"telemetry"`
	PeakVRAMGiB   float64   `json:"peak_vram_gib"` // all GPUs together
	VRAMSource    string    `json:"vram_source"`   // "nvml", "engine-metrics", "estimate"
	KVCacheTokens int       `json:"kv_cache_tokens,omitempty"`
	Stability     Stability `json:"stability"`
	Phases        Phases    `json:"phases"`
	LogPath       string    `json:"log_path,omitempty"`
	RawPath       string    `json:"raw_path,omitempty"`
	// Screen is the short first stage of a screened trial (nil when the
	// trial was not screened): Phases then cover both stages.
	Screen *ScreenStage `json:"screen,omitempty"`
}

// Metrics returns the primary level's metrics (nil when the trial has none).
func (r *Result) Metrics() *Metrics {
	if r.Primary < 0 || r.Primary >= len(r.Levels) {
		return nil
	}
	return &r.Levels[r.Primary].Metrics
}

// Objective returns a metric of the primary level by name (see Metrics.Value)
// or "peak_vram_gib". ok is false for failed trials and unknown names.
func (r *Result) Objective(name string) (float64, bool) {
	if r.Status == StatusFailed {
		return 0, false
	}
	if name == "peak_vram_gib" || name == "vram" {
		return r.PeakVRAMGiB, true
	}
	m := r.Metrics()
	if m == nil {
		return 0, false
	}
	return m.Value(name)
}

// Usable reports whether the trial produced a measurement.
func (r *Result) Usable() bool { return r.Status == StatusOK || r.Status == StatusUnstable }

// FreeMemoryShort reports an OOM at start-up because the GPU had less free
// memory than gpu_memory_utilization asks for (another process holds
// some): less utilisation cures it, where every other OOM needs more
// memory for the engine.
func (r *Result) FreeMemoryShort() bool {
	return r.Failure == FailOOM && reFreeShort.MatchString(r.Error)
}

// Overloaded reports whether the primary level offered more load than
// the engine served (see MarkOverload); its latencies rank nothing.
func (r *Result) Overloaded() bool {
	m := r.Metrics()
	return r.Usable() && m != nil && m.Overloaded
}

// String is the verdict: ok, unstable, overloaded (stored as unstable) or
// failed:<class>.
func (r *Result) String() string {
	if r.Status == StatusFailed {
		return fmt.Sprintf("failed:%s", r.Failure)
	}
	if r.Overloaded() {
		return "overloaded"
	}
	return string(r.Status)
}
