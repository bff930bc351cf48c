// Package tuner runs the overnight loop: budget, signals, resume, progress and
// the final report.
//
// A Loop joins four parts through small interfaces declared here, the
// consumer:
//
//	Proposer.Ask -> Store.Begin (state running) -> Runner.Run -> Store.Finish
//	(ok / unstable / failed / interrupted) -> Proposer.Tell
//
// The loop owns the budget (finished trials and/or wall time), the per-trial
// timeout, patience (stop when the SLO-feasible Pareto front has not improved
// for N trials), the final re-measurement of the best few configs and of
// vLLM's default (ranked by the conservative score median - k*MAD, so a lucky
// single run does not go to production and the gain compares medians), the
// progress display and the Report. Cancelling the context
// (SIGINT/SIGTERM in the command) stops the running engine through the
// runner, marks the trial interrupted and returns ctx.Err(); a later run with
// Config.Resume continues the study: finished trials are told to the
// proposer, interrupted ones are re-run once, nothing is lost or repeated.
//
// With Config.Shared (a Coordinator: SharedStudy over a store.DB's leases:
// a PostgreSQL study, or tuner worker on a bbolt file) the loop is one worker of a study several processes serve
// (shared.go): Store.Begin becomes a lease claimed once per config and
// re-measurement index, renewed by a heartbeat while the trial runs; the
// loop reads the others' trials before each decision, so budgets,
// patience and the re-measurement are study-wide, and tells the proposer
// the configs in flight elsewhere.
//
// Selection (Recommend) is pure and shared with `tuner recommend`: it groups
// trials by config, aggregates repeats robustly and picks a config under SLOs
// by a preference (throughput, latency, VRAM or the front's knee).
//
// The package never prints to stdout or exits; it writes progress to the
// io.Writer and logs to the *slog.Logger it is given.
package tuner
