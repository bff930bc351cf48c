package trial

import (
	"cmp"
	"fmt"
	"math"
	"strconv"
)

// FeedbackConfig tunes the feedback load controller (HoldSLO).
type FeedbackConfig struct {
	// Windows is the number of measurement windows (default 24).
	Windows int
	// Step is the additive increase per passing window, as a fraction of
	// the highest rate that passed while probing (default 0.1); Backoff
	// the multiplicative decrease after a failing window (default 0.9).
	// Each decrease halves the step, down to MinStep x the rate (default
	// 0.01), so the sawtooth narrows around the limit.
	Step, Backoff, MinStep float64
	// MaxRate caps the offered load (req/s; default 10000).
	MaxRate float64
}

// DefaultFeedbackConfig returns the defaults (24 windows, step 10%,
// backoff 0.9, step floor 1%).
func DefaultFeedbackConfig() FeedbackConfig {
	return FeedbackConfig{Windows: 24, Step: 0.1, Backoff: 0.9, MinStep: 0.01, MaxRate: 10000}
}

func (c FeedbackConfig) withDefaults() FeedbackConfig {
	d := DefaultFeedbackConfig()
	c.Windows = cmp.Or(c.Windows, d.Windows)
	c.Step = cmp.Or(c.Step, d.Step)
	c.Backoff = cmp.Or(c.Backoff, d.Backoff)
	c.MinStep = cmp.Or(c.MinStep, d.MinStep)
	c.MaxRate = cmp.Or(c.MaxRate, d.MaxRate)
	return c
}

// Phases of the controller (FeedbackWindow.Phase).
const (
	FeedbackProbe = "probe" // doubling (or halving) until the limit is bracketed
	FeedbackHold  = "hold"  // additive increase, multiplicative decrease
)

// FeedbackWindow is one window of the controller's trace.
type FeedbackWindow struct {
	StartS   float64 `json:"start_s"` // from the controller's start
	Seconds  float64 `json:"duration_s"`
	Rate     float64 `json:"rate"`          // offered, req/s
	Achieved float64 `json:"achieved_rate"` // completed req/s over the window (first send to last completion)
	// Tail is the target metric in the window (e.g. its TTFT p95, ms).
	Tail  float64 `json:"tail"`
	Met   bool    `json:"met"` // the window met the whole SLO
	Phase string  `json:"phase"`
}

// Feedback is the outcome of feedback mode: the load sustained at the SLO
// and the trace that found it.
type Feedback struct {
	// Metric and Target are the held bound (the SLO's first latency
	// bound, e.g. ttft_p95 <= 500 ms); every bound of the SLO must hold.
	Metric string  `json:"metric"`
	Target float64 `json:"target"`
	// Sustained is the load held at the SLO (req/s): the mean of the last
	// two peaks of the sawtooth (a passing window followed by a failing
	// one at a higher rate); without a peak, the highest passing rate (0:
	// none passed). Bounded says a peak was seen (false: the load never
	// failed below MaxRate, or never passed).
	Sustained float64          `json:"sustained_rate"`
	Bounded   bool             `json:"bounded"`
	Windows   []FeedbackWindow `json:"windows"`
}

// Primary is the window nearest to the sustained load that met the SLO
// (the latest among equals); -1 when none did.
func (f *Feedback) Primary() int {
	best := -1
	for i, w := range f.Windows {
		if w.Met && (best < 0 || math.Abs(w.Rate-f.Sustained) <= math.Abs(f.Windows[best].Rate-f.Sustained)) {
			best = i
		}
	}
	return best
}

// FeedbackMeasure measures one window: the workload lw at rate v. It
// returns the window's metrics, whether it met the SLO and its length in
// seconds.
type FeedbackMeasure func(v float64, lw Workload) (m *Metrics, met bool, seconds float64, err error)

// FeedbackTarget is the bound feedback mode holds: the SLO's first latency
// bound.
func FeedbackTarget(slo SLO) (Bound, error) {
	for _, b := range slo {
		if isLatency(b.Metric) && (b.Op == "<=" || b.Op == "<") {
			return b, nil
		}
	}
	return Bound{}, fmt.Errorf("feedback mode needs a latency bound in the SLO (e.g. ttft_p95<=500ms), got %q", slo.String())
}

// HoldSLO is feedback mode, one open-loop window after another: from the
// workload's rate it doubles while windows meet the SLO (halves while they
// miss it) until the limit is bracketed, then adds Step after each window
// that meets it and multiplies the rate by Backoff after each that misses
// it (halving the step), for Windows windows in all. Each window is the
// workload at one rate, measured by measure (the live runner drains a
// window before the next, so every window starts from an empty engine, as
// a bisection level does).
func HoldSLO(w Workload, c FeedbackConfig, measure FeedbackMeasure) (Feedback, error) {
	c = c.withDefaults()
	target, err := FeedbackTarget(w.SLO)
	if err != nil {
		return Feedback{}, err
	}
	if w.Arrival.Closed() {
		return Feedback{}, fmt.Errorf("feedback mode drives the request rate: workload %q is a closed loop", w.Name)
	}
	fb := Feedback{Metric: target.Metric, Target: target.Limit}
	r := 1.0
	if v := loadValues(w); len(v) > 0 && v[0] > 0 {
		r = v[0]
	}
	r = math.Min(r, c.MaxRate)
	floor := r / 1024
	round := func(v float64) float64 { return math.Round(v*1000) / 1000 }
	var lastPass, firstFail, step, at float64
	probing := true
	for k := 0; k < c.Windows; k++ {
		r = round(r)
		m, met, secs, err := measure(r, AtLoad(w, r))
		if err != nil {
			return fb, err
		}
		tail, _ := m.Value(target.Metric)
		phase := FeedbackHold
		if probing {
			phase = FeedbackProbe
		}
		// vLLM bench's request throughput: a window is too short for the
		// steady-state rates (they count requests sent before it).
		achieved := m.RequestThroughput
		if m.BenchDurationS > 0 {
			achieved = float64(m.Completed) / m.BenchDurationS
		}
		fb.Windows = append(fb.Windows, FeedbackWindow{StartS: at, Seconds: secs, Rate: r, Achieved: achieved, Tail: tail, Met: met, Phase: phase})
		at += secs
		if probing {
			switch {
			case met && firstFail == 0:
				lastPass = r
				if next := math.Min(2*r, c.MaxRate); next > r {
					r = next
					continue
				}
				k = c.Windows // at the cap and passing: nothing above to find
				continue
			case !met && lastPass == 0:
				firstFail = r
				if r/2 < floor {
					k = c.Windows // nothing passes
					continue
				}
				r /= 2
				continue
			}
			// Bracketed: hold from the highest passing rate.
			if met {
				lastPass = r
			}
			probing = false
			step = c.Step * lastPass
			r = lastPass + step
			continue
		}
		if met {
			r = math.Min(r+step, c.MaxRate)
		} else {
			r *= c.Backoff
			step = math.Max(step/2, c.MinStep*r)
		}
	}
	fb.Sustained, fb.Bounded = sustained(fb.Windows)
	return fb, nil
}

// sustained reads the trace: the mean of the last two sawtooth peaks of
// the hold phase, else the highest passing rate.
func sustained(ws []FeedbackWindow) (float64, bool) {
	var peaks []float64
	best := 0.0
	for i, w := range ws {
		if w.Met {
			best = math.Max(best, w.Rate)
		}
		if i+1 < len(ws) && w.Phase == FeedbackHold && w.Met && !ws[i+1].Met && ws[i+1].Rate > w.Rate {
			peaks = append(peaks, w.Rate)
		}
	}
	switch n := len(peaks); n {
	case 0:
		return best, false
	case 1:
		return peaks[0], true
	default:
		return (peaks[n-1] + peaks[n-2]) / 2, true
	}
}

// Summary is the outcome in one line.
func (f *Feedback) Summary() string {
	s := fmt.Sprintf("feedback load: %s <= %g ms held at %.4g req/s over %d windows", f.Metric, f.Target, f.Sustained, len(f.Windows))
	switch {
	case f.Sustained == 0:
		s += " (no window met the SLO)"
	case !f.Bounded:
		s += " (never failed: a lower bound)"
	}
	return s
}

// FeedbackHeader names the columns of Feedback.Rows.
var FeedbackHeader = []string{"window", "start s", "phase", "offered req/s", "achieved req/s", "tail ms", "met"}

// Rows are the trace as table rows (FeedbackHeader).
func (f *Feedback) Rows() [][]string {
	out := make([][]string, len(f.Windows))
	for i, w := range f.Windows {
		met := "yes"
		if !w.Met {
			met = "no"
		}
		out[i] = []string{strconv.Itoa(i), strconv.FormatFloat(w.StartS, 'f', 1, 64), w.Phase, strconv.FormatFloat(w.Rate, 'g', 5, 64),
			strconv.FormatFloat(w.Achieved, 'f', 2, 64), strconv.FormatFloat(w.Tail, 'f', 1, 64), met}
	}
	return out
}
