package alert

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vllm-tuner/tuner/gate"
)

// Gate outcomes, as the metrics label them.
const (
	GateRegression   = "regression"
	GateInconclusive = "inconclusive"
	GatePass         = "pass"
)

var gateOutcomes = []string{GateRegression, GateInconclusive, GatePass}

// GateOutcome is the report's overall verdict.
func GateOutcome(rep *gate.Report) string {
	switch {
	case rep.Regressed():
		return GateRegression
	case rep.Undecided():
		return GateInconclusive
	}
	return GatePass
}

// GateMetrics are the gate's verdicts as Prometheus series, labelled by
// model: the last verdict (tuner_gate_verdict, 1 for it and 0 for the
// others), its regressed rows, its time, and a count of gates by verdict.
type GateMetrics struct {
	verdict   *prometheus.GaugeVec
	regressed *prometheus.GaugeVec
	lastRun   *prometheus.GaugeVec
	runs      *prometheus.CounterVec
}

// NewGateMetrics registers the gate series on reg.
func NewGateMetrics(reg prometheus.Registerer) *GateMetrics {
	m := &GateMetrics{
		verdict: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tuner_gate_verdict",
			Help: "Last regression-gate verdict per model: 1 for the verdict it gave (regression, inconclusive, pass), 0 for the others."}, []string{"model", "verdict"}),
		regressed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tuner_gate_regressed_rows",
			Help: "Rows (cell x metric) the last gate of a model found regressed."}, []string{"model"}),
		lastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "tuner_gate_last_run_timestamp_seconds",
			Help: "Unix time of the last gate of a model."}, []string{"model"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tuner_gate_runs_total",
			Help: "Regression gates run, by verdict."}, []string{"verdict"}),
	}
	reg.MustRegister(m.verdict, m.regressed, m.lastRun, m.runs)
	return m
}

// Observe records one gate's report at time t.
func (m *GateMetrics) Observe(rep *gate.Report, t time.Time) {
	model := rep.Model
	if model == "" {
		model = "unknown"
	}
	out := GateOutcome(rep)
	for _, o := range gateOutcomes {
		v := 0.0
		if o == out {
			v = 1
		}
		m.verdict.WithLabelValues(model, o).Set(v)
	}
	m.regressed.WithLabelValues(model).Set(float64(rep.Regressions))
	m.lastRun.WithLabelValues(model).Set(float64(t.Unix()))
	m.runs.WithLabelValues(out).Inc()
}
