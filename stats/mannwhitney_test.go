package stats

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// relTol is the agreement required with scipy's values.
const relTol = 1e-9

func closeRel(got, want, tol float64) bool {
	if got == want {
		return true
	}
	return math.Abs(got-want) <= tol*math.Max(math.Abs(want), math.SmallestNonzeroFloat64)
}

func TestMannWhitneyUScipy(t *testing.T) {
	raw, err := os.ReadFile("testdata/mannwhitneyu.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Scipy string
		Cases []struct {
			Name   string
			X, Y   []float64
			Method string
			U, P   float64
		}
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Cases) < 40 {
		t.Fatalf("only %d fixture cases", len(fx.Cases))
	}
	methods := map[string]Method{"auto": Auto, "exact": Exact, "asymptotic": Asymptotic}
	for _, c := range fx.Cases {
		t.Run(c.Name, func(t *testing.T) {
			m, ok := methods[c.Method]
			if !ok {
				t.Fatalf("method %q", c.Method)
			}
			x, y := slices.Clone(c.X), slices.Clone(c.Y)
			res, err := MannWhitneyU(x, y, m)
			if err != nil {
				t.Fatal(err)
			}
			if !closeRel(res.U, c.U, relTol) || !closeRel(res.P, c.P, relTol) {
				t.Errorf("U = %.17g, p = %.17g; scipy %s: U = %.17g, p = %.17g", res.U, res.P, fx.Scipy, c.U, c.P)
			}
			if m != Auto && res.Method != m {
				t.Errorf("method used %v, asked %v", res.Method, m)
			}
			if !slices.Equal(x, c.X) || !slices.Equal(y, c.Y) {
				t.Error("inputs modified")
			}
		})
	}
}

func TestMannWhitneyUAutoChoice(t *testing.T) {
	nine := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	tests := []struct {
		name string
		x, y []float64
		want Method
	}{
		{"both small", []float64{1, 2}, []float64{3, 4}, Exact},
		{"one of 8", nine[:8], []float64{11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22}, Exact},
		{"both 9", nine, []float64{11, 12, 13, 14, 15, 16, 17, 18, 19}, Asymptotic},
		{"small with ties", []float64{1, 2}, []float64{2, 3}, Asymptotic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := MannWhitneyU(tt.x, tt.y, Auto)
			if err != nil {
				t.Fatal(err)
			}
			if res.Method != tt.want {
				t.Errorf("auto chose %v, want %v", res.Method, tt.want)
			}
		})
	}
}

func TestMannWhitneyUErrors(t *testing.T) {
	tests := []struct {
		name string
		x, y []float64
		m    Method
		want error
	}{
		{"empty x", nil, []float64{1}, Auto, ErrEmpty},
		{"empty y", []float64{1}, []float64{}, Exact, ErrEmpty},
		{"NaN", []float64{1, math.NaN()}, []float64{2}, Asymptotic, ErrNaN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := MannWhitneyU(tt.x, tt.y, tt.m); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := MannWhitneyU([]float64{1}, []float64{2}, Method(7)); err == nil {
		t.Error("unknown method accepted")
	}
}

// uCountsBig is the textbook recurrence in exact integers: f(i, j, k) =
// f(i-1, j, k-j) + f(i, j-1, k), the number of orderings of i x's and j y's
// with k pairs x > y.
func uCountsBig(m, n int) []*big.Int {
	f := make([][][]*big.Int, m+1)
	for i := range f {
		f[i] = make([][]*big.Int, n+1)
		for j := range f[i] {
			f[i][j] = make([]*big.Int, i*j+1)
			for k := range f[i][j] {
				v := new(big.Int)
				switch {
				case k == 0:
					v.SetInt64(1)
				default:
					if j > 0 && k <= i*(j-1) {
						v.Add(v, f[i][j-1][k])
					}
					if i > 0 && k-j >= 0 && k-j <= (i-1)*j {
						v.Add(v, f[i-1][j][k-j])
					}
				}
				f[i][j][k] = v
			}
		}
	}
	return f[m][n]
}

// The fast Gaussian-binomial recursion with scaling agrees with exact
// integer counts at every k, both tails, to 1e-12 relative.
func TestUCDFMatchesExactCounts(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {1, 7}, {3, 3}, {5, 2}, {8, 13}, {17, 12}, {25, 25}} {
		m, n := sz[0], sz[1]
		counts := uCountsBig(m, n)
		total := new(big.Int)
		for _, c := range counts {
			total.Add(total, c)
		}
		cum := new(big.Int)
		for k := 0; k <= m*n; k++ {
			cum.Add(cum, counts[k])
			want, _ := new(big.Rat).SetFrac(cum, total).Float64()
			if got := uCDF(m, n, k); !closeRel(got, want, 1e-12) {
				t.Errorf("%dx%d: P(U <= %d) = %.17g, exact %.17g", m, n, k, got, want)
			}
			if got := uCDF(n, m, k); !closeRel(got, want, 1e-12) {
				t.Errorf("%dx%d (swapped): P(U <= %d) = %.17g, exact %.17g", n, m, k, got, want)
			}
		}
	}
}

// Exact on sizes whose counts overflow float64 (m+n > 1029) still gives a
// probability, close to the normal approximation there.
func TestMannWhitneyUExactLarge(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	x, y := make([]float64, 40), make([]float64, 1200)
	for i := range x {
		x[i] = r.NormFloat64() + 0.4
	}
	for i := range y {
		y[i] = r.NormFloat64()
	}
	ex, err := MannWhitneyU(x, y, Exact)
	if err != nil {
		t.Fatal(err)
	}
	as, err := MannWhitneyU(x, y, Asymptotic)
	if err != nil {
		t.Fatal(err)
	}
	if math.IsNaN(ex.P) || ex.P <= 0 || ex.P >= 1 || math.Abs(ex.P-as.P) > 0.1*as.P {
		t.Errorf("exact p = %g, asymptotic %g", ex.P, as.P)
	}
}

// FuzzMannWhitneyU: U in [0, n1 n2], p in [0, 1], and swapping the samples
// turns U into n1 n2 - U and keeps p, for every method.
func FuzzMannWhitneyU(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6}, uint8(3), uint8(0))
	f.Add([]byte{9, 9, 9, 1, 9, 9}, uint8(2), uint8(1))
	f.Add([]byte{0, 255, 7, 7, 100, 3, 3, 3, 200, 1, 50}, uint8(5), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, split uint8, method uint8) {
		if len(data) < 2 || len(data) > 400 {
			return
		}
		k := 1 + int(split)%(len(data)-1)
		toF := func(b []byte) []float64 {
			out := make([]float64, len(b))
			for i, v := range b {
				out[i] = float64(v) / 7 // few distinct values: plenty of ties
			}
			return out
		}
		x, y := toF(data[:k]), toF(data[k:])
		m := Method(method % 3)
		a, err := MannWhitneyU(x, y, m)
		if err != nil {
			t.Fatal(err)
		}
		b, err := MannWhitneyU(y, x, m)
		if err != nil {
			t.Fatal(err)
		}
		nn := float64(len(x) * len(y))
		if !(a.U >= 0 && a.U <= nn) || !(a.P >= 0 && a.P <= 1) {
			t.Fatalf("U = %v (n1 n2 = %v), p = %v", a.U, nn, a.P)
		}
		if math.Abs(a.U+b.U-nn) > 1e-9*nn || !closeRel(a.P, b.P, 1e-9) || a.Method != b.Method {
			t.Fatalf("swap: U %v + %v != %v or p %v != %v", a.U, b.U, nn, a.P, b.P)
		}
	})
}
