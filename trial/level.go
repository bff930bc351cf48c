package trial

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"
)

// ErrAllFailed reports a level none of whose requests succeeded: there is
// nothing to measure, and its figures (all 0) must not pass for a result.
var ErrAllFailed = errors.New("every request of the level failed")

// LevelMeasurer measures load levels on one running server: the one level
// engine of trials (Runner) and benchmark runs (package bench). For each
// level it drives the load (closed or open loop), stops early once the
// throughput is known well enough, extends a level that has not settled,
// cuts the warm-up, checks an open loop for overload, decomposes the
// latency (the server's phase histograms), checks the SLO and accounts for
// failed requests. The zero value of a knob means its default (as
// DefaultConfig).
type LevelMeasurer struct {
	Client *Client
	SLO    SLO
	// LevelConfig: its Stability, MaxRequests and UnhealthyErrorRate
	// (capacity and feedback mode are MeasureLevels').
	LevelConfig
	// Exited is closed when the server has died (nil: a server this
	// process did not start); Died is the error to end with then.
	Exited <-chan struct{}
	Died   func() error
	// Judge says what a level failing more than UnhealthyErrorRate of its
	// requests means: the error that ends the measurement (a dead or
	// unhealthy server), or nil to go on. A level none of whose requests
	// succeeded ends it with ErrAllFailed all the same. nil: go on.
	Judge func(ctx context.Context, recs []Record, m *Metrics) error
	// MetricsClient and MetricsURL reach the server's /metrics for the
	// latency breakdown and telemetry (MetricsURL "": neither).
	MetricsClient *http.Client
	MetricsURL    string
	// Telemetry, when set, is sampled during each level and returned
	// with it (a trial samples once over all its levels instead).
	Telemetry *LevelTelemetry
	// OnLevel is called as each level starts (progress).
	OnLevel func(idx int, load float64, closed bool)
	Logger  *slog.Logger
}

// LevelConfig is how levels are measured, as trials (Config) and
// benchmark runs (bench.Config) set it: the steady-state rule, the caps of
// a duration-bound or capacity-mode level, feedback mode and the error
// rate that makes a level unhealthy. A field <= 0 (zero Stability and
// Feedback) means its default (SetDefaults; Feedback: HoldSLO's).
type LevelConfig struct {
	Stability StabilityConfig
	// MaxRequests caps a duration-bound closed loop.
	MaxRequests int
	// Capacity mode: bracketing cap, level budget and relative resolution.
	MaxConcurrency    int
	MaxRate           float64
	CapacityLevels    int
	CapacityTolerance float64
	// CapacityRounds: in capacity mode a closed-loop level sends at least
	// this many requests per unit of concurrency (and a warm-up of one
	// round), so every level reaches a steady state (see CapacityWorkload).
	CapacityRounds int
	// Feedback tunes feedback mode (Workload.Feedback; zero: defaults).
	Feedback FeedbackConfig
	// UnhealthyErrorRate: a level failing more of its requests than this
	// is judged (LevelMeasurer.Judge).
	UnhealthyErrorRate float64
}

// DefaultLevelConfig returns the defaults.
func DefaultLevelConfig() LevelConfig {
	return LevelConfig{Stability: DefaultStabilityConfig(), MaxRequests: 20000, MaxConcurrency: 1024, MaxRate: 10000,
		CapacityLevels: 8, CapacityTolerance: 0.1, CapacityRounds: 3, UnhealthyErrorRate: 0.5}
}

// SetDefaults gives every unset field of c its default.
func (c *LevelConfig) SetDefaults() {
	d := DefaultLevelConfig()
	if c.Stability == (StabilityConfig{}) {
		c.Stability = d.Stability
	}
	c.MaxRequests = orDefault(c.MaxRequests, d.MaxRequests)
	c.MaxConcurrency = orDefault(c.MaxConcurrency, d.MaxConcurrency)
	c.MaxRate = orDefault(c.MaxRate, d.MaxRate)
	c.CapacityLevels = orDefault(c.CapacityLevels, d.CapacityLevels)
	c.CapacityTolerance = orDefault(c.CapacityTolerance, d.CapacityTolerance)
	c.CapacityRounds = orDefault(c.CapacityRounds, d.CapacityRounds)
	c.UnhealthyErrorRate = orDefault(c.UnhealthyErrorRate, d.UnhealthyErrorRate)
}

// Capacity is c's capacity mode.
func (c LevelConfig) Capacity() CapacityConfig {
	return CapacityConfig{MaxConcurrency: c.MaxConcurrency, MaxRate: c.MaxRate, Levels: c.CapacityLevels,
		Tolerance: c.CapacityTolerance, Rounds: c.CapacityRounds}
}

// LevelTelemetry is what a LevelMeasurer samples during a level: the GPUs
// every SampleEvery, the server's /metrics every ScrapeEvery (0: not).
type LevelTelemetry struct {
	GPU         GPUSource
	SampleEvery time.Duration
	ScrapeEvery time.Duration
}

// MeasuredLevel is one measured level: its Level (metrics, SLO verdict,
// stability) and what a caller may keep beside it.
type MeasuredLevel struct {
	Level
	Records []Record // every issued request, warm-up marked
	// WindowThroughput is the output rate of each steady-state window.
	WindowThroughput []float64
	ElapsedS         float64
	Telemetry        Telemetry // with LevelMeasurer.Telemetry
	Throttled        bool      // a GPU clock or thermal throttle was seen
}

// StopEarly is a level's early-stop rule, asked before request next (the
// next index to issue, warm-up included) of a level of numRequests
// measured requests after warmup ones, with done the requests finished so
// far: every tenth of the level (at least every 10 requests), once
// EarlyStopMin of the level has completed, the level may stop when the
// requests done are a steady state whose throughput CI is within the
// target. Issuing goes on while it is asked, so every request done so far
// was served at full load. It returns the analysis the stop was decided on.
// A virtual-clock replay of a level asks it the same way
// (sim's TestShippedWorkloadStopsEarly).
func (sc StabilityConfig) StopEarly(next, warmup, numRequests int, done []Record) (Analysis, bool) {
	every := max(10, numRequests/10)
	if next <= warmup || next%every != 0 || measuredOK(done) < int(sc.EarlyStopMin*float64(numRequests)) {
		return Analysis{}, false
	}
	if a := analyze(done, sc, true); a.Stable && a.CIHalfWidth <= sc.CITarget {
		return a, true
	}
	return Analysis{}, false
}

// failFastAfter: a level whose first this many finished requests all
// failed stops issuing (a server answering every request with an error at
// once would otherwise take a duration-bound level's MaxRequests).
const failFastAfter = 50

// Measure drives one load level: lw is the workload at load v (AtLoad),
// idx the level's number (it salts the prompts). It returns the level
// (nil when none was measured: the server died, or ctx ended) and an error
// that ends the measurement: the server's death (Died), ctx's error, a
// context-length rejection (ContextLengthError), Judge's verdict, or
// ErrAllFailed. A level returned with an error is measured and kept.
func (m *LevelMeasurer) Measure(ctx context.Context, idx int, v float64, lw Workload) (*MeasuredLevel, error) {
	c := m.LevelConfig
	c.SetDefaults()
	sc := c.Stability
	closed := lw.Arrival.Closed()
	if closed {
		sc.Concurrency = lw.Arrival.Concurrency
	}
	if m.OnLevel != nil {
		m.OnLevel(idx, v, closed)
	}
	select {
	case <-m.Exited:
		return nil, m.Died()
	default:
	}
	durationBound := lw.NumRequests <= 0
	if durationBound {
		if closed {
			lw.NumRequests = c.MaxRequests
		} else {
			lw.NumRequests = max(1, int(math.Ceil(lw.Arrival.Rate*lw.Duration.Seconds())))
		}
	}
	ext := int(math.Ceil(sc.ExtendFraction * float64(lw.NumRequests)))
	if durationBound {
		ext = 0
	}
	limit := lw.Warmup + lw.NumRequests
	gen := lw
	gen.NumRequests += sc.MaxExtensions * ext
	specs := gen.Requests()

	var extended int
	var early bool
	var earlyA Analysis
	seen, ok := 0, false // fail fast: records looked at, any succeeded
	start := time.Now()
	gate := func(next int, done []Record) bool {
		// A closed loop issues until the duration has passed on the wall
		// clock; an open loop issues what its schedule sends within the
		// duration, however late the pacer runs (a client starved on a
		// busy machine would otherwise offer less than the level asks).
		if durationBound && (closed && time.Since(start) >= lw.Duration || !closed && specs[next].At >= lw.Duration) {
			return false
		}
		for ; !ok && seen < len(done); seen++ {
			ok = done[seen].OK()
		}
		if !ok && seen >= failFastAfter {
			return false
		}
		if next < limit {
			if a, stop := sc.StopEarly(next, lw.Warmup, lw.NumRequests, done); stop {
				early, earlyA = true, a
				return false
			}
			return true
		}
		if next == limit && extended < sc.MaxExtensions && ext > 0 {
			if a := Analyze(done, sc); !a.Stable {
				extended++
				limit += ext
				return true
			}
		}
		return false
	}
	lctx, cancel := context.WithCancel(ctx)
	died := make(chan struct{})
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-m.Exited:
			close(died)
			cancel()
		case <-lctx.Done():
		}
	}()
	hc := m.MetricsClient
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Second}
	}
	var rec *TelemetryRecording
	if t := m.Telemetry; t != nil {
		scrape := m.MetricsURL
		if t.ScrapeEvery <= 0 {
			scrape = ""
		}
		rec = RecordTelemetry(lctx, t.GPU, t.SampleEvery, hc, scrape, t.ScrapeEvery)
	}
	var probe *LatencyProbe
	if m.MetricsURL != "" {
		probe = StartLatencyProbe(ctx, hc, m.MetricsURL)
	}
	recs := m.Client.Drive(lctx, specs, Load{Concurrency: lw.Arrival.Concurrency, Rate: lw.Arrival.Rate, Salt: idx}, gate)
	var tel Telemetry
	var throttled bool
	if rec != nil {
		tel, _, _, throttled = rec.Stop()
	}
	cancel()
	<-watchDone
	select {
	case <-died:
		return nil, m.Died()
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	end := LevelEnd{Index: idx, Load: lw, Stability: sc, SLO: m.SLO,
		Extended: extended, Throttled: throttled, Judge: m.Judge,
		UnhealthyErrorRate: c.UnhealthyErrorRate}
	if early {
		end.EarlyStop = &earlyA
	}
	if probe != nil {
		b, err := probe.Finish(ctx, recs)
		if err != nil {
			m.logger().Debug("no latency breakdown", "error", err)
		}
		end.Breakdown, end.PrefixCache = b, probe.PrefixCache()
	}
	end.ElapsedS = time.Since(start).Seconds()
	out, err := FinishLevel(ctx, recs, end)
	out.Telemetry = tel
	m.logger().Info("level measured", "load", v, "closed", closed, "requests", len(recs), "completed", out.Metrics.Completed,
		"failed", out.Metrics.Failed, "out_tok_s", math.Round(out.Metrics.OutputThroughput), "slo_met", out.SLOMet, "stable", out.Stability.Stable)
	return out, err
}

// LevelEnd is what a level's measurement knows beside its records when
// the level ends: how FinishLevel summarizes and judges them.
type LevelEnd struct {
	Index     int      // the level's number
	Load      Workload // the level's workload (AtLoad): closed or open loop, at which load
	Stability StabilityConfig
	SLO       SLO
	// Breakdown and PrefixCache: the server's latency breakdown and
	// prefix-cache figures over the level (nil: unknown).
	Breakdown   *Breakdown
	PrefixCache *PrefixCache
	ElapsedS    float64
	// EarlyStop is the analysis the level stopped early on (nil: it ran
	// to its end), Extended the times it was extended, Throttled whether
	// a GPU throttle was seen: the live engine's.
	EarlyStop *Analysis
	Extended  int
	Throttled bool
	// UnhealthyErrorRate > 0 is the live engine's failure accounting: a
	// level with no measured request is kept, one failing at most this
	// share of its requests passes, one failing more is judged (Judge,
	// when set) and, none of its requests completed, is ErrAllFailed.
	// 0 (the virtual clock, whose only failures are context-length
	// rejections): a level with no request completed is ErrAllFailed.
	UnhealthyErrorRate float64
	Judge              func(ctx context.Context, recs []Record, m *Metrics) error
}

// FinishLevel is how a measured level's records become a MeasuredLevel,
// on the live engine (LevelMeasurer) and the virtual clock alike: the
// warm-up cut and steady-state analysis (SummarizeLevel), an open loop's
// overload, the latency breakdown, the stability verdict (an early stop's
// when the level stopped early) and the SLO's. Its error ends the
// measurement: a context-length rejection (ContextLengthError), the
// Judge's verdict, or ErrAllFailed; the level is returned with it.
func FinishLevel(ctx context.Context, recs []Record, e LevelEnd) (*MeasuredLevel, error) {
	closed := e.Load.Arrival.Closed()
	sc := e.Stability
	if closed {
		sc.Concurrency = e.Load.Arrival.Concurrency
	}
	met, a := SummarizeLevel(recs, sc, e.SLO)
	if !closed {
		MarkOverload(recs, &met)
	}
	met.Breakdown, met.PrefixCache = e.Breakdown, e.PrefixCache
	st := a.Stability
	if e.EarlyStop != nil {
		// The verdict the stop was decided on, when every request done
		// had been served at full load (the final analysis leaves out
		// those that ended after the last send: the load was draining).
		st = e.EarlyStop.Stability
		st.WarmupS = a.WarmupS
		st.Reason = strings.TrimSuffix(fmt.Sprintf("early stop at throughput CI half-width %.1f%%; %s", 100*st.CIHalfWidth, st.Reason), "; ")
	}
	st.Extended, st.EarlyStopped = e.Extended, e.EarlyStop != nil
	st.NoteOverload(&met)
	if e.Throttled {
		st.Throttled, st.Stable = true, false
	}
	out := &MeasuredLevel{Level: NewLevel(met, st, e.SLO, e.Load),
		Records: recs, WindowThroughput: a.WindowThroughput, ElapsedS: e.ElapsedS, Throttled: e.Throttled}
	return out, e.account(ctx, recs, &out.Metrics)
}

// NewLevel is the level of metrics m and stability st measured at load
// lw (a closed loop's concurrency, an open loop's rate), with slo's
// verdict.
func NewLevel(m Metrics, st Stability, slo SLO, lw Workload) Level {
	met, viol := slo.Check(&m)
	l := Level{Metrics: m, SLOMet: met, Violations: viol, Stability: st}
	if lw.Arrival.Closed() {
		l.Concurrency = lw.Arrival.Concurrency
	} else {
		l.Rate = lw.Arrival.Rate
	}
	return l
}

// account is the failure accounting of a measured level: the error that
// ends the measurement, or nil.
func (e *LevelEnd) account(ctx context.Context, recs []Record, met *Metrics) error {
	if err := ContextLengthError(recs); err != nil {
		return err
	}
	if e.UnhealthyErrorRate > 0 {
		if met.Completed+met.Failed == 0 || met.ErrorRate <= e.UnhealthyErrorRate {
			return nil
		}
		if e.Judge != nil {
			if err := e.Judge(ctx, recs, met); err != nil {
				return err
			}
		}
	}
	switch {
	case met.Completed > 0:
		return nil
	case met.Failed == 0:
		return fmt.Errorf("%w: level %d", ErrAllFailed, e.Index)
	}
	return fmt.Errorf("%w: %d of %d, first: %s", ErrAllFailed, met.Failed, met.Failed, strings.TrimSpace(Redact(FirstErr(recs))))
}

func (m *LevelMeasurer) logger() *slog.Logger {
	if m.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Logger
}

// orDefault is v, or def when v is unset (<= 0).
func orDefault[T int | float64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// LevelsOutcome is what MeasureLevels measured: the levels in the order
// measured, the primary one (fixed levels: the first; capacity mode: the
// best passing one, else the lowest load; feedback: the passing window
// nearest the sustained load), and the capacity (capacity mode: the best
// passing load; feedback: the sustained load; fixed levels: 0).
type LevelsOutcome struct {
	Levels   []Level
	Primary  int
	Capacity float64
	Searched bool      // capacity mode ran
	Feedback *Feedback // feedback mode's outcome and trace
}

// MeasureLevels measures w's levels with measure, as w asks: feedback mode
// (HoldSLO), capacity mode (FindCapacity), or its fixed levels (Levels, or
// the arrival's own load). It stops at measure's first error and returns
// what was measured with it.
func MeasureLevels(w Workload, c CapacityConfig, fc FeedbackConfig, measure func(v float64, lw Workload) (*MeasuredLevel, error)) (LevelsOutcome, error) {
	var out LevelsOutcome
	keep := func(v float64, lw Workload) (*MeasuredLevel, error) {
		l, err := measure(v, lw)
		if l != nil {
			out.Levels = append(out.Levels, l.Level)
		}
		return l, err
	}
	var err error
	switch {
	case w.Feedback:
		var fb Feedback
		fb, err = HoldSLO(w, fc, func(v float64, lw Workload) (*Metrics, bool, float64, error) {
			l, err := keep(v, lw)
			if err != nil {
				return nil, false, 0, err
			}
			return &l.Metrics, l.SLOMet, l.ElapsedS, nil
		})
		out.Feedback, out.Capacity = &fb, fb.Sustained
		if out.Primary = fb.Primary(); out.Primary < 0 && len(out.Levels) > 0 {
			out.Primary = lowest(out.Levels)
		}
	case w.Capacity:
		out.Searched = true
		_, out.Primary, out.Capacity, err = FindCapacity(w, c, func(v float64, lw Workload) (Level, error) {
			l, err := keep(v, lw)
			if err != nil {
				return Level{}, err
			}
			return l.Level, nil
		})
	default:
		for _, v := range loadValues(w) {
			if _, err = keep(v, AtLoad(w, v)); err != nil {
				break
			}
		}
	}
	return out, err
}

// loadValues are the fixed levels of w: Levels, or the arrival's own.
func loadValues(w Workload) []float64 {
	if len(w.Levels) > 0 {
		return w.Levels
	}
	if w.Arrival.Closed() {
		return []float64{float64(w.Arrival.Concurrency)}
	}
	return []float64{w.Arrival.Rate}
}

// AtLoad returns w set to one load level (closed: concurrency, open: rate).
func AtLoad(w Workload, v float64) Workload {
	lw := w
	lw.Levels = nil
	if w.Arrival.Closed() {
		lw.Arrival.Concurrency = max(1, int(math.Round(v)))
	} else {
		lw.Arrival.Rate = v
	}
	return lw
}
