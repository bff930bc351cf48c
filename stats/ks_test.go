package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestKolmogorovQ(t *testing.T) {
	tests := []struct{ l, want, tol float64 }{
		{0, 1, 0},
		{0.2, 1, 1e-6},
		{0.5, 0.9639452436, 1e-8},
		{1.0, 0.2699996716, 1e-8},
		{1.17, 0.1295, 1e-3},
		{1.19, 0.1178, 1e-3},
		{1.2238, 0.10, 1e-4},
		{1.3581, 0.05, 1e-4},
		{1.6276, 0.01, 1e-4},
		{3, 3.0462e-8, 1e-11},
	}
	for _, tt := range tests {
		if got := KolmogorovQ(tt.l); math.Abs(got-tt.want) > tt.tol {
			t.Errorf("Q(%v) = %.10g, want %.10g", tt.l, got, tt.want)
		}
	}
	// The two series agree where they switch.
	if d := math.Abs(KolmogorovQ(1.18-1e-9) - KolmogorovQ(1.18+1e-9)); d > 1e-8 {
		t.Errorf("discontinuity %g at 1.18", d)
	}
	// Monotone decreasing.
	prev := 1.0
	for l := 0.01; l < 4; l += 0.01 {
		q := KolmogorovQ(l)
		if q > prev+1e-12 {
			t.Fatalf("Q not monotone at %v", l)
		}
		prev = q
	}
}

func TestKSTest(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5}
	y := []float64{6, 7, 8, 9, 10}
	// D = 1, n_e = 2.5, lambda = (sqrt(2.5)+0.12+0.11/sqrt(2.5)) = 1.77068.
	if p := KSTest(x, y); math.Abs(p-0.0037838) > 1e-5 {
		t.Errorf("p(disjoint) = %.7f, want 0.0037838", p)
	}
	if p := KSTest(x, x); p != 1 {
		t.Errorf("p(identical) = %v, want 1", p)
	}
	if p := KSTest(nil, x); p != 1 {
		t.Errorf("p(empty) = %v", p)
	}
	// Same distribution, large samples: p is not small (seeded).
	r := rand.New(rand.NewPCG(1, 2))
	a, b := make([]float64, 400), make([]float64, 400)
	for i := range a {
		a[i], b[i] = r.NormFloat64(), r.NormFloat64()
	}
	slices.Sort(a)
	slices.Sort(b)
	if p := KSTest(a, b); p < 0.05 {
		t.Errorf("p(same dist) = %v", p)
	}
	for i := range b {
		b[i] += 0.5
	}
	if p := KSTest(a, b); p > 1e-6 {
		t.Errorf("p(shifted by 0.5 sd) = %v", p)
	}
}
