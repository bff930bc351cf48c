// Package search proposes the configs a study runs. It owns:
//
//   - History pruning (Prune): static feasibility from the target's memory
//     facts, failure regions (ranges or levels where every trial failed for
//     memory), shrinking numeric ranges to the envelope of good trials (Pareto
//     rank <= 2 among SLO-feasible ones) plus a margin on each side where
//     usable trials went beyond it and good trials avoided it more than
//     chance would (the margin widens when few distinct values are good,
//     unless worse twins of good trials mark the edge), a VRAM ceiling on
//     gpu_memory_utilization when peak VRAM is an objective and rises with it
//     (off where the weights fill the GPUs), and dropping discrete levels the
//     observed front does not need and no good trial used. vLLM's default
//     config always stays inside (a stepped range cut below the default keeps
//     it as a level of its own). PruneReport gives per-parameter ranges,
//     reasons and the fraction of volume removed.
//   - The Proposer: trial 0 is vLLM's default config; then each Ask draws a
//     ParEGO weight vector, scalarises the whole history (augmented Chebyshev
//     of normalised objectives; SLO violations penalised in proportion,
//     failures worst), tells it to a fresh in-memory goptuna study and asks
//     the study for candidates (TPE or random; CMA-ES runs goptuna's
//     cmaes.Optimizer across asks, one weight vector per generation). With a
//     Scorer and enough history, a pool of sampler draws, mutations of the
//     front and uniform draws is screened by P(feasible)^3 (squared once
//     late) x expected hypervolume improvement (optimistic mean + k std)
//     and refined by mutating the best; the best candidate runs. Every third ask is a
//     boundary bisection instead when there is one to make: the midpoint
//     between the incumbent (the feasible config holding the most
//     hypervolume on its own) and the nearest infeasible trial that would
//     hold more, since a front's best config usually sits just inside an SLO
//     bound; once late, an ask with no pair to bisect probes instead: the
//     incumbent moved along one numeric axis to where the surrogate places
//     a bound. Past the opening (LateAfter trials of the study's own) the
//     search refines: every second ask may bisect, mutations mix fine
//     and coarse steps, the incumbent with one level changed joins the
//     pool (levelNeighbours: bisection keeps levels), and each other
//     parallel layout gets the incumbent moved there once (relayout: TP
//     and DP together, which mutation cannot do), and the config of highest
//     throughput, if it caps the sequences below its closed loop's clients,
//     is moved once to admit them all at the budget the surrogate places
//     (admit: the sequences and the budget together, which no single move
//     does). A config is never proposed twice (by ID); the final
//     re-measurement and its conservative ranking (median - k*MAD) belong to
//     the loop (tuner.Aggregate).
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
