package service

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

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
}

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
	}
	m.reg.MustRegister(m.trials, m.duration, m.queue, m.running, m.best,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// trial counts a finished trial: "failed:oom" is verdict failed, class oom.
func (m *metrics) trial(t tuner.Trial) {
	verdict, class, _ := strings.Cut(t.Verdict(), ":")
	m.trials.WithLabelValues(verdict, class).Inc()
	if !t.Ended.IsZero() && !t.Started.IsZero() {
		m.duration.Observe(t.Ended.Sub(t.Started).Seconds())
	}
}
