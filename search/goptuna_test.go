package search

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/c-bata/goptuna"
	"github.com/c-bata/goptuna/tpe"
)

// Each test below pins one goptuna v0.9.0 defect next to the workaround in
// this package: the "goptuna" subtests assert the defect (if one fails,
// goptuna fixed it and the workaround may go), the "ours" subtests assert
// the fix.

func newStudy(t *testing.T, s goptuna.Sampler) *goptuna.Study {
	t.Helper()
	st, err := goptuna.CreateStudy("t",
		goptuna.StudyOptionStorage(goptuna.NewInMemoryStorage()),
		goptuna.StudyOptionSampler(s),
		goptuna.StudyOptionLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// suggestN runs n trials of f, telling each the value v(x).
func suggestN(t *testing.T, st *goptuna.Study, n int, f func(goptuna.Trial) (float64, error)) []float64 {
	t.Helper()
	var xs []float64
	err := st.Optimize(func(tr goptuna.Trial) (float64, error) {
		x, err := f(tr)
		xs = append(xs, x)
		return x, err
	}, n)
	if err != nil {
		t.Fatal(err)
	}
	return xs
}

func suggestInt(tr goptuna.Trial) (float64, error) {
	v, err := tr.SuggestInt("x", 1, 3)
	return float64(v), err
}

func TestIntUpperBound(t *testing.T) {
	count3 := func(xs []float64) int {
		n := 0
		for _, x := range xs {
			if x == 3 {
				n++
			}
		}
		return n
	}
	t.Run("goptuna never returns the upper bound", func(t *testing.T) {
		xs := suggestN(t, newStudy(t, goptuna.NewRandomSampler(goptuna.RandomSamplerOptionSeed(1))), 300, suggestInt)
		if n := count3(xs); n != 0 {
			t.Fatalf("goptuna RandomSampler returned 3 %d times: defect fixed upstream?", n)
		}
	})
	t.Run("ours", func(t *testing.T) {
		xs := suggestN(t, newStudy(t, newRandomSampler(rand.New(rand.NewPCG(1, 2)))), 300, suggestInt)
		if n := count3(xs); n < 70 || n > 130 {
			t.Fatalf("SuggestInt(1, 3) gave 3 in %d of 300 draws, want about 100", n)
		}
		for _, x := range xs {
			if x < 1 || x > 3 {
				t.Fatalf("draw %v outside [1, 3]", x)
			}
		}
	})
	t.Run("ours tpe", func(t *testing.T) {
		// Maximising x, TPE must settle on the upper bound.
		st := newStudy(t, nil)
		st.Storage.SetStudyDirection(st.ID, goptuna.StudyDirectionMaximize)
		st, _ = goptuna.LoadStudy("t", goptuna.StudyOptionStorage(st.Storage), goptuna.StudyOptionLogger(nil))
		r := rand.New(rand.NewPCG(1, 2))
		var xs []float64
		for range 60 {
			st.Sampler = newTPESampler(r, 5, 24)
			xs = append(xs, suggestN(t, st, 1, suggestInt)...)
		}
		if n := count3(xs[30:]); n < 20 {
			t.Fatalf("maximising, TPE chose the upper bound %d of the last 30 times: %v", n, xs)
		}
	})
}

func suggestCat(tr goptuna.Trial) (float64, error) {
	c, err := tr.SuggestCategorical("c", []string{"a", "b", "c", "d"})
	return float64(c[0] - 'a'), err
}

func TestCategoricalReproducible(t *testing.T) {
	t.Run("goptuna uses the global source", func(t *testing.T) {
		a := suggestN(t, newStudy(t, goptuna.NewRandomSampler(goptuna.RandomSamplerOptionSeed(1))), 40, suggestCat)
		b := suggestN(t, newStudy(t, goptuna.NewRandomSampler(goptuna.RandomSamplerOptionSeed(1))), 40, suggestCat)
		if fmt.Sprint(a) == fmt.Sprint(b) {
			t.Fatal("goptuna categorical draws reproduced with one seed: defect fixed upstream?")
		}
	})
	t.Run("ours", func(t *testing.T) {
		a := suggestN(t, newStudy(t, newRandomSampler(rand.New(rand.NewPCG(1, 2)))), 40, suggestCat)
		b := suggestN(t, newStudy(t, newRandomSampler(rand.New(rand.NewPCG(1, 2)))), 40, suggestCat)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("seeded categorical draws differ:\n%v\n%v", a, b)
		}
		seen := map[float64]bool{}
		for _, x := range a {
			seen[x] = true
		}
		if len(seen) != 4 {
			t.Fatalf("40 draws hit %d of 4 choices", len(seen))
		}
	})
}

// goptuna's TPE picks the Parzen mixture component with the global source
// (internal/random.ArgMaxMultinomial), so even numeric suggestions after the
// startup trials are not reproducible.
func TestTPEReproducible(t *testing.T) {
	quad := func(tr goptuna.Trial) (float64, error) {
		x, err := tr.SuggestFloat("x", -5, 5)
		return (x - 1) * (x - 1), err
	}
	t.Run("goptuna tpe", func(t *testing.T) {
		mk := func() []float64 {
			return suggestN(t, newStudy(t, tpe.NewSampler(tpe.SamplerOptionSeed(1), tpe.SamplerOptionNumberOfStartupTrials(5))), 40, quad)
		}
		if fmt.Sprint(mk()) == fmt.Sprint(mk()) {
			t.Fatal("goptuna TPE reproduced with one seed: defect fixed upstream?")
		}
	})
	t.Run("ours", func(t *testing.T) {
		mk := func() []float64 {
			// One sampler per study snapshot (it caches the observations),
			// as Proposer uses it: rebuild per trial.
			st := newStudy(t, nil)
			r := rand.New(rand.NewPCG(1, 2))
			var xs []float64
			for range 40 {
				st.Sampler = newTPESampler(r, 5, 24)
				xs = append(xs, suggestN(t, st, 1, quad)...)
			}
			return xs
		}
		a, b := mk(), mk()
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("seeded TPE differs:\n%v\n%v", a, b)
		}
		// And it optimises: the last draws concentrate near x=1.
		near := 0
		for _, x := range a[20:] {
			if x > 0 && x < 2 {
				near++
			}
		}
		if near < 10 {
			t.Fatalf("only %d of the last 20 TPE draws in (0, 2): %v", near, a[20:])
		}
	})
}
