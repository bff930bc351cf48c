// Package bench benchmarks one serving setup: a vLLM (or vllm-sim) config
// that it starts once through trial's engine path, or an OpenAI-compatible
// server that is already running, over a scenario matrix.
//
// A Matrix (matrix.go) is a YAML file of cells; every cell is a
// trial.Workload parsed by trial.ParseWorkload, built from the file's
// defaults, named length distributions and named loads. Run (run.go) drives
// every cell's load levels with trial's client, cuts the warm-up and judges
// the steady state with trial.Analyze, summarises with trial.Summarize and
// hands each finished cell, with its raw per-request data (raw.go: about 20
// bytes a request, varints under gzip), to a Sink: the store keeps it, so a
// run that dies keeps the cells it finished. The run records are the
// store's (store.Run, CellResult, LevelResult, RunState): this package
// measures runs, the store keeps them.
//
// Each level is decomposed into queue, prefill, decode and the client's
// share (trial.LatencyProbe around the level, when /metrics is scraped);
// a feedback: true cell holds its SLO by trial.HoldSLO, its windows the
// cell's levels.
//
// Report (report.go) turns a stored run into tables (text, Markdown), the
// QPS-vs-latency curve, the latency breakdown, the feedback trace and
// capacity at the SLO; Import (import.go) reads
// `vllm bench serve --save-result` JSON into the same record.
package bench
