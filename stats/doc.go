// Package stats holds the hypothesis tests that the rest of tuner shares, so
// each is written once: the two-sample Mann-Whitney U test (MannWhitneyU),
// the two-sample Kolmogorov-Smirnov p-value (KSTest, used by trial's
// steady-state check), a two-sample permutation test of any statistic of a
// sorted sample (PermutationTest, used for tail quantiles), the
// Holm-Bonferroni step-down adjustment (Holm), the paired t-test of two
// samples measured on the same units (Paired, used by tuner eval compare to
// judge a search change seed by seed), and the standard error of a
// sample quantile under serial dependence (QuantileSE) with the minimum
// detectable effect it implies (MinDetectable), used by the regression gate.
//
// MannWhitneyU follows scipy.stats.mannwhitneyu (scipy 1.10, two-sided,
// use_continuity=True) number for number: the same statistic (U of the first
// sample, average ranks for ties), the same 'auto' choice (exact when either
// sample has at most 8 values and there are no ties) and the same p-values.
// The fixtures in testdata/mannwhitneyu.json were computed with scipy by
// testdata/mannwhitneyu.py and are checked to 1e-9 relative.
//
// gonum/stat has none of these tests; it supplies the KS statistic.
package stats
