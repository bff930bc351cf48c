// Package trial owns one benchmark trial: the engine's lifecycle (start a
// process with flags in its own process group, under a guard that kills
// every process of the engine if the tuner dies, wait for /health, classify
// failures, stop it with SIGTERM then SIGKILL to the group), workloads, the
// streaming load generator over the OpenAI API, vLLM-bench metrics,
// steady-state stability checks and GPU telemetry. Its Result is a plain,
// versioned record.
//
// Parts, each usable alone:
//
//   - Runner (runner.go): NewRunner(Config) then Run(ctx, spaces.Config,
//     Workload) (Result, error). Engine problems are failed Results
//     (failed:oom, kv_too_small, invalid_argument, startup_timeout, crashed,
//     unhealthy); the error is for infrastructure and cancellation (then the
//     engine is stopped first and the Result says FailInterrupted). One
//     engine start serves every load level of the workload; capacity mode
//     searches the highest load meeting the SLOs (SearchCapacity), feedback
//     mode holds the SLO's latency bound (HoldSLO).
//   - Engine (engine.go, classify.go): StartEngine, WaitHealthy, Version,
//     ServedModel, Exited, Failure, Stop. Classify maps an exit status and
//     the whole log to *EngineError (Kind is one of the Err* sentinels; the
//     line that decided and the log's tail explain it). The environment is
//     passed on an allowlist; secrets are masked in what we write.
//   - Client (loadgen.go, sse.go): streaming /v1/completions with token-id
//     prompts of exact length, ignore_eos, max_tokens and include_usage; Do
//     times one request at chunk arrival (monotonic clock); Drive runs an
//     open loop (a pacer releases requests at RequestSpec.At whatever the
//     server does) or a closed loop (N workers), one goroutine per request,
//     with a Gate that can stop or extend issuing. Failed requests are
//     records with Err, never dropped.
//   - Metrics (metrics.go): Summarize(records, SLO) computes vLLM bench's
//     latency aggregates and throughputs over the steady window (tokens
//     by arrival between the first measured completion and the last
//     measured send, vLLM bench's figure beside them); MarkOverload judges
//     an open-loop level; RequestErrorClass classifies failed requests;
//     Record is the raw data (also written per trial by WriteRaw, read
//     back by ReadRaw, so any metric can be recomputed).
//   - Stability (stability.go): Analyze cuts the warm-up (MSER-5 on the
//     E2EL of the requests served at full load; up to two rounds of a
//     closed loop), compares steady windows pairwise by two-sample KS
//     (stats.KSTest, our asymptotic p-value), checks the window throughput
//     CV and reports the 95% CI half-width used for early stopping. A
//     closed loop's
//     throughput windows are request-level batches (Little's law:
//     concurrency x tokens / sum of E2EL), which synchronised waves of
//     identical requests do not throw off, tested for a linear trend; an
//     open loop's are fixed-time windows of chunk arrivals.
//   - Telemetry (telemetry.go, nvml.go): GPUSource (NVML through go-nvml
//     with cgo on Linux; a stub reporting ErrNVMLUnavailable otherwise) at
//     ~10 Hz, and ParseEngineMetrics/ScrapeEngine for the engine's /metrics
//     (vLLM names and vllm-sim's GPU memory gauges). Peak VRAM comes from
//     NVML, else from the engine's gauges; Result.VRAMSource says which.
//   - Latency decomposition (latency.go): a LatencyProbe scrapes the
//     engine's queue, prefill and decode histograms before and after a
//     level (ParseLatencyScrape, LatencyFromFamilies for an in-process
//     registry) and Decompose differences them into a Breakdown (means
//     from sum/count, approximate percentiles from the buckets) beside the
//     client's E2EL, TTFT and TPOT over the same requests; the rest of the
//     E2EL is the client's share (network, HTTP, client queueing).
//   - Feedback load (feedback.go): HoldSLO, the feedback mode of the live
//     and virtual runners and of bench cells: window after window of an
//     open loop, doubling until the SLO's latency bound breaks, then
//     additive increase and multiplicative decrease on each window's tail;
//     it reports the sustained rate and the trace.
//   - Workloads (workload.go, workload_load.go): LoadWorkload(name or
//     file), ParseWorkload (strict YAML, errors naming file, line and
//     field), built-ins chat, short-high-concurrency and long-prefill, and
//     ShareGPT files (LoadShareGPTFile).
//
// Tests build testdata/fakeengine (a scripted stand-in for vllm serve) and,
// for the integration tests, cmd/vllm-sim.
package trial
