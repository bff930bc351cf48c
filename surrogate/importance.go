package surrogate

import (
	"math"
	"math/rand/v2"
	"slices"
)

// PermutationImportance is how much the model's squared error on rows x
// (objective obj, measured values y) grows when the columns of a group are
// shuffled together across the rows, averaged over repeats shuffles and
// divided by the variance of y: 0 for a group the model ignores, about 2
// for one that explains everything. Groups are column indices (a
// categorical's one-hot columns move together).
func (s *Surrogate) PermutationImportance(x [][]float64, y []float64, obj int, groups [][]int, repeats int, rng *rand.Rand) []float64 {
	out := make([]float64, len(groups))
	if len(x) < 2 || obj < 0 {
		return out
	}
	mse := func(rows [][]float64) float64 {
		pred := s.Predict(rows)
		sum := 0.0
		for i, p := range pred {
			d := p.Mean[obj] - y[i]
			sum += d * d
		}
		return sum / float64(len(rows))
	}
	mean := 0.0
	for _, v := range y {
		mean += v
	}
	mean /= float64(len(y))
	variance := 0.0
	for _, v := range y {
		variance += (v - mean) * (v - mean)
	}
	variance /= float64(len(y))
	if variance == 0 {
		return out
	}
	base := mse(x)
	shuffled := make([][]float64, len(x))
	for i := range x {
		shuffled[i] = slices.Clone(x[i])
	}
	for g, cols := range groups {
		total := 0.0
		for range max(repeats, 1) {
			perm := rng.Perm(len(x))
			for i := range x {
				for _, c := range cols {
					shuffled[i][c] = x[perm[i]][c]
				}
			}
			total += mse(shuffled) - base
		}
		for i := range x {
			for _, c := range cols {
				shuffled[i][c] = x[i][c]
			}
		}
		out[g] = math.Max(0, total/float64(max(repeats, 1))/variance)
	}
	return out
}
