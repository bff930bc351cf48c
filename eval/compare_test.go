package eval

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func pick(v float64) *float64 { return &v }

// seeds builds per-seed figures: HV@8 and HV@24 of seed i+1 from hv8[i],
// hv24[i]; picks from pk (NaN: no pick).
func seeds(hv8, hv24, pk []float64) []SeedFigures {
	var out []SeedFigures
	for i := range hv8 {
		f := SeedFigures{Seed: uint64(i + 1), HV: map[string]float64{"8": hv8[i], "24": hv24[i]}}
		if !math.IsNaN(pk[i]) {
			f.Pick = pick(pk[i])
		}
		out = append(out, f)
	}
	return out
}

func compareReports() (base, cur *Report) {
	set := Settings{Seeds: 3, Trials: 24, Checkpoints: []int{8, 24}}
	nan := math.NaN()
	base = &Report{Settings: set, Summaries: []Summary{
		{Scenario: "a", Strategy: "tuner", Seeds: seeds([]float64{0.5, 0.6, 0.7}, []float64{0.8, 0.9, 0.7}, []float64{0.97, 0.98, nan})},
		{Scenario: "b", Strategy: "tuner", Seeds: seeds([]float64{0.4, 0.4, 0.4}, []float64{0.9, 0.9, 0.9}, []float64{0.99, 0.99, 0.99})},
		{Scenario: "only-in-base", Strategy: "tuner", Seeds: seeds([]float64{0, 0}, []float64{0, 0}, []float64{0, 0})},
	}}
	cur = &Report{Settings: Settings{Seeds: 4, Trials: 48, Checkpoints: []int{8, 24, 48}}, Summaries: []Summary{
		// Seed 4 has no partner in base and is left out.
		{Scenario: "a", Strategy: "tuner", Seeds: seeds([]float64{0.6, 0.6, 0.9, 0.1}, []float64{0.8, 0.9, 0.7, 0.1}, []float64{0.98, 0.98, 0.99, 0})},
		{Scenario: "b", Strategy: "tuner", Seeds: seeds([]float64{0.5, 0.3, 0.4}, []float64{0.9, 0.9, 0.9}, []float64{0.99, 0.99, 0.99})},
		{Scenario: "b", Strategy: "par4", Seeds: seeds([]float64{1, 1}, []float64{1, 1}, []float64{1, 1})},
	}}
	return base, cur
}

func TestCompare(t *testing.T) {
	base, cur := compareReports()
	rows, err := Compare(base, cur)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		n            int
		mean         float64
		wins, losses int
	}
	// HV@48 is in one report only; par4 and only-in-base have no partner.
	wants := map[[2]string]want{
		{"a", "HV@8"}:  {3, (0.1 + 0 + 0.2) / 3, 2, 0},
		{"a", "HV@24"}: {3, 0, 0, 0},
		{"a", "pick"}:  {2, 0.005, 1, 0}, // seed 3 picked nothing in base
		{"b", "HV@8"}:  {3, 0, 1, 1},
		{"b", "HV@24"}: {3, 0, 0, 0},
		{"b", "pick"}:  {3, 0, 0, 0},
		{"", "HV@8"}:   {6, 0.3 / 6, 3, 1},
		{"", "HV@24"}:  {6, 0, 0, 0},
		{"", "pick"}:   {5, 0.002, 1, 0},
	}
	if len(rows) != len(wants) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(wants), rows)
	}
	for _, r := range rows {
		w, ok := wants[[2]string{r.Scenario, r.Figure}]
		if !ok || r.Strategy != "tuner" {
			t.Errorf("unexpected row %+v", r)
			continue
		}
		if r.N != w.n || math.Abs(r.Mean-w.mean) > 1e-12 || r.Wins != w.wins || r.Losses != w.losses {
			t.Errorf("%s %s: got n %d mean %v wins %d losses %d, want %+v", r.Scenario, r.Figure, r.N, r.Mean, r.Wins, r.Losses, w)
		}
	}
	if r := rows[0]; r.Scenario != "a" || r.Figure != "HV@8" || r.BaseMedian != 0.6 || r.NewMedian != 0.6 {
		t.Errorf("first row %+v: want scenario a's HV@8, medians 0.6 and 0.6", r)
	}
	md := CompareMarkdown(rows)
	for _, s := range []string{"| tuner | HV@8 | **all** | 6 |", "| tuner | HV@8 | a | 3 | 0.600 | 0.600 | +0.1000 ± 0.0577 |", "| tuner | pick | b | 3 |"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	if strings.Index(md, "| HV@8 | **all**") > strings.Index(md, "| HV@8 | a |") {
		t.Errorf("the row over all scenarios comes after a scenario's:\n%s", md)
	}
}

func TestCompareRejects(t *testing.T) {
	base, cur := compareReports()
	old := *base
	old.Summaries = []Summary{{Scenario: "a", Strategy: "tuner"}} // a report from before per-seed figures
	other := *cur
	other.Summaries = []Summary{{Scenario: "z", Strategy: "tuner", Seeds: cur.Summaries[0].Seeds}}
	for name, tc := range map[string]struct {
		base, cur *Report
		msg       string
	}{
		"no per-seed figures": {&old, cur, "no per-seed figures"},
		"nothing shared":      {base, &other, "share no scenario"},
	} {
		if _, err := Compare(tc.base, tc.cur); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrConfig with %q", name, err, tc.msg)
		}
	}
}

func TestReadReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("report.json", `{"settings":{"seeds":1},"summaries":[{"scenario":"a","strategy":"tuner","per_seed":[{"seed":1,"hv_ratio":{"8":0.5}}]}]}`)
	for _, p := range []string{good, dir} {
		r, err := ReadReport(p)
		if err != nil || len(r.Summaries) != 1 || r.Summaries[0].Seeds[0].HV["8"] != 0.5 {
			t.Errorf("ReadReport(%s): %+v, %v", p, r, err)
		}
	}
	for name, p := range map[string]string{
		"missing":      filepath.Join(dir, "nope.json"),
		"not JSON":     write("bad.json", "{"),
		"no summaries": write("empty.json", `{"settings":{}}`),
	} {
		if _, err := ReadReport(p); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), filepath.Base(p)) {
			t.Errorf("%s: %v, want ErrConfig naming the file", name, err)
		}
	}
}

// FuzzCompare: any two report files either fail to read or compare
// without a panic, every row's figures finite or an error.
func FuzzCompare(f *testing.F) {
	// Compact seeds: the fuzzer minimises every new input, and a marshalled
	// Report (7 KB of empty fields) stalls it for seconds each time.
	a := `{"settings":{"checkpoints":[8,24]},"summaries":[{"scenario":"a","strategy":"t","per_seed":[` +
		`{"seed":1,"hv_ratio":{"8":0.5,"24":0.8},"pick_true_over_true_best":0.97},{"seed":2,"hv_ratio":{"8":0.6,"24":0.9}}]}]}`
	b := `{"settings":{"checkpoints":[8]},"summaries":[{"scenario":"a","strategy":"t","per_seed":[` +
		`{"seed":2,"hv_ratio":{"8":0.7}},{"seed":1,"hv_ratio":{"8":0.4,"24":1},"pick_true_over_true_best":0.99},{"seed":3,"hv_ratio":{}}]}]}`
	f.Add([]byte(a), []byte(b))
	f.Add([]byte(`{"summaries":[{"scenario":"a","strategy":"t","per_seed":[{"seed":1,"hv_ratio":{"8":1}},{"seed":1,"hv_ratio":{"8":2}}]}]}`), []byte(b))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ra, err := parseReport("a.json", a)
		if err != nil {
			return
		}
		rb, err := parseReport("b.json", b)
		if err != nil {
			return
		}
		rows, err := Compare(ra, rb)
		if err != nil {
			return
		}
		for _, r := range rows {
			if r.N < 2 || math.IsNaN(r.Mean) || math.IsNaN(r.P) {
				t.Fatalf("row %+v", r)
			}
		}
		_ = CompareMarkdown(rows)
	})
}
