package stats

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

func TestBlocks(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7}
	for _, tc := range []struct {
		n    int
		want []int
	}{{1, []int{7}}, {3, []int{2, 2, 3}}, {7, []int{1, 1, 1, 1, 1, 1, 1}}, {10, []int{1, 1, 1, 1, 1, 1, 1}}} {
		b := blocks(s, tc.n)
		var got []int
		total := 0.0
		for _, x := range b {
			got = append(got, len(x))
			for _, v := range x {
				total += v
			}
		}
		if !slices.Equal(got, tc.want) || total != 28 {
			t.Errorf("blocks(7 values, %d): sizes %v sum %v, want %v sum 28", tc.n, got, total, tc.want)
		}
	}
}

// Time-clustered noise: each run has a few stalls that slow consecutive
// values, of random number, place and strength. Both runs come from the same
// process, so a valid test must rarely reject; permuting single values
// treats the bursts as a shifted tail and rejects, whole blocks do not.
// A real 50% shift of every value is still found by blocks.
func TestBlockPermutationClusteredNoise(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p99 := func(s []float64) float64 { return s[int(0.99*float64(len(s)-1))] }
	run := func(scale float64) []float64 {
		s := make([]float64, 300)
		for i := range s {
			s[i] = scale * math.Exp(0.2*r.NormFloat64())
		}
		// 0-3 stalls, each slowing 5-15 consecutive values by 1-4x.
		for range r.IntN(4) {
			at, n, f := r.IntN(285), 5+r.IntN(11), 1+3*r.Float64()
			for i := at; i < at+n; i++ {
				s[i] *= f
			}
		}
		return s
	}
	single := PermutationConfig{Max: 999, Stop: 50}
	block := PermutationConfig{Max: 999, Stop: 50, Blocks: 10}
	const trials = 60
	rejSingle, rejBlock := 0, 0
	for range trials {
		x, y := run(1), run(1)
		a, err := PermutationTest(x, y, p99, single, r)
		if err != nil {
			t.Fatal(err)
		}
		b, err := PermutationTest(x, y, p99, block, r)
		if err != nil {
			t.Fatal(err)
		}
		if a.P <= 0.05 {
			rejSingle++
		}
		if b.P <= 0.05 {
			rejBlock++
		}
	}
	t.Logf("same process, %d pairs: single values rejected %d, blocks %d", trials, rejSingle, rejBlock)
	if rejBlock > trials/10 || rejSingle <= 2*rejBlock {
		t.Errorf("same process, %d pairs: single values rejected %d, blocks %d; want blocks near 5%% and far below single values", trials, rejSingle, rejBlock)
	}
	res, err := PermutationTest(run(1), run(1.5), func(s []float64) float64 { return s[len(s)/2] }, block, r)
	if err != nil {
		t.Fatal(err)
	}
	if res.P > 0.01 || res.Observed <= 0 {
		t.Errorf("50%% slower with blocks: %+v", res)
	}
}

// QuantilePermutationTest is PermutationTest of SortedQuantile to the last
// bit: same draws, same hits, same p, over quantiles at both ends and the
// middle, unequal sizes, ties, single values and blocks.
func TestQuantilePermutationTestMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	sample := func(n int, scale float64, ties bool) []float64 {
		s := make([]float64, n)
		for i := range s {
			s[i] = scale * math.Exp(0.4*r.NormFloat64())
			if ties {
				s[i] = math.Round(s[i] * 4)
			}
		}
		return s
	}
	for _, q := range []float64{0, 0.01, 0.25, 0.5, 0.5001, 0.9, 0.95, 0.99, 0.999, 1} {
		for _, cfg := range []PermutationConfig{{Max: 300, Stop: 1 << 30}, {Max: 300, Stop: 30}, {Max: 300, Stop: 1 << 30, Blocks: 7}} {
			for _, sizes := range [][2]int{{1, 1}, {2, 9}, {40, 33}, {120, 150}} {
				for _, ties := range []bool{false, true} {
					x, y := sample(sizes[0], 1, ties), sample(sizes[1], 1.1, ties)
					seed := r.Uint64()
					want, err := PermutationTest(x, y, func(s []float64) float64 { return SortedQuantile(s, q) }, cfg, rand.New(rand.NewPCG(seed, 1)))
					if err != nil {
						t.Fatal(err)
					}
					got, err := QuantilePermutationTest(x, y, q, cfg, rand.New(rand.NewPCG(seed, 1)))
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Errorf("q %v, %+v, sizes %v, ties %v: got %+v, want %+v", q, cfg, sizes, ties, got, want)
					}
				}
			}
		}
	}
	if _, err := QuantilePermutationTest(nil, []float64{1}, 0.5, DefaultPermutationConfig(), r); err == nil {
		t.Error("empty sample accepted")
	}
}

// Draw by draw, the quantile split reads the same difference as building
// both groups and taking their quantiles, for any grouping of the units.
func TestQuantileSplitMatchesGroups(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, q := range []float64{0, 0.1, 0.5, 0.75, 0.99, 1} {
		for _, units := range []int{2, 5, 40} {
			var pooled []tagged
			for u := range units {
				for range 1 + r.IntN(6) {
					pooled = append(pooled, tagged{math.Round(10 * r.ExpFloat64()), u})
				}
			}
			slices.SortFunc(pooled, func(a, b tagged) int { return cmp.Compare(a.v, b.v) })
			quant := func(s []float64) float64 { return SortedQuantile(s, q) }
			want := materialize(quant, len(pooled))
			ways := map[string]split{"auto": quantileSplit(q, byAuto), "scan": quantileSplit(q, byScan), "count": quantileSplit(q, byCount)}
			for range 200 {
				d := draw{pooled: pooled, mark: make([]bool, units), markX: r.IntN(2) == 0}
				d.mark[0], d.mark[1] = true, false // both groups non-empty
				for u := 2; u < units; u++ {
					d.mark[u] = r.IntN(2) == 0
				}
				for u, m := range d.mark {
					if m {
						d.marked = append(d.marked, u)
					}
				}
				for _, p := range pooled {
					if d.inX(p) {
						d.nx++
					}
				}
				d.ny = len(pooled) - d.nx
				w := want(&d)
				for name, got := range ways {
					if g := got(&d); g != w {
						t.Fatalf("q %v, %d units, marked %v (x marked %v), by %s: split %v, groups give %v", q, units, d.marked, d.markX, name, g, w)
					}
				}
			}
		}
	}
}

func TestSortedQuantile(t *testing.T) {
	s := []float64{1, 2, 4, 8}
	for _, tc := range []struct{ q, want float64 }{
		{0, 1}, {1, 8}, {0.5, 3}, {1.0 / 3, 2}, {0.9, 6.8}, {-1, 1}, {2, 8}, {math.NaN(), 1},
	} {
		if got := SortedQuantile(s, tc.q); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("SortedQuantile(%v, %v) = %v, want %v", s, tc.q, got, tc.want)
		}
	}
	if got := SortedQuantile(nil, 0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

// BenchmarkQuantilePermutation is the gate's tail test: p99 of 300
// requests a side in 10 blocks, a real shift (every draw of Max is taken).
func BenchmarkQuantilePermutation(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x, y := make([]float64, 300), make([]float64, 300)
	for i := range x {
		x[i], y[i] = math.Exp(0.5*r.NormFloat64()), 1.3*math.Exp(0.5*r.NormFloat64())
	}
	cfg := DefaultPermutationConfig()
	cfg.Blocks = 10
	for _, q := range []float64{0.5, 0.99} {
		b.Run(fmt.Sprintf("generic/q%v", q), func(b *testing.B) {
			for b.Loop() {
				if _, err := PermutationTest(x, y, func(s []float64) float64 { return SortedQuantile(s, q) }, cfg, rand.New(rand.NewPCG(1, 1))); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("quantile/q%v", q), func(b *testing.B) {
			for b.Loop() {
				if _, err := QuantilePermutationTest(x, y, q, cfg, rand.New(rand.NewPCG(1, 1))); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
