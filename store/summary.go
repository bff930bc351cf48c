package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
	"github.com/vllm-tuner/tuner/trial"
)

// SummaryMetrics are the metrics a Summary carries, in the order of
// Summary.Values: every name trial.Metrics.Value knows except aliases.
var SummaryMetrics = func() []string {
	names := []string{"output_throughput", "request_throughput", "total_token_throughput", "request_goodput", "error_rate"}
	for _, m := range []string{"ttft", "tpot", "itl", "e2el"} {
		for _, st := range []string{"mean", "median", "p90", "p95", "p99", "max"} {
			names = append(names, m+"_"+st)
		}
	}
	return names
}()

// summaryIndex maps a metric name (aliases included) to its position.
var summaryIndex = func() map[string]int {
	idx := make(map[string]int, len(SummaryMetrics)+5)
	for i, n := range SummaryMetrics {
		idx[n] = i
		if strings.HasSuffix(n, "_median") {
			idx[strings.TrimSuffix(n, "median")+"p50"] = i
		}
	}
	idx["goodput"] = idx["request_goodput"]
	return idx
}()

// Summary is the compact form of a trial that history queries return: what
// search-space pruning and surrogate training read (config, outcome, the
// primary level's aggregate metrics, VRAM), without the rest of the Result.
// It is kept beside each trial in the same transaction.
type Summary struct {
	V        int                `json:"v"`
	StudyID  string             `json:"study_id"`
	Seq      uint64             `json:"seq"`
	State    State              `json:"state"`
	ConfigID string             `json:"config_id"`
	Config   spaces.Config      `json:"config"`
	Repeat   int                `json:"repeat,omitempty"`
	Status   trial.Status       `json:"status,omitempty"`
	Failure  trial.FailureClass `json:"failure,omitempty"`
	Started  time.Time          `json:"started"`
	// Values holds SummaryMetrics in order; empty when the result has no
	// primary level.
	Values      []float64 `json:"values,omitempty"`
	PeakVRAMGiB float64   `json:"peak_vram_gib,omitempty"`
}

// ID is the trial's ID.
func (s *Summary) ID() string { return TrialID(s.StudyID, s.Seq) }

// Objective reads a metric like trial.Result.Objective does: false for
// failed trials, unknown names and trials without measurements.
func (s *Summary) Objective(name string) (float64, bool) {
	if s.Status == "" || s.Status == trial.StatusFailed {
		return 0, false
	}
	if name == "peak_vram_gib" || name == "vram" {
		return s.PeakVRAMGiB, true
	}
	i, ok := summaryIndex[name]
	if !ok || len(s.Values) != len(SummaryMetrics) {
		return 0, false
	}
	return s.Values[i], true
}

// Metrics rebuilds the primary level's aggregates (for SLO checks), or nil.
func (s *Summary) Metrics() *trial.Metrics {
	if len(s.Values) != len(SummaryMetrics) {
		return nil
	}
	v := s.Values
	m := &trial.Metrics{OutputThroughput: v[0], RequestThroughput: v[1], TotalTokenThroughput: v[2], RequestGoodput: v[3], ErrorRate: v[4]}
	for k, d := range []*trial.Dist{&m.TTFT, &m.TPOT, &m.ITL, &m.E2EL} {
		o := 5 + 6*k
		d.Mean, d.Median, d.P90, d.P95, d.P99, d.Max = v[o], v[o+1], v[o+2], v[o+3], v[o+4], v[o+5]
	}
	return m
}

// summarize derives a trial's summary.
func summarize(t *Trial) Summary {
	s := Summary{V: RecordVersion, StudyID: t.StudyID, Seq: t.Seq, State: t.State, ConfigID: t.ConfigID,
		Config: t.Config, Repeat: t.Repeat, Started: t.Started}
	if r := t.Result; r != nil {
		s.Status, s.Failure, s.PeakVRAMGiB = r.Status, r.Failure, r.PeakVRAMGiB
		if m := r.Metrics(); m != nil {
			s.Values = make([]float64, len(SummaryMetrics))
			for i, n := range SummaryMetrics {
				s.Values[i], _ = m.Value(n)
			}
		}
	}
	return s
}

// DecodeSummary decodes a stored summary record.
func DecodeSummary(b []byte) (Summary, error) {
	var s Summary
	if err := decodeStrict(b, &s); err != nil {
		return Summary{}, fmt.Errorf("decode summary: %w", err)
	}
	switch {
	case s.V > RecordVersion:
		return Summary{}, fmt.Errorf("decode summary %s: record version %d: %w", s.ID(), s.V, ErrTooNew)
	case s.V != RecordVersion:
		return Summary{}, fmt.Errorf("decode summary %s: record version %d", s.ID(), s.V)
	case !validStudyID(s.StudyID) || s.Seq == 0:
		return Summary{}, fmt.Errorf("decode summary: bad trial %s", s.ID())
	case !s.State.Valid():
		return Summary{}, fmt.Errorf("decode summary %s: unknown state %q", s.ID(), s.State)
	case len(s.Values) != 0 && len(s.Values) != len(SummaryMetrics):
		return Summary{}, fmt.Errorf("decode summary %s: %d values, want %d", s.ID(), len(s.Values), len(SummaryMetrics))
	}
	return s, nil
}
