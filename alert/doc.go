// Package alert sends what an operator must hear about — a regression the
// gate found, a failed run, a broken engine — to a webhook, and keeps the
// gate's verdicts as Prometheus metrics.
//
// A Sender POSTs one Event as an Alertmanager-compatible payload (the
// array of alerts Alertmanager's /api/v2/alerts takes) or as a generic JSON
// object, retries network errors, 5xx and 429 answers with exponential
// backoff, and appends a record of every delivery (attempts, status, error)
// to a JSON-lines log. GateMetrics holds the last gate verdict per model;
// examples/prometheus/tuner-alerts.yml has rules that fire on it.
package alert
