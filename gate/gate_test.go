package gate

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/stats"
)

// lognormal draws n values with the given median and log-sd.
func lognormal(r *rand.Rand, n int, median, sigma float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = median * math.Exp(sigma*r.NormFloat64())
	}
	return s
}

// synthCell is a cell with per-request latencies and per-window throughput,
// every latency scaled by slow and the throughput divided by it.
func synthCell(r *rand.Rand, name string, n int, slow float64) Cell {
	tput := lognormal(r, 12, 2400/slow, 0.03)
	return Cell{Name: name, Samples: map[string][]float64{
		"ttft":              lognormal(r, n, 150*slow, 0.5),
		"tpot":              lognormal(r, n, 18*slow, 0.12),
		"itl":               lognormal(r, n, 18*slow, 0.2),
		"e2el":              lognormal(r, n, 2500*slow, 0.3),
		"output_throughput": tput,
	}}
}

func row(t *testing.T, rep *Report, cell, metric string) Row {
	t.Helper()
	for _, r := range rep.Rows {
		if r.Cell == cell && r.Metric.Name == metric {
			return r
		}
	}
	t.Fatalf("no row %s/%s", cell, metric)
	return Row{}
}

func TestCompareVerdicts(t *testing.T) {
	tests := []struct {
		name  string
		slow  float64
		want  Verdict // for every testable default metric
		count func(*Report) int
	}{
		// 200 requests of a noisy lognormal: too few to rule out 5%.
		{"same config", 1, Inconclusive, func(r *Report) int { return r.Inconclusive }},
		{"27% slower", 1.27, Regression, func(r *Report) int { return r.Regressions }},
		{"25% faster", 0.75, Improvement, func(r *Report) int { return r.Improvements }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(42, 1))
			base := Run{ID: "b", Model: "m", Cells: []Cell{synthCell(r, "c1", 200, 1)}}
			next := Run{ID: "n", Model: "m", Cells: []Cell{synthCell(r, "c1", 200, tt.slow)}}
			rep, err := Compare(base, next, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rows) != 9 || rep.Tests != 9 || tt.count(rep) != 9 {
				t.Fatalf("rows %d, tests %d; verdicts %+v", len(rep.Rows), rep.Tests, rep)
			}
			for _, row := range rep.Rows {
				if row.Verdict != tt.want || row.AdjustedP < row.P {
					t.Errorf("%s: %s (effect %+.3f, p %.3g, adj %.3g), want %s", row.Metric.Name, row.Verdict, row.Effect, row.P, row.AdjustedP, tt.want)
				}
			}
			if rep.Regressed() != (tt.want == Regression) {
				t.Errorf("Regressed() = %v", rep.Regressed())
			}
		})
	}
}

// Throughput regresses when it goes down, latency when it goes up.
func TestCompareDirection(t *testing.T) {
	base := Run{Model: "m", Cells: []Cell{{Name: "c", Samples: map[string][]float64{
		"output_throughput": {1000, 1010, 990, 1005, 995, 1002, 998, 1001},
		"tpot":              {10, 10.1, 9.9, 10.05, 9.95, 10.2, 9.8, 10.02},
	}}}}
	next := Run{Model: "m", Cells: []Cell{{Name: "c", Samples: map[string][]float64{
		"output_throughput": {800, 810, 790, 805, 795, 802, 798, 801},
		"tpot":              {8, 8.1, 7.9, 8.05, 7.95, 8.2, 7.8, 8.02},
	}}}}
	cfg := DefaultConfig()
	cfg.Metrics = []Metric{mustMetric(t, "output_throughput"), mustMetric(t, "tpot_p50")}
	rep, err := Compare(base, next, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r := row(t, rep, "c", "output_throughput"); r.Verdict != Regression || math.Abs(r.Effect+0.2) > 0.01 || r.Test != "mann-whitney exact" {
		t.Errorf("throughput -20%%: %+v", r)
	}
	if r := row(t, rep, "c", "tpot_p50"); r.Verdict != Improvement {
		t.Errorf("tpot -20%%: %+v", r)
	}
}

func mustMetric(t *testing.T, name string) Metric {
	t.Helper()
	m, err := ParseMetric(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Significant but small: 2% slower over 5,000 requests is no regression at
// a 5% threshold, and is one at a 1% override.
func TestCompareThreshold(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	cfg := DefaultConfig()
	cfg.Metrics = []Metric{mustMetric(t, "tpot_p50")}
	base := Run{Model: "m", Cells: []Cell{{Name: "c", Samples: map[string][]float64{"tpot": lognormal(r, 5000, 18, 0.1)}}}}
	next := Run{Model: "m", Cells: []Cell{{Name: "c", Samples: map[string][]float64{"tpot": lognormal(r, 5000, 18*1.02, 0.1)}}}}
	rep, err := Compare(base, next, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Rows[0]; got.Verdict != NoChange || got.AdjustedP > 1e-3 {
		t.Errorf("2%% at 5%% threshold: %+v", got)
	}
	cfg.Thresholds = map[string]float64{"tpot_p50": 0.01}
	rep, err = Compare(base, next, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Rows[0]; got.Verdict != Regression || got.Threshold != 0.01 {
		t.Errorf("2%% at 1%% threshold: %+v", got)
	}
}

// Holm raises p-values by up to the family size; a raw p of 0.01 in a family
// of 18 survives only without the correction.
func TestCompareCorrection(t *testing.T) {
	base := Cell{Name: "c", Samples: map[string][]float64{"tpot": {10, 11, 12, 13, 14, 15, 16, 17, 18, 19}}}
	next := Cell{Name: "c", Samples: map[string][]float64{"tpot": {13.5, 14.5, 15.5, 16.5, 17.5, 18.5, 19.5, 20.5, 21.5, 22.5}}}
	p, err := stats.MannWhitneyU(base.Samples["tpot"], next.Samples["tpot"], stats.Auto)
	if err != nil {
		t.Fatal(err)
	}
	if !(p.P > 0.001 && p.P < 0.05) {
		t.Fatalf("fixture p = %v, want in (0.001, 0.05)", p.P)
	}
	// The same cell under 18 names: a family of 18 equal p-values.
	var bs, ns []Cell
	for i := range 18 {
		b, n := base, next
		b.Name = string(rune('a' + i))
		n.Name = b.Name
		bs, ns = append(bs, b), append(ns, n)
	}
	cfg := DefaultConfig()
	cfg.Metrics = []Metric{mustMetric(t, "tpot_p50")}
	for _, tc := range []struct {
		corr Correction
		want Verdict
		adj  float64
	}{{Holm, Inconclusive, math.Min(1, 18*p.P)}, {NoCorrection, Regression, p.P}} {
		cfg.Correction = tc.corr
		rep, err := Compare(Run{Model: "m", Cells: bs}, Run{Model: "m", Cells: ns}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Tests != 18 || rep.Correction != tc.corr {
			t.Fatalf("tests %d, correction %v", rep.Tests, rep.Correction)
		}
		for _, r := range rep.Rows {
			if r.Verdict != tc.want || math.Abs(r.AdjustedP-tc.adj) > 1e-12 {
				t.Errorf("%v: %s p %v adj %v, want %s adj %v", tc.corr, r.Verdict, r.P, r.AdjustedP, tc.want, tc.adj)
			}
		}
	}
}

// Only the slowest 5% of requests get twice as slow: the median does not
// move, the p99 permutation test flags it.
func TestCompareTail(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	b := lognormal(r, 1000, 150, 0.3)
	n := lognormal(r, 1000, 150, 0.3)
	cut := 150 * math.Exp(0.3*1.645)
	for i, v := range n {
		if v > cut {
			n[i] = 2 * v
		}
	}
	cfg := DefaultConfig()
	cfg.Metrics = []Metric{mustMetric(t, "ttft_p50"), mustMetric(t, "ttft_p99")}
	rep, err := Compare(Run{Model: "m", Cells: []Cell{{Name: "c", Samples: map[string][]float64{"ttft": b}}}},
		Run{Model: "m", Cells: []Cell{{Name: "c", Samples: map[string][]float64{"ttft": n}}}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := row(t, rep, "c", "ttft_p50"); got.Verdict != NoChange && got.Verdict != Inconclusive {
		t.Errorf("median: %+v", got)
	}
	if got := row(t, rep, "c", "ttft_p99"); got.Verdict != Regression || got.Test != "block permutation" || got.Effect < 0.5 {
		t.Errorf("p99: %+v", got)
	}
	// Reproducible, and independent of the order of metrics.
	cfg.Metrics = []Metric{cfg.Metrics[1], cfg.Metrics[0]}
	again, err := Compare(Run{Model: "m", Cells: []Cell{{Name: "c", Samples: map[string][]float64{"ttft": b}}}},
		Run{Model: "m", Cells: []Cell{{Name: "c", Samples: map[string][]float64{"ttft": n}}}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := row(t, rep, "c", "ttft_p99"), row(t, again, "c", "ttft_p99"); a.P != b.P {
		t.Errorf("p99 p-value %v then %v", a.P, b.P)
	}
}

func TestCompareUntestable(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	full := synthCell(r, "c", 200, 1)
	tests := []struct {
		name       string
		base, next Cell
		metric     string
		reason     string
		effect     float64 // NaN: none
	}{
		{"summary only in base", Cell{Name: "c", Summary: map[string]float64{"tpot_p50": 20}}, full, "tpot_p50",
			"summary only: no per-request samples in base, no test possible", trialMedian(full.Samples["tpot"])/20 - 1},
		{"summary on both", Cell{Name: "c", Summary: map[string]float64{"ttft_p99": 100}}, Cell{Name: "c", Summary: map[string]float64{"ttft_p99": 120}}, "ttft_p99",
			"summary only: no per-request samples in base and new, no test possible", 0.2},
		{"no data at all", Cell{Name: "c"}, Cell{Name: "c"}, "itl_p50", "no itl data in base and new", math.NaN()},
		{"no data in new", full, Cell{Name: "c"}, "itl_p50", "no itl data in new", math.NaN()},
		{"too few", Cell{Name: "c", Samples: map[string][]float64{"tpot": {1, 2}}}, Cell{Name: "c", Samples: map[string][]float64{"tpot": {3, 4}}}, "tpot_p50",
			"too few samples (2 and 2): the smallest possible p is 0.333", 3.5/1.5 - 1},
		{"NaN sample", Cell{Name: "c", Samples: map[string][]float64{"tpot": {1, math.NaN(), 3}}}, full, "tpot_p50", "base tpot samples: value 1 is NaN", math.NaN()},
		{"base zero", Cell{Name: "c", Samples: map[string][]float64{"tpot": make([]float64, 50)}}, full, "tpot_p50", "base value is 0: no relative effect", math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Metrics = []Metric{mustMetric(t, tt.metric)}
			rep, err := Compare(Run{Model: "m", Cells: []Cell{tt.base}}, Run{Model: "m", Cells: []Cell{tt.next}}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := rep.Rows[0]
			if got.Verdict != Untestable || got.Reason != tt.reason || !math.IsNaN(got.P) || rep.Untestable != 1 || rep.Tests != 0 {
				t.Errorf("got %s %q (p %v), want untestable %q", got.Verdict, got.Reason, got.P, tt.reason)
			}
			if math.IsNaN(tt.effect) != math.IsNaN(got.Effect) || (!math.IsNaN(got.Effect) && math.Abs(got.Effect-tt.effect) > 1e-12) {
				t.Errorf("effect %v, want %v", got.Effect, tt.effect)
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Errorf("JSON: %v", err)
			}
		})
	}
}

func trialMedian(s []float64) float64 {
	c := sorted(s)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

func TestCompareIncomparable(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	a, b := synthCell(r, "short", 50, 1), synthCell(r, "long", 50, 1)
	tests := []struct {
		name       string
		base, next Run
		what, msg  string
	}{
		{"models", Run{ID: "1", Model: "llama", Cells: []Cell{a}}, Run{ID: "2", Model: "qwen", Cells: []Cell{a}},
			"model", `runs differ in model: base "llama", new "qwen"`},
		{"matrices", Run{ID: "1", Model: "m", Matrix: "smoke", Cells: []Cell{a}}, Run{ID: "2", Model: "m", Matrix: "nightly", Cells: []Cell{a}},
			"matrix", `runs differ in matrix: base "smoke", new "nightly"`},
		{"disjoint cells", Run{ID: "1", Model: "m", Cells: []Cell{a}}, Run{ID: "2", Model: "m", Cells: []Cell{b}},
			"cells", "runs 1 and 2 share no cell: base has short, new has long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compare(tt.base, tt.next, DefaultConfig())
			var ie *IncomparableError
			if !errors.As(err, &ie) || !errors.Is(err, ErrIncomparable) || ie.What != tt.what || err.Error() != tt.msg {
				t.Errorf("err = %v, want %s: %s", err, tt.what, tt.msg)
			}
		})
	}
	// Partial overlap: the common cell is compared, the others listed.
	c := synthCell(r, "mix", 50, 1)
	rep, err := Compare(Run{ID: "1", Model: "m", Cells: []Cell{a, c}}, Run{ID: "2", Model: "m", Cells: []Cell{c, b}}, DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := []SkippedCell{{"short", "only in base 1"}, {"long", "only in new 2"}}
	if len(rep.Skipped) != 2 || rep.Skipped[0] != want[0] || rep.Skipped[1] != want[1] || rep.Rows[0].Cell != "mix" {
		t.Errorf("skipped %+v, want %+v", rep.Skipped, want)
	}
	// A cell listed twice is an error, not a silent overwrite.
	if _, err := Compare(Run{Model: "m", Cells: []Cell{a, a}}, Run{Model: "m", Cells: []Cell{a}}, DefaultConfig()); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Errorf("duplicate cell: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Config)
		want error
	}{
		{"alpha 0", func(c *Config) { c.Alpha = 0 }, ErrConfig},
		{"alpha 1", func(c *Config) { c.Alpha = 1 }, ErrConfig},
		{"negative threshold", func(c *Config) { c.Threshold = -0.1 }, ErrConfig},
		{"NaN threshold", func(c *Config) { c.Threshold = math.NaN() }, ErrConfig},
		{"no metrics", func(c *Config) { c.Metrics = nil }, ErrConfig},
		{"duplicate metric", func(c *Config) { c.Metrics = append(c.Metrics, c.Metrics[0]) }, ErrConfig},
		{"bad quantile", func(c *Config) { c.Metrics = []Metric{{Name: "x", Series: "tpot", Quantile: 1}} }, ErrConfig},
		{"override unknown metric", func(c *Config) { c.Thresholds = map[string]float64{"tpot_p95": 0.1} }, ErrUnknownMetric},
		{"negative override", func(c *Config) { c.Thresholds = map[string]float64{"tpot_p50": -1} }, ErrConfig},
		{"unknown U method", func(c *Config) { c.Method = stats.Method(9) }, ErrConfig},
		{"no permutations", func(c *Config) { c.Permutations.Max = 0 }, ErrConfig},
	}
	r := rand.New(rand.NewPCG(1, 1))
	run := Run{Model: "m", Cells: []Cell{synthCell(r, "c", 20, 1)}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.mod(&cfg)
			if _, err := Compare(run, run, cfg); !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// Requests of one run are not independent: here every stretch of 40
// requests shares a factor (how a closed loop's batches fell), drawn anew
// per run. Two runs of one process then differ "significantly" for the U
// test alone in most pairs; guarded by the block permutation of the
// median they rarely do, and a real 20% slowdown is still a regression.
func TestCompareSerialDependence(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 5))
	run := func(slow float64) Run {
		s := make([]float64, 800)
		f := 1.0
		for i := range s {
			if i%40 == 0 {
				f = math.Exp(0.1 * r.NormFloat64())
			}
			s[i] = slow * f * 150 * math.Exp(0.2*r.NormFloat64())
		}
		return Run{Model: "m", Cells: []Cell{{Name: "c", Samples: map[string][]float64{"ttft": s}}}}
	}
	guarded := DefaultConfig()
	guarded.Metrics, guarded.Threshold = []Metric{mustMetric(t, "ttft_p50")}, 0.02
	plain := guarded
	plain.Permutations.Blocks = 0
	const pairs = 30
	flagged := map[string]int{}
	for range pairs {
		a, b := run(1), run(1)
		for name, cfg := range map[string]Config{"plain": plain, "guarded": guarded} {
			rep, err := Compare(a, b, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Regressions+rep.Improvements > 0 {
				flagged[name]++
			}
		}
	}
	t.Logf("same process, %d pairs flagged: U alone %d, guarded %d", pairs, flagged["plain"], flagged["guarded"])
	if flagged["guarded"] > 3 || flagged["plain"] < 3*max(1, flagged["guarded"]) {
		t.Errorf("same process, %d pairs flagged: U alone %d, guarded %d; want guarded <= 3 and far fewer", pairs, flagged["plain"], flagged["guarded"])
	}
	rep, err := Compare(run(1), run(1.2), guarded)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Rows[0]; got.Verdict != Regression || got.Test != "mann-whitney asymptotic + block permutation" {
		t.Errorf("20%% slower: %+v", got)
	}
}

// The minimum detectable effect follows the runs' own spread: the same
// distribution on both sides is "no change" with many quiet samples and
// "inconclusive" with few noisy ones, the MDE near its theory
// ((z(1-alpha/2) + z(0.8)) * sqrt(2) * 1.2533 sigma / sqrt(n) for the median
// of a lognormal), and a large regression is found whatever the MDE.
func TestCompareInconclusive(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Metrics = []Metric{mustMetric(t, "tpot_p50")}
	cfg.Permutations.Blocks = 0 // independent values: the theory's case
	for _, tc := range []struct {
		name  string
		n     int
		sigma float64
		slow  float64
		want  Verdict
	}{
		{"quiet", 20000, 0.1, 1, NoChange},
		{"noisy", 150, 0.5, 1, Inconclusive},
		{"noisy but large", 150, 0.5, 2, Regression},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(9, uint64(tc.n)))
			cell := func(slow float64) []Cell {
				return []Cell{{Name: "c", Samples: map[string][]float64{"tpot": lognormal(r, tc.n, 18*slow, tc.sigma)}}}
			}
			rep, err := Compare(Run{Model: "m", Cells: cell(1)}, Run{Model: "m", Cells: cell(tc.slow)}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := rep.Rows[0]
			if got.Verdict != tc.want {
				t.Fatalf("verdict %s (MDE %.3f, effect %+.3f, p %.3g), want %s", got.Verdict, got.MDE, got.Effect, got.AdjustedP, tc.want)
			}
			theory := (1.95996 + 0.84162) * math.Sqrt2 * 1.2533 * tc.sigma / math.Sqrt(float64(tc.n))
			if tc.slow == 1 && math.Abs(got.MDE-theory)/theory > 0.3 {
				t.Errorf("MDE %.4f, theory %.4f", got.MDE, theory)
			}
			if (got.Verdict == Inconclusive) != (got.Reason != "") || rep.Undecided() != (tc.want == Inconclusive) {
				t.Errorf("reason %q, undecided %v", got.Reason, rep.Undecided())
			}
		})
	}
}
