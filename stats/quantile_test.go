package stats

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/stat"
)

// spreadOfQuantile draws reps samples from gen and returns the standard
// deviation of their q-quantiles and the mean QuantileSE.
func spreadOfQuantile(t *testing.T, gen func(*rand.Rand) []float64, q float64, batches, reps int) (sd, meanSE float64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	var qs, ses []float64
	for range reps {
		x := gen(rng)
		se, err := QuantileSE(x, q, batches)
		if err != nil {
			t.Fatal(err)
		}
		s := slices.Clone(x)
		slices.Sort(s)
		qs = append(qs, stat.Quantile(q, stat.LinInterp, s, nil))
		ses = append(ses, se)
	}
	return stat.StdDev(qs, nil), stat.Mean(ses, nil)
}

func TestQuantileSEIndependent(t *testing.T) {
	const n = 2000
	normal := func(r *rand.Rand) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return x
	}
	for _, q := range []float64{0.5, 0.99} {
		// Theory for N(0,1): sqrt(q(1-q)/n) / phi(z_q).
		z := map[float64]float64{0.5: 0, 0.99: 2.3263}[q]
		want := math.Sqrt(q*(1-q)/n) / (math.Exp(-z*z/2) / math.Sqrt(2*math.Pi))
		sd, se := spreadOfQuantile(t, normal, q, 0, 300)
		for name, got := range map[string]float64{"empirical sd": sd, "mean QuantileSE": se} {
			if math.Abs(got-want)/want > 0.2 {
				t.Errorf("q %g: %s %.4f, theory %.4f (more than 20%% off)", q, name, got, want)
			}
		}
		// Batches on independent values: the inflation (at least 1, from
		// ten noisy batch shares) may add a little, never a lot, also for
		// a tail whose batches of 200 hold two values above it.
		if _, se := spreadOfQuantile(t, normal, q, 10, 300); se < 0.8*want || se > 1.4*want {
			t.Errorf("q %g with 10 batches: mean QuantileSE %.4f, theory %.4f", q, se, want)
		}
	}
}

func TestQuantileSEBatchesSeeDependence(t *testing.T) {
	// An AR(1) series with phi 0.95: neighbours move together, so the
	// median wanders far more than n independent values would allow.
	const n = 4000
	ar := func(r *rand.Rand) []float64 {
		x := make([]float64, n)
		for i := 1; i < n; i++ {
			x[i] = 0.95*x[i-1] + r.NormFloat64()
		}
		return x
	}
	sd, iid := spreadOfQuantile(t, ar, 0.5, 0, 200)
	_, batched := spreadOfQuantile(t, ar, 0.5, 10, 200)
	if iid > sd/2 {
		t.Fatalf("independent estimate %.3f should miss the dependence (empirical sd %.3f)", iid, sd)
	}
	if batched < 0.6*sd || batched > 1.5*sd {
		t.Errorf("batch-means SE %.3f, empirical sd of the median %.3f: want within 0.6x-1.5x", batched, sd)
	}
}

func TestQuantileSEEdges(t *testing.T) {
	if se, err := QuantileSE([]float64{3}, 0.5, 10); err != nil || se != 0 {
		t.Errorf("one value: se %v err %v, want 0 and no error", se, err)
	}
	if _, err := QuantileSE(nil, 0.5, 0); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: %v, want ErrEmpty", err)
	}
	if _, err := QuantileSE([]float64{1, math.NaN()}, 0.5, 0); !errors.Is(err, ErrNaN) {
		t.Errorf("NaN: %v, want ErrNaN", err)
	}
	for _, q := range []float64{0, 1, -1, math.NaN()} {
		if _, err := QuantileSE([]float64{1, 2}, q, 0); err == nil {
			t.Errorf("quantile %v accepted", q)
		}
	}
	x := []float64{5, 1, 4, 2, 3}
	if _, err := QuantileSE(x, 0.5, 3); err != nil || !slices.Equal(x, []float64{5, 1, 4, 2, 3}) {
		t.Errorf("input modified or error: %v %v", x, err)
	}
}

func TestMinDetectable(t *testing.T) {
	// z(0.975) + z(0.8) = 1.95996 + 0.84162.
	if got := MinDetectable(1, 0.05, 0.8); math.Abs(got-2.80158) > 1e-4 {
		t.Errorf("MinDetectable(1, 0.05, 0.8) = %v, want 2.8016", got)
	}
	if got := MinDetectable(2, 0.01, 0.8); math.Abs(got-2*(2.57583+0.84162)) > 1e-4 {
		t.Errorf("MinDetectable(2, 0.01, 0.8) = %v", got)
	}
	for _, c := range [][3]float64{{1, 0, 0.8}, {1, 0.05, 1}, {math.NaN(), 0.05, 0.8}} {
		if got := MinDetectable(c[0], c[1], c[2]); !math.IsNaN(got) {
			t.Errorf("MinDetectable%v = %v, want NaN", c, got)
		}
	}
}
