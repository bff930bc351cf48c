package surrogate

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestStats(t *testing.T) {
	cases := []struct {
		name      string
		got, want float64
	}{
		{"auc perfect", AUC([]float64{0.1, 0.2, 0.8, 0.9}, []float64{0, 0, 1, 1}), 1},
		{"auc reversed", AUC([]float64{0.9, 0.8, 0.2, 0.1}, []float64{0, 0, 1, 1}), 0},
		{"auc ties", AUC([]float64{0.5, 0.5, 0.5, 0.5}, []float64{0, 1, 0, 1}), 0.5},
		{"auc one class", AUC([]float64{0.1, 0.2}, []float64{1, 1}), 0.5},
		{"auc 3 of 4 pairs", AUC([]float64{0.1, 0.4, 0.35, 0.8}, []float64{0, 0, 1, 1}), 0.75},
		{"spearman monotone", Spearman([]float64{1, 2, 3, 4, 5}, []float64{1, 8, 27, 64, 125}), 1},
		{"spearman reversed", Spearman([]float64{1, 2, 3}, []float64{3, 2, 1}), -1},
		{"mape", MAPE([]float64{110, 90, 5}, []float64{100, 100, 0}), 0.1},
		{"r2 perfect", rSquared([]float64{1, 2, 3}, []float64{1, 2, 3}), 1},
		{"r2 mean", rSquared([]float64{2, 2, 2}, []float64{1, 2, 3}), 0},
	}
	for _, c := range cases {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
}

// Property of the squared loss with no L2: every leaf outputs the mean
// residual of its rows, so after each iteration the training residuals sum
// to zero, and the training error never increases.
func TestSquaredLossResidualsSumToZero(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		reg, _ := synth(200, seed)
		r := rand.New(rand.NewPCG(seed, 1))
		for i := range reg.Y {
			reg.Y[i] += 100 * r.Float64() // an offset the init must absorb
		}
		cfg := DefaultGBDTConfig()
		cfg.Lambda, cfg.RowSample, cfg.ColSample, cfg.EarlyStoppingRounds = 0, 1, 1, 0
		prev := math.Inf(1)
		for _, n := range []int{1, 2, 5, 20} {
			cfg.NumTrees = n
			b, err := TrainGBDT(reg, nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			var sum, sse float64
			for i, f := range b.TrainMargin {
				sum += f - reg.Y[i]
				sse += (f - reg.Y[i]) * (f - reg.Y[i])
			}
			if math.Abs(sum) > 1e-7*float64(len(reg.Y)) {
				t.Errorf("seed %d, %d trees: residuals sum to %v", seed, n, sum)
			}
			if sse > prev+1e-9 {
				t.Errorf("seed %d: training error rose from %v to %v at %d trees", seed, prev, sse, n)
			}
			prev = sse
		}
	}
}
