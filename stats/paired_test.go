package stats

import (
	"math"
	"testing"
)

func TestPaired(t *testing.T) {
	// Student's sleep data (R's datasets::sleep): extra hours of sleep of
	// ten patients under two drugs. R: t.test(g2, g1, paired = TRUE) gives
	// mean difference 1.58, t = 4.0621, df = 9, p-value = 0.002833.
	g1 := []float64{0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0}
	g2 := []float64{1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4}
	tests := []struct {
		name         string
		x, y         []float64
		mean, tStat  float64
		p            float64
		wins, losses int
	}{
		{"sleep", g1, g2, 1.58, 4.0621, 0.002833, 9, 0},
		{"sleep reversed", g2, g1, -1.58, -4.0621, 0.002833, 0, 9},
		{"no difference", []float64{1, 2, 3}, []float64{1, 2, 3}, 0, 0, 1, 0, 0},
		{"constant shift", []float64{1, 2, 3}, []float64{2, 3, 4}, 1, math.Inf(1), 0, 3, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Paired(tc.x, tc.y)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(r.Mean-tc.mean) > 1e-9 || !close4(r.T, tc.tStat) || math.Abs(r.P-tc.p) > 5e-7 ||
				r.Wins != tc.wins || r.Losses != tc.losses || r.N != len(tc.x) {
				t.Errorf("got %+v, want mean %v t %v p %v wins %d losses %d", r, tc.mean, tc.tStat, tc.p, tc.wins, tc.losses)
			}
		})
	}
}

// close4 compares to R's four decimals (and infinities exactly).
func close4(got, want float64) bool {
	if math.IsInf(want, 0) {
		return got == want
	}
	return math.Abs(got-want) < 5e-5
}

func TestPairedRejects(t *testing.T) {
	for name, xy := range map[string][2][]float64{
		"lengths differ": {{1, 2}, {1}},
		"one pair":       {{1}, {2}},
		"NaN":            {{1, math.NaN()}, {1, 2}},
		"Inf":            {{1, 2}, {math.Inf(-1), 2}},
	} {
		if _, err := Paired(xy[0], xy[1]); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
