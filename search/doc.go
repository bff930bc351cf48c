// Package search proposes the configs a study runs. It owns:
//
//   - History pruning (Prune): static feasibility from the target's memory
//     facts, failure regions (ranges or levels where every trial failed for
//     memory), shrinking numeric ranges to the envelope of good trials (Pareto
//     rank <= 2 among SLO-feasible ones) plus a margin, and dropping discrete
//     levels the observed front does not need. vLLM's default config always
//     stays inside. PruneReport gives per-parameter ranges, reasons and the
//     fraction of volume removed.
//   - The Proposer: trial 0 is vLLM's default config; then each Ask draws a
//     ParEGO weight vector, scalarises the whole history (augmented Chebyshev
//     of normalised objectives; SLO violations penalised in proportion,
//     failures worst), tells it to a fresh in-memory goptuna study and asks
//     the study for candidates (TPE or random; CMA-ES runs goptuna's
//     cmaes.Optimizer across asks, one weight vector per generation). With a
//     Scorer and enough history, a pool of sampler draws, mutations of the
//     front and uniform draws is screened by feasibility x expected
//     hypervolume improvement (optimistic mean + k std) and refined by
//     mutating the best; the best candidate runs. A config is never proposed
//     twice (by ID); the final re-measurement and its conservative ranking
//     (median - k*MAD) belong to the loop (tuner.Aggregate).
//   - SurrogateScorer: the Scorer over package surrogate (retrained on the
//     history, other contexts included through their Target and Workload).
//
// goptuna v0.9.0 defects worked around here (see sampler.go and the tests in
// goptuna_test.go): its random sampler never returns an int range's upper
// bound; its random sampler's categorical draws and its TPE's mixture
// component choice use Go's global random source (not reproducible), so this
// package plugs its own seeded goptuna.Sampler implementations (random, and
// TPE reusing goptuna's Parzen estimator); CMA-ES is not safe for concurrent
// use, so every optimizer call runs under the Proposer's mutex. The default
// config is returned directly rather than through EnqueueTrial, whose values
// are internal representations.
//
// Inputs are plain data (Observation: config, result, weight), so the package
// depends on spaces, trial, pareto and surrogate only.
package search
