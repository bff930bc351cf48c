// Package trial owns one benchmark trial: the engine's lifecycle (start a
// process with flags in its own process group, wait for /health, classify
// failures, stop it with SIGTERM then SIGKILL to the group), workloads, the
// streaming load generator over the OpenAI API, vLLM-bench metrics,
// steady-state stability checks and GPU telemetry. Its Result is a plain,
// versioned record.
package trial
