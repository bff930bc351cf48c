package stats

import (
	"math"
	"sort"
)

// Holm returns the Holm-Bonferroni adjusted p-values of a family of tests,
// in input order: with the m p-values sorted ascending, the i-th (1-based)
// adjusted value is max over j <= i of min(1, (m-j+1) p_(j)), which controls
// the family-wise error rate at alpha when a test rejects on adjusted
// p < alpha (statsmodels' multipletests 'holm'). NaN entries are untested:
// they stay NaN and do not count in m.
func Holm(p []float64) []float64 {
	adj := make([]float64, len(p))
	idx := make([]int, 0, len(p))
	for i, v := range p {
		adj[i] = math.NaN()
		if !math.IsNaN(v) {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return p[idx[a]] < p[idx[b]] })
	m := len(idx)
	running := 0.0
	for rank, i := range idx {
		running = math.Max(running, math.Min(1, float64(m-rank)*p[i]))
		adj[i] = running
	}
	return adj
}
