package main

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/bench"
	"github.com/vllm-tuner/tuner/chart"
	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/store/boltstore"
)

// synthReqs is one smoke-tier cell's requests: n successes with lognormal
// TTFT (median 150 ms) and TPOT (median 18 ms), every latency x slowdown.
func synthReqs(seed uint64, n int, slowdown float64) ([]bench.Request, []float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	ms := func(v float64) time.Duration {
		return time.Duration(v * float64(time.Millisecond)).Truncate(time.Microsecond)
	}
	reqs := make([]bench.Request, n)
	for i := range reqs {
		ttft := 150 * math.Exp(0.5*rng.NormFloat64()) * slowdown
		tpot := 18 * math.Exp(0.12*rng.NormFloat64()) * slowdown
		reqs[i] = bench.Request{Index: i, Start: time.Duration(i) * 10 * time.Millisecond, Prompt: 256, Output: 64,
			TTFT: ms(ttft), E2EL: ms(ttft + 63*tpot), ITL: bench.ITLSummary{Mean: ms(tpot), P50: ms(tpot), P99: ms(tpot), Max: ms(tpot)}}
	}
	win := make([]float64, 10)
	for i := range win {
		win[i] = 880 / slowdown * math.Exp(0.03*rng.NormFloat64())
	}
	return reqs, win
}

type synthRun struct {
	model, matrix, tier, version string
	labels                       map[string]string
	cells                        []string
	seed                         uint64
	slowdown                     float64
	summaryOnly                  bool
	leaveRunning                 bool // keep the writer open: the run stays running
}

// storeRuns writes runs r1, r2, ... into a fresh database and returns its
// path; a run left running keeps its writer open until the test ends.
func storeRuns(t *testing.T, runs []synthRun) string {
	t.Helper()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "runs.db")
	start := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	for i, sr := range runs {
		st, err := boltstore.Open(ctx, db, boltstore.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		r := store.Run{Source: "run", Model: sr.model, Engine: "sim", EngineVersion: sr.version, Matrix: "smoke", MatrixHash: sr.matrix,
			Tier: sr.tier, Labels: sr.labels, Start: start.Add(time.Duration(i) * 24 * time.Hour)}
		var cells []store.CellResult
		var raws [][]byte
		for ci, name := range sr.cells {
			reqs, win := synthReqs(sr.seed*100+uint64(ci), 300, sr.slowdown)
			l := store.LevelResult{Concurrency: 16, Metrics: bench.Summarize(reqs, nil), WindowThroughput: win, SuccessRate: 1}
			cells = append(cells, store.CellResult{Name: name, Levels: []store.LevelResult{l}, Requests: len(reqs)})
			raw, err := bench.EncodeRaw(reqs)
			if err != nil {
				t.Fatal(err)
			}
			raws = append(raws, raw)
		}
		switch {
		case sr.summaryOnly:
			r.Source, r.State = "import", store.RunOK
			for ci := range cells {
				cells[ci].Levels[0].WindowThroughput = nil
			}
			r.Cells = cells
			if _, err := st.ImportRun(ctx, &r, make([][]byte, len(cells))); err != nil {
				t.Fatal(err)
			}
		default:
			id, err := st.BeginRun(ctx, &r)
			if err != nil {
				t.Fatal(err)
			}
			for ci := range cells {
				if err := st.AddCell(ctx, id, cells[ci], raws[ci]); err != nil {
					t.Fatal(err)
				}
			}
			if sr.leaveRunning {
				t.Cleanup(func() { st.Close() })
				continue
			}
			if err := st.FinishRun(ctx, id, store.RunOK, "", r.Start.Add(40*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (-update rewrites it):\n%s", name, got)
	}
}

var cell1 = []string{"chat-c16"}

func compareFixture(t *testing.T) string {
	return storeRuns(t, []synthRun{
		{model: "tiny-llama", matrix: "h1", tier: "smoke", labels: map[string]string{"git": "a", "branch": "main"}, cells: cell1, seed: 1, slowdown: 1},
		{model: "tiny-llama", matrix: "h1", tier: "smoke", labels: map[string]string{"git": "b", "branch": "main"}, cells: cell1, seed: 2, slowdown: 1},
		{model: "tiny-llama", matrix: "h1", tier: "smoke", labels: map[string]string{"git": "c", "branch": "pr"}, cells: cell1, seed: 3, slowdown: 1.27},
		{model: "Llama-3.1-8B", matrix: "h1", tier: "smoke", cells: cell1, seed: 4, slowdown: 1},
		{model: "tiny-llama", matrix: "h1", cells: cell1, seed: 5, slowdown: 1.27, summaryOnly: true},
		{model: "tiny-llama", matrix: "h2", tier: "nightly", cells: []string{"short", "long"}, seed: 6, slowdown: 1},
		{model: "tiny-llama", matrix: "h1", tier: "smoke", cells: cell1, seed: 7, slowdown: 1, leaveRunning: true},
	})
}

// TestBenchCompare drives `tuner bench compare` over stored runs: an
// identical config passes (exit 0), a 27% slower one fails (exit 1) in
// every output format, and each bad input is a clear exit 2.
func TestBenchCompare(t *testing.T) {
	db := compareFixture(t)
	junit := filepath.Join(t.TempDir(), "compare.xml")
	junitInc := filepath.Join(t.TempDir(), "inconclusive.xml")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		golden string   // stdout golden file
		want   []string // in stdout + stderr
	}{
		// 9 metrics of a 200-request fixture: the tails' spread hides 5%.
		{name: "same config", args: []string{"--junit", junitInc, "r1", "r2"}, code: 3, want: []string{"0 regressions", "inconclusive",
			"alpha 0.05 (Holm over 9 tests), threshold 5%, minimum detectable effect at 80% power", "  MDE  ",
			"tuner: inconclusive: r2 vs r1: no regression found, but the runs are too noisy to rule one out above 5% for chat-c16 ttft_p50 (MDE "}},
		{name: "same config md", args: []string{"--md", "r1", "r2"}, code: 3, want: []string{"### Benchmark comparison: Inconclusive — `r2` vs `r1`", "| Inconclusive |", "| MDE |"}},
		{name: "same config, a threshold the runs can see", args: []string{"--metrics", "tpot_p50,e2el_p50", "--threshold", "20%", "r1", "r2"}, code: 0,
			want: []string{"0 regressions, 0 improvements, 2 unchanged, 0 inconclusive"}},
		{name: "slowed text", args: []string{"r1", "r3"}, code: 1, golden: "bench-compare.txt",
			want: []string{"regression: r3 vs r1: chat-c16 ttft_p50 +", "chat-c16 tpot_p50 +2"}},
		{name: "slowed md", args: []string{"--md", "r1", "r3"}, code: 1, golden: "bench-compare.md"},
		{name: "slowed json", args: []string{"--json", "r1", "r3"}, code: 1, golden: "bench-compare.json"},
		{name: "junit", args: []string{"--junit", junit, "--metrics", "tpot_p50,output_throughput", "r1", "r3"}, code: 1,
			want: []string{"chat-c16  tpot_p50"}},
		{name: "baseline tier", args: []string{"--baseline-tier", "smoke", "r3"}, code: 1, want: []string{"vs r2"}},
		{name: "latest with label", args: []string{"latest:branch=main", "r3"}, code: 1, want: []string{"vs r2"}},
		{name: "per-metric threshold", args: []string{"--metrics", "tpot_p50", "--threshold-for", "tpot_p50=40%", "r1", "r3"}, code: 0,
			want: []string{"no change"}},
		{name: "no correction", args: []string{"--no-correction", "--metrics", "tpot_p50", "--threshold", "20%", "r1", "r2"}, code: 0, want: []string{"(no correction)"}},
		{name: "other model", args: []string{"r1", "r4"}, code: 2, want: []string{`runs differ in model: base "tiny-llama", new "Llama-3.1-8B"`}},
		{name: "summary only", args: []string{"r1", "r5"}, code: 2,
			want: []string{"summary only: no per-request samples in new, no test possible", "no test was possible: run r5 has no per-request data (import)"}},
		{name: "other matrix", args: []string{"r1", "r6"}, code: 2, want: []string{`runs differ in matrix: base "h1", new "h2"`}},
		{name: "running", args: []string{"r1", "r7"}, code: 2, want: []string{"new run r7 is still running"}},
		{name: "unknown metric", args: []string{"--metrics", "tpot_p50,speed", "r1", "r2"}, code: 2, want: []string{`metric "speed"`, "unknown metric"}},
		{name: "unknown threshold metric", args: []string{"--threshold-for", "latency=3%", "r1", "r2"}, code: 2, want: []string{"unknown metric"}},
		{name: "bad threshold", args: []string{"--threshold", "five", "r1", "r2"}, code: 2, want: []string{`--threshold "five"`}},
		{name: "one run", args: []string{"r1"}, code: 2, want: []string{"takes BASE and NEW"}},
		{name: "no such run", args: []string{"r1", "r99"}, code: 2, want: []string{"r99"}},
		{name: "no tier baseline", args: []string{"--baseline-tier", "release", "r3"}, code: 2, want: []string{"no finished release run of model tiny-llama before r3"}},
		{name: "same run", args: []string{"r2", "r2"}, code: 2, want: []string{"same run r2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errb := runTuner(t, append([]string{"--db", db, "bench", "compare"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, tc.code, out, errb)
			}
			for _, w := range tc.want {
				if !strings.Contains(out+errb, w) {
					t.Errorf("output lacks %q:\n%s\n%s", w, out, errb)
				}
			}
			if tc.golden != "" {
				golden(t, tc.golden, out)
			}
		})
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `tests="2" failures="2"`) || !strings.Contains(string(b), `<failure message="tpot_p50 +2`) {
		t.Errorf("junit:\n%s", b)
	}
	if b, err = os.ReadFile(junitInc); err != nil || !strings.Contains(string(b), `failures="0"`) ||
		!strings.Contains(string(b), `<skipped message="the runs&#39; spread hides changes below`) || !strings.Contains(string(b), `type="inconclusive"`) {
		t.Errorf("inconclusive junit (%v):\n%s", err, b)
	}
}

func TestParseShare(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{{"2%", 0.02, true}, {"0.025", 0.025, true}, {" 3 %", 0.03, true}, {"0", 0, true}, {"-1%", 0, false}, {"x", 0, false}, {"NaN", 0, false}, {"", 0, false}} {
		got, err := parseShare(tc.in)
		if (err == nil) != tc.ok || (tc.ok && math.Abs(got-tc.want) > 1e-12) {
			t.Errorf("parseShare(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestBenchHistory: four runs of a model getting slower (1.0, 1.01, 1.10,
// 1.27): the table, JSON and plots show the trend in time order with the
// engine versions, and change points on the runs the gate flags against
// their predecessor (1.10 and 1.27), not on the 1% step.
func TestBenchHistory(t *testing.T) {
	var runs []synthRun
	for i, s := range []float64{1, 1.01, 1.10, 1.27} {
		runs = append(runs, synthRun{model: "tiny-llama", matrix: "h1", tier: "nightly", version: "0.10." + string(rune('0'+i)),
			labels: map[string]string{"git": string(rune('a' + i))}, cells: []string{"chat-c16", "long-c4"}, seed: uint64(10 + i), slowdown: s})
	}
	db := storeRuns(t, runs)
	dir := t.TempDir()
	code, out, errb := runTuner(t, "--db", db, "bench", "history", "--model", "tiny-llama", "--metric", "tpot_p50", "--label", "git",
		"--plot", filepath.Join(dir, "h.svg"))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errb)
	}
	golden(t, "bench-history.txt", out)

	code, out, errb = runTuner(t, "--db", db, "bench", "history", "--model", "tiny-llama", "--cell", "chat-c16", "--json")
	if code != 0 {
		t.Fatalf("json: exit %d %s", code, errb)
	}
	var rep struct{ Points []historyPoint }
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 4 {
		t.Fatalf("%d points, want 4", len(rep.Points))
	}
	var verdicts []string
	for i, p := range rep.Points {
		if p.Run != "r"+string(rune('1'+i)) || p.Cell != "chat-c16" || p.Value == nil || p.N != 300 {
			t.Errorf("point %d: %+v", i, p)
		}
		// The 1% step is inside the noise; the larger ones show.
		if i >= 2 && *p.Value <= *rep.Points[i-1].Value {
			t.Errorf("tpot_p50 not increasing at %s: %v after %v", p.Run, *p.Value, *rep.Points[i-1].Value)
		}
		verdicts = append(verdicts, string(p.Verdict))
	}
	if got := strings.Join(verdicts, ","); got != ",no change,regression,regression" {
		t.Errorf("verdicts %s", got)
	}

	f, err := os.Open(filepath.Join(dir, "h.svg"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	marks, err := chart.SVGMarkers(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) != 8 { // 2 cells x 4 runs
		t.Errorf("%d circles in the SVG, want 8", len(marks))
	}
	html := filepath.Join(dir, "h.html")
	if code, _, errb := runTuner(t, "--db", db, "bench", "history", "--model", "tiny-llama", "--plot", html); code != 0 {
		t.Fatalf("html: exit %d %s", code, errb)
	}
	b, _ := os.ReadFile(html)
	if !strings.Contains(string(b), "regression") || !strings.Contains(string(b), "r4 0.10.3") {
		t.Errorf("html lacks the change points or run labels")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "nope"}, "no finished run of model nope"},
		{[]string{"--model", "tiny-llama", "--metric", "speed"}, "unknown metric"},
		{[]string{"--model", "tiny-llama", "--cell", "x"}, "cell x"},
		{[]string{"--model", "tiny-llama", "--plot", "h.pdf"}, "--plot h.pdf"},
	} {
		code, _, errb := runTuner(t, append([]string{"--db", db, "bench", "history"}, tc.args...)...)
		if code != 2 || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: exit %d %s, want 2 and %q", tc.args, code, errb, tc.want)
		}
	}
}

// FuzzParseShare: any input is an error or a finite share >= 0, and
// "N%" is N/100 of "N".
func FuzzParseShare(f *testing.F) {
	for _, s := range []string{"2%", "0.02", " 3 %", "-1", "1e3%", "NaN", "Inf%", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseShare(s)
		if err != nil {
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Fatalf("parseShare(%q) = %v", s, v)
		}
		if !strings.HasSuffix(strings.TrimSpace(s), "%") {
			if w, err := parseShare(strings.TrimSpace(s) + "%"); err != nil || math.Abs(w*100-v) > 1e-9*math.Max(1, v) {
				t.Fatalf("parseShare(%q%%) = %v, %v; want %v/100", s, w, err, v)
			}
		}
	})
}
