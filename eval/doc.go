// Package eval is the search-quality evaluation harness: it compares the
// tuner's search (pruning, TPE, surrogate screening, the overnight loop)
// with the baselines users would otherwise run (random search, a vLLM
// auto_tune-style grid, plain goptuna TPE) on the simulator's virtual clock,
// against a ground-truth Pareto front computed from a large noise-free
// sample of each scenario's space.
//
// A Scenario is a model, GPUs, a workload, an SLO and the three objectives
// (output throughput up, the scenario's latency metric down, peak VRAM
// down). GroundTruth evaluates the noise-free simulator over thousands of
// configs (random, the max-num-seqs x max-num-batched-tokens grid, the
// default, and local refinement around the front), then optimises from that
// front until convergence (polish: single-objective descents to the front's
// edges from many starts, every combination of the discrete flags'
// levels at the front's best points, then a coordinate search of every axis
// around every member that holds hypervolume, numeric steps halving down to
// one unit: the configs at the SLO bounds a random sample misses), caches the
// front under testdata/, keyed by a fingerprint of the simulator's
// behaviour, the resolved space, the scenario and the plan, so a change to
// any of them recomputes it. HV ratios are against that front alone,
// whatever strategies run; when the runs' configs joined with it hold more
// than TruthSlack more hypervolume, Execute returns ErrTruthBeaten (a
// *TruthBeatenError) with its report.
//
// Every strategy runs with noise on (Config.NoiseFree: off, to tell what
// the search loses by its own choices from what noise costs it); what it
// found is judged by the true (noise-free) objective vectors of the configs
// it tried that truly meet the SLO, so measurement noise can never inflate
// a score. The truth is that of the workload's one request stream (its
// seed's prompt and output lengths), which the search measures too: the
// tuner's runs are also judged on Config.Streams other streams of the same
// workload beside the truth's front and best config there
// (Evaluator.OnStreams), which tells a run short in its configs from one
// short only on that stream. Run writes a Markdown report, JSON and one SVG per scenario
// (hypervolume ratio vs trials). The JSON keeps every run's own figures
// (Summary.Seeds), so Compare can judge a change to the search seed by
// seed against a report of the code before it (tuner eval compare).
package eval
