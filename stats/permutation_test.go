package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func top(s []float64) float64 { return s[len(s)-1] }

// x = {1, 2}, y = {3, 4}: of the 6 splits, 2 have |median difference| >= 2,
// so the exact p is 1/3; 20,000 draws get within 0.01 (4 sd).
func TestPermutationTestExactSmall(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	res, err := PermutationTest([]float64{1, 2}, []float64{3, 4}, median, PermutationConfig{Max: 20000, Stop: 1 << 30}, r)
	if err != nil {
		t.Fatal(err)
	}
	if res.Observed != 2 || math.Abs(res.P-1.0/3) > 0.01 || res.Draws != 20000 {
		t.Errorf("got %+v, want observed 2, p 1/3", res)
	}
}

// Under the null the test rejects at about its level; with a real shift of
// the tail it rejects (p-values and the sequential stop both in play).
func TestPermutationTestLevelAndPower(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	cfg := PermutationConfig{Max: 999, Stop: 20}
	p95 := func(s []float64) float64 { return s[int(0.95*float64(len(s)-1))] }
	draw := func(n int, scale float64) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = scale * math.Exp(0.3*r.NormFloat64())
		}
		return s
	}
	const trials = 300
	rejected := 0
	for range trials {
		res, err := PermutationTest(draw(80, 1), draw(70, 1), p95, cfg, r)
		if err != nil {
			t.Fatal(err)
		}
		if res.P <= 0.05 {
			rejected++
		}
	}
	// Binomial(300, 0.05): mean 15, sd 3.8.
	if rejected < 5 || rejected > 28 {
		t.Errorf("null rejections %d of %d, want about 15", rejected, trials)
	}
	res, err := PermutationTest(draw(300, 1), draw(300, 1.5), p95, cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	if res.P > 0.01 || res.Observed <= 0 || res.Draws != cfg.Max {
		t.Errorf("50%% slower tail: %+v", res)
	}
}

func TestPermutationTestEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	cfg := DefaultPermutationConfig()
	// Identical groups: every split is as extreme, p = 1 after Stop draws.
	res, err := PermutationTest([]float64{5, 5, 5}, []float64{5, 5}, top, cfg, r)
	if err != nil || res.P != 1 || res.Draws != cfg.Stop {
		t.Errorf("all equal: %+v, %v", res, err)
	}
	if _, err := PermutationTest(nil, []float64{1}, top, cfg, r); err == nil {
		t.Error("empty sample accepted")
	}
	if _, err := PermutationTest([]float64{1}, []float64{math.NaN()}, top, cfg, r); err == nil {
		t.Error("NaN accepted")
	}
	if _, err := PermutationTest([]float64{1}, []float64{2}, top, PermutationConfig{}, r); err == nil {
		t.Error("zero config accepted")
	}
	// Same seed, same answer.
	a, _ := PermutationTest([]float64{1, 3, 5, 7}, []float64{2, 4, 9}, top, cfg, rand.New(rand.NewPCG(9, 9)))
	b, _ := PermutationTest([]float64{1, 3, 5, 7}, []float64{2, 4, 9}, top, cfg, rand.New(rand.NewPCG(9, 9)))
	if a != b {
		t.Errorf("not reproducible: %+v vs %+v", a, b)
	}
}
