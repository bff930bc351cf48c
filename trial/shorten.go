package trial

import (
	"fmt"
	"math"
	"time"
)

// Shortened is w cut to a fraction f (0 < f <= 1) of its measurement: the
// first ceil(f x NumRequests) of its measured requests (Requests draws
// them in order, so they are the same requests the full run starts with)
// and f x Duration, with the warm-up and every load level unchanged. It is
// the low-fidelity first stage of a screened trial (tuner search
// --screen-fraction).
func (w Workload) Shortened(f float64) (Workload, error) {
	if !(f > 0 && f <= 1) {
		return w, fmt.Errorf("shorten workload %s: fraction %v outside (0, 1]", w.Name, f)
	}
	if w.NumRequests > 0 {
		w.NumRequests = max(1, int(math.Ceil(f*float64(w.NumRequests))))
	}
	if w.Duration > 0 {
		w.Duration = max(time.Second, time.Duration(f*float64(w.Duration)))
	}
	return w, nil
}

// FailScreenedOut is the failure class of a trial whose short first stage
// was not promising enough to be measured in full (Result.Screen holds what
// it measured). It is the search's verdict, not the engine's: nothing
// failed to run.
const FailScreenedOut FailureClass = "screened_out"

// ScreenStage is the short first stage of a screened trial: a low-fidelity
// measurement that decided whether the config was measured in full. It is
// kept with the trial's Result and never ranks a config.
type ScreenStage struct {
	Fraction float64 `json:"fraction"` // of the workload's measured requests
	Status   Status  `json:"status"`
	// Metrics are the stage's primary-level metrics (nil when it failed).
	Metrics     *Metrics `json:"metrics,omitempty"`
	PeakVRAMGiB float64  `json:"peak_vram_gib,omitempty"`
	Phases      Phases   `json:"phases"`
	Promoted    bool     `json:"promoted"`
	Reason      string   `json:"reason"` // why it was (not) promoted
}

// Objective reads a metric of the stage as Result.Objective does.
func (s *ScreenStage) Objective(name string) (float64, bool) {
	if s == nil || s.Metrics == nil {
		return 0, false
	}
	if name == "peak_vram_gib" || name == "vram" {
		return s.PeakVRAMGiB, true
	}
	return s.Metrics.Value(name)
}

// NewScreenStage records the first stage of a screened trial from its
// result.
func NewScreenStage(f float64, r *Result) *ScreenStage {
	s := &ScreenStage{Fraction: f, Status: r.Status, PeakVRAMGiB: r.PeakVRAMGiB, Phases: r.Phases}
	if m := r.Metrics(); m != nil && r.Usable() {
		mc := *m
		s.Metrics = &mc
	}
	return s
}

// Add adds the phases of another stage of the same trial.
func (p *Phases) Add(o Phases) {
	p.WaitFreeS += o.WaitFreeS
	p.StartupS += o.StartupS
	p.WarmupS += o.WarmupS
	p.MeasureS += o.MeasureS
	p.StopS += o.StopS
	p.TotalS += o.TotalS
}
