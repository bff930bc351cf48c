// Package gate decides whether a benchmark run regressed against a baseline,
// from raw samples and independent of where the runs are stored: the caller
// (tuner bench compare, a CI job) hands over two Runs, each a list of cells
// with per-request latency samples (TTFT, TPOT, ITL, E2EL in ms) and
// per-window throughput samples, and Compare returns a typed Report that the
// renderers turn into a text table, JSON, Markdown for a pull-request comment
// or JUnit XML.
//
// The rule, per cell and metric: a metric regresses when the test's p-value,
// Holm-corrected across every cell x metric tested (Config.Correction), is
// below Config.Alpha AND the effect, (value_new - value_base) / value_base,
// is worse than the threshold (5% by default, per-metric overrides) in the
// metric's direction (higher latency, lower throughput). Improvements mirror
// it. Both conditions are needed: with thousands of requests a 0.5% shift is
// "significant" but not worth failing a build; a 10% jump in a noisy tail is
// large but may be chance.
//
// Which test: a median metric (quantile 0.5) uses the two-sided Mann-Whitney
// U test (stats.MannWhitneyU: exact for small samples without ties, normal
// approximation with tie and continuity correction otherwise), as the issue
// asks. A tail metric (p99, say) uses a permutation test of the quantile
// difference itself (stats.PermutationTest, seeded per cell and metric). We
// chose it over a U test on the upper-tail samples, which would need a
// threshold picked from the data and ignores how many requests land in the
// tail, and over a bootstrap of the quantile, whose intervals for p99 of a
// few hundred requests rest on the two or three largest values and
// under-cover: the permutation test is exact under "no change" at any sample
// size, and it tests the very statistic whose effect is reported. It
// permutes blocks of neighbouring requests (a tenth of a run each), not
// single requests: a stall slows every request in flight, so tail values
// come in clusters, and single-request permutations read one run's stall
// as a changed tail.
//
// Every tested row also reports its minimum detectable effect (Row.MDE):
// the smallest relative change the comparison finds with 80% power, from
// the standard errors of both runs' values (stats.QuantileSE, inflated for
// serial dependence over the same blocks the tests permute) at the level a
// lone change must pass after the correction (alpha/tests under Holm). A
// row without a significant change whose MDE exceeds the threshold is
// Inconclusive, not NoChange: the runs could not have shown a change of
// the size that counts. A report with no regression and an inconclusive
// row is Undecided (tuner bench compare exits 3).
//
// The ITL series are the level's inter-token gaps, every gap pooled (as
// vLLM's bench and the level's own metrics count ITL), rebuilt by the
// caller from each request's ITL quantiles (bench.ITLGaps): not a value
// per request, which would be TPOT under another name.
//
// Values (medians and tails) are trial.Percentile, numpy's linear
// interpolation, so compare shows the same figures as the run's own report.
// Comparisons that cannot be tested are rows with the Untestable verdict and
// a reason (summary-only data, too few samples to reach alpha, a base of 0),
// never silently dropped; runs that cannot be compared at all (different
// models or matrices, no cell in common) are an *IncomparableError.
package gate
