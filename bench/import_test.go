package bench

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
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
		{"unknown key", func(m map[string]any) { m["gpu_type"] = "H100" }, nil, `unknown key "gpu_type"`},
		{"metadata key allowed", func(m map[string]any) { m["gpu_type"] = "H100" }, []string{"gpu_type"}, ""},
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
			if math.IsNaN(l.Metrics.OutputThroughput) {
				t.Fatal("NaN throughput")
			}
		}
	})
}
