package bench

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/store"
)

func detailedFixture(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(mustRead(t, "../cmd/tuner/testdata/vllm-bench-detailed.json"), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestParseVLLMResult(t *testing.T) {
	run, reqs, err := ParseVLLMResult(mustRead(t, "../cmd/tuner/testdata/vllm-bench-detailed.json"), ImportOptions{File: "d.json", Labels: map[string]string{"git": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if run.Source != "import" || run.Model != "meta-llama/Llama-3.1-8B-Instruct" || run.Engine != "vllm" || run.Labels["git"] != "x" ||
		!run.Start.Equal(time.Date(2026, 12, 2, 10, 15, 0, 0, time.UTC)) || len(run.Cells) != 1 {
		t.Fatalf("run %+v", run)
	}
	l := run.Cells[0].Levels[0]
	if l.Concurrency != 4 || l.Metrics.Completed != 5 || l.Metrics.Failed != 1 || l.Metrics.TTFT.Median != 62 || l.Metrics.TPOT.P99 != 30.4 || l.Metrics.OutputThroughput != 16.667 {
		t.Errorf("level %+v", l)
	}
	if len(reqs) != 6 || run.Cells[0].Requests != 6 {
		t.Fatalf("%d raw requests", len(reqs))
	}
	// request 2: ttft 120 ms, gaps 20, 22, 21, 19 ms: E2EL 202 ms, TPOT 20.5 ms
	r := reqs[2]
	if r.TTFT != 120*time.Millisecond || r.E2EL != 202*time.Millisecond || r.Start != 200*time.Millisecond || r.ITL.Max != 22*time.Millisecond {
		t.Errorf("request 2 = %+v", r)
	}
	if d, _ := r.TPOT(); d != 20500*time.Microsecond {
		t.Errorf("tpot %v", d)
	}
	if reqs[3].OK() || reqs[3].Err != "other" || l.Errors["other"] != 1 {
		t.Errorf("failed request %+v, errors %v", reqs[3], l.Errors)
	}
	if b := l.Metrics.ByClass; b["short"].Completed != 3 || b["medium"].Completed+b["medium"].Failed != 2 || b["long"].Completed != 1 {
		t.Errorf("buckets %+v", b)
	}
	sum, reqs, err := ParseVLLMResult(mustRead(t, "../cmd/tuner/testdata/vllm-bench-summary.json"), ImportOptions{File: "s.json"})
	if err != nil {
		t.Fatal(err)
	}
	if reqs != nil || sum.Cells[0].Levels[0].Rate != 8 || sum.Matrix != "nightly-before" || sum.Cells[0].Name != "rate-8" {
		t.Errorf("summary import: %+v, %d requests", sum.Cells[0], len(reqs))
	}
}

func TestParseVLLMResultErrors(t *testing.T) {
	tests := []struct {
		name string
		mut  func(m map[string]any)
		meta []string
		want string
	}{
		{"unknown scalar kept as a label", func(m map[string]any) { m["gpu_type"] = "H100" }, nil, ""},
		{"metadata key", func(m map[string]any) { m["gpu_type"] = "H100" }, []string{"gpu_type"}, ""},
		{"missing key", func(m map[string]any) { delete(m, "model_id") }, nil, `missing key "model_id"`},
		{"bad date", func(m map[string]any) { m["date"] = "yesterday" }, nil, `key "date"`},
		{"bad number", func(m map[string]any) { m["duration"] = "long" }, nil, `key "duration"`},
		{"negative", func(m map[string]any) { m["completed"] = -1 }, nil, `key "completed"`},
		{"array length", func(m map[string]any) { m["output_lens"] = []int{1} }, nil, `key "output_lens": 1 entries`},
		{"detailed without errors", func(m map[string]any) { delete(m, "errors") }, nil, `missing key "errors"`},
		{"not an object", nil, nil, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := []byte("[1]")
			if tt.mut != nil {
				m := detailedFixture(t)
				tt.mut(m)
				b, _ = json.Marshal(m)
			}
			run, _, err := ParseVLLMResult(b, ImportOptions{File: "x.json", Metadata: tt.meta})
			if tt.want == "" {
				if err != nil || run.Labels["gpu_type"] != "H100" {
					t.Fatalf("err %v labels %v", err, run)
				}
				return
			}
			if !errors.Is(err, ErrImport) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "x.json") {
				t.Errorf("err = %v, want ErrImport naming x.json and %s", err, tt.want)
			}
		})
	}
}

func FuzzParseVLLMResult(f *testing.F) {
	f.Add(mustRead(f, "../cmd/tuner/testdata/vllm-bench-detailed.json"))
	f.Add(mustRead(f, "../cmd/tuner/testdata/vllm-bench-summary.json"))
	f.Add([]byte(`{}`))
	dir := "testdata/vllm-results"
	ents, err := os.ReadDir(dir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".json") {
			f.Add(mustRead(f, filepath.Join(dir, e.Name())))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		run, reqs, err := ParseVLLMResult(b, ImportOptions{File: "f.json"})
		if err != nil {
			if !errors.Is(err, ErrImport) {
				t.Fatalf("error %v is not ErrImport", err)
			}
			return
		}
		if len(run.Cells) != 1 || run.Model == "" {
			t.Fatalf("run %+v", run)
		}
		for _, r := range reqs {
			if r.TTFT < 0 || r.E2EL < 0 || (r.OK() && r.E2EL < r.TTFT) {
				t.Fatalf("request %+v", r)
			}
		}
		if raw, err := EncodeRaw(reqs); err != nil {
			t.Fatal(err)
		} else if back, err := DecodeRaw(raw); err != nil || len(back) != len(reqs) {
			t.Fatalf("raw round trip: %v", err)
		}
		for _, l := range run.Cells[0].Levels {
			m := l.Metrics
			for _, v := range []float64{m.OutputThroughput, m.RequestThroughput, m.TotalTokenThroughput, m.DurationS,
				m.TTFT.Mean, m.TTFT.P99, m.ITL.P99, m.E2EL.Max, m.RequestGoodput} {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Fatalf("figure %v in %+v", v, m)
				}
			}
			if m.DurationS > 31*24*3600 || m.Completed > run.Cells[0].Workload.NumRequests || run.Start.Year() < 2020 {
				t.Fatalf("implausible run accepted: duration %v, %d of %d, %v", m.DurationS, m.Completed, run.Cells[0].Workload.NumRequests, run.Start)
			}
			for _, r := range reqs {
				if r.E2EL.Seconds() > m.DurationS*1.011 {
					t.Fatalf("request %+v longer than the run %v s", r, m.DurationS)
				}
			}
		}
	})
}

func importFixture(t *testing.T, name string) (*store.Run, []Request, error) {
	t.Helper()
	return ParseVLLMResult(mustRead(t, filepath.Join("testdata/vllm-results", name)), ImportOptions{File: name})
}

// One result file per vLLM bench schema generation: every field the
// importer knows mapped, statistics a file lacks computed from its own
// arrays, the rest missing and shown "n/a", never 0.00.
func TestImportGenerations(t *testing.T) {
	t.Run("current serve.py", func(t *testing.T) {
		run, reqs, err := importFixture(t, "current.json")
		if err != nil {
			t.Fatal(err)
		}
		l := run.Cells[0].Levels[0]
		m := l.Metrics
		if len(reqs) != 6 || m.Completed != 5 || m.Failed != 1 || l.Concurrency != 4 || l.PeakOutputThroughput != 12 || l.PeakConcurrency != 4 {
			t.Fatalf("level %+v, %d requests", l, len(reqs))
		}
		// The file's own figures win; p90/p95/max come from its arrays
		// (ITL pooled over every gap: 15 gaps, p90 of them 30.x ms).
		if m.TTFT.Median != 62 || m.TTFT.P99 != 292.7 || m.ITL.P99 != 31.9 || m.ITL.Max != 32 || m.ITL.P90 < 29.9 || m.ITL.P90 > 31 {
			t.Errorf("distributions ttft %+v itl %+v", m.TTFT, m.ITL)
		}
		// latencies are E2EL: request 5 ends 0.452 s after its start.
		if reqs[5].E2EL != 452*time.Millisecond || reqs[4].Start != 400*time.Millisecond || math.Abs(m.E2EL.Max-452) > 1e-9 {
			t.Errorf("request 5 %+v, e2el %+v", reqs[5], m.E2EL)
		}
		if l.ClientQueue == nil || l.ClientQueue.P99 != 98 || l.ClientQueue.Max != 100 {
			t.Errorf("client queue %+v", l.ClientQueue)
		}
		// The peaks are printed, not only stored.
		var b strings.Builder
		if err := WriteRun(&b, run, "text"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "peak out tok/s") || !regexp.MustCompile(`\b12\.0 +4 +`).MatchString(b.String()) {
			t.Errorf("report lacks the peaks (12.0 tok/s, 4 in flight):\n%s", b.String())
		}
		if !slices.Equal(m.Missing, []string{"request_goodput"}) || m.Lacks("ttft_p90") {
			t.Errorf("missing %v", m.Missing)
		}
		if run.Labels["gpu"] != "H100" || run.Labels["endpoint_type"] != "vllm" || run.Labels["spec_decode_per_position_acceptance_rates"] != "" {
			t.Errorf("labels %v: want the unknown scalar gpu kept, the unknown array skipped", run.Labels)
		}
	})
	t.Run("previous serve.py, detailed", func(t *testing.T) {
		run, reqs, err := importFixture(t, "previous.json")
		if err != nil {
			t.Fatal(err)
		}
		m := run.Cells[0].Levels[0].Metrics
		if len(reqs) != 6 || m.RequestGoodput != 3.3333 || m.TTFT.P90 != 200 || m.TTFT.P95 != 250 || len(m.Missing) != 0 || run.Matrix != "nightly" {
			t.Errorf("metrics %+v, %d requests", m, len(reqs))
		}
		// No latencies array: E2EL is TTFT plus the gaps.
		if reqs[2].E2EL != 202*time.Millisecond {
			t.Errorf("request 2 %+v", reqs[2])
		}
	})
	t.Run("older benchmark_serving.py, summary only", func(t *testing.T) {
		run, reqs, err := importFixture(t, "older.json")
		if err != nil {
			t.Fatal(err)
		}
		l := run.Cells[0].Levels[0]
		m := l.Metrics
		// No failed key: every prompt was sent, the rest failed.
		if reqs != nil || m.Failed != 1 || l.Rate != 8 || l.PeakConcurrency != 0 {
			t.Errorf("level %+v", l)
		}
		for _, k := range []string{"request_goodput", "ttft_p90", "ttft_p95", "ttft_max", "e2el_p50", "e2el_p99", "itl_max"} {
			if !m.Lacks(k) {
				t.Errorf("%s not missing (missing: %v)", k, m.Missing)
			}
			if _, ok := m.Value(k); ok {
				t.Errorf("Value(%s) present", k)
			}
		}
		if _, ok := m.Value("ttft_median"); !ok {
			t.Error("ttft_median missing")
		}
		var b strings.Builder
		if err := WriteRun(&b, run, "text"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "n/a") {
			t.Errorf("report without n/a:\n%s", b.String())
		}
		for _, line := range strings.Split(b.String(), "\n") {
			if strings.Contains(line, " e2el ") && strings.Contains(line, "0.00") {
				t.Errorf("a missing figure printed as 0.00: %q", line)
			}
		}
	})
}

// Implausible files are refused with an error naming the key.
func TestImportRefusesHostile(t *testing.T) {
	for file, want := range map[string]string{
		"hostile-duration-1e308.json":            `key "duration": 1e+308 s`,
		"hostile-completed-million.json":         `key "completed": 1e+06, more than the 6 prompts sent`,
		"hostile-itl-1e300.json":                 `key "p99_itl_ms": 1e+300 ms, longer than the run`,
		"hostile-itls-array-1e300.json":          `key "itls": request 0: 1e+300 s, longer than the run`,
		"hostile-percentiles-decrease.json":      `key "p99_ttft_ms": 50 ms below the median_ttft_ms 62 ms`,
		"hostile-date-1734.json":                 `key "date": 1734-01-01 is before 2020`,
		"hostile-rates-disagree.json":            `key "request_throughput": 400 disagrees with completed / duration`,
		"hostile-latency-longer-than-run.json":   `key "latencies": request 5: 30 s, longer than the run`,
		"hostile-goodput-above-throughput.json":  `key "request_goodput": 50 above the request throughput`,
		"hostile-fractional-count.json":          `key "total_output_tokens": 20.5 is not a count`,
		"hostile-arrays-disagree-completed.json": `key "completed": 4, but the arrays hold 5 successful requests`,
		"hostile-nan.json":                       `key "std_tpot_ms": NaN is not a finite number`,
		"hostile-lengths-disagree-totals.json":   `key "total_output_tokens": 20, but the successful requests' lengths add up to 100000000016`,
	} {
		_, _, err := importFixture(t, file)
		if !errors.Is(err, ErrImport) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: %v, want ErrImport naming the file and %s", file, err, want)
		}
	}
}
