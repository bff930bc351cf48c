package stats

import (
	"math"
	"testing"
)

func TestHolm(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name    string
		p, want []float64
	}{
		{"empty", nil, []float64{}},
		{"one", []float64{0.03}, []float64{0.03}},
		// Sorted 0.01, 0.02, 0.04, 0.5: 4*0.01, max(.04, 3*.02), max(.06, 2*.04), max(.08, .5).
		{"four, unsorted", []float64{0.5, 0.04, 0.01, 0.02}, []float64{0.5, 0.08, 0.04, 0.06}},
		// Sorted .001, .03, .04: 3*.001, 2*.03, then 1*.04 is raised to .06.
		{"step-down keeps order", []float64{0.001, 0.04, 0.03}, []float64{0.003, 0.06, 0.06}},
		{"capped at 1", []float64{0.6, 0.7}, []float64{1, 1}},
		{"NaN untested", []float64{0.01, nan, 0.04}, []float64{0.02, nan, 0.04}},
		{"ties", []float64{0.02, 0.02}, []float64{0.04, 0.04}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Holm(tt.p)
			if len(got) != len(tt.want) {
				t.Fatalf("len %d, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if math.IsNaN(tt.want[i]) != math.IsNaN(got[i]) || (!math.IsNaN(got[i]) && math.Abs(got[i]-tt.want[i]) > 1e-15) {
					t.Errorf("adjusted %v = %v, want %v", tt.p, got, tt.want)
					break
				}
			}
		})
	}
}
