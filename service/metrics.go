package service

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/vllm-tuner/tuner/alert"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// metrics are the service's Prometheus series, on their own registry.
type metrics struct {
	reg      *prometheus.Registry
	trials   *prometheus.CounterVec
	duration prometheus.Histogram
	queue    prometheus.Gauge
	running  prometheus.Gauge
	best     *prometheus.GaugeVec
	start    prometheus.Histogram
	fit      prometheus.Histogram
	write    *prometheus.HistogramVec
	gate     *alert.GateMetrics // the verdicts of the gates this service ran
	firings  *prometheus.CounterVec
}

var _ tuner.Observer = (*metrics)(nil)

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		trials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tuner_trials_total", Help: "Finished or interrupted trials by verdict (ok, unstable, failed, interrupted) and failure class.",
		}, []string{"verdict", "class"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tuner_trial_duration_seconds", Help: "Wall time of a trial, engine start to result.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 10),
		}),
		queue:   prometheus.NewGauge(prometheus.GaugeOpts{Name: "tuner_jobs_queued", Help: "Jobs waiting for a GPU set."}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tuner_jobs_running", Help: "Jobs running."}),
		best: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tuner_best_feasible_throughput", Help: "Best SLO-feasible throughput of a study's search so far (its throughput metric).",
		}, []string{"study"}),
		start: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tuner_engine_start_seconds", Help: "Time from an engine's launch to ready (the trial's startup phase).",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 10),
		}),
		fit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tuner_surrogate_fit_seconds", Help: "Time of one refit of the search's surrogate model.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}),
		write: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tuner_store_write_seconds", Help: "Latency of a trial record write to the database (op: begin, finish).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}, []string{"op"}),
	}
	m.firings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tuner_schedule_firings_total", Help: "Firings of the schedules by schedule name and outcome (queued, skipped, missed, failed).",
	}, []string{"schedule", "outcome"})
	m.gate = alert.NewGateMetrics(m.reg)
	m.reg.MustRegister(m.trials, m.duration, m.queue, m.running, m.best, m.start, m.fit, m.write, m.firings,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// trial counts a finished trial: "failed:oom" is verdict failed, class oom.
func (m *metrics) trial(t store.Trial) {
	verdict, class, _ := strings.Cut(t.Verdict(), ":")
	m.trials.WithLabelValues(verdict, class).Inc()
	if !t.Ended.IsZero() && !t.Started.IsZero() {
		m.duration.Observe(t.Ended.Sub(t.Started).Seconds())
	}
}

func (m *metrics) EngineStarted(d time.Duration)   { m.start.Observe(d.Seconds()) }
func (m *metrics) SurrogateFitted(d time.Duration) { m.fit.Observe(d.Seconds()) }
func (m *metrics) StoreWritten(op string, d time.Duration) {
	m.write.WithLabelValues(op).Observe(d.Seconds())
}
