package eval

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/spaces"
)

// exampleScenarios loads one of the shipped scenario files.
func exampleScenarios(t *testing.T, file string) []Scenario {
	t.Helper()
	scs, err := LoadScenarios(file)
	if err != nil {
		t.Fatal(err)
	}
	return scs
}

func TestLoadScenariosExample(t *testing.T) {
	scs := exampleScenarios(t, "../examples/eval-scenarios.yaml")
	if len(scs) != 4 {
		t.Fatalf("%d scenarios, want 4", len(scs))
	}
	q, rag, long, moe := scs[0], scs[1], scs[2], scs[3]
	if long.MaxModelLen != 32768 || long.Workload.Prompt.Min != 8000 || moe.Model != "Mixtral-8x7B" || moe.GPUCount != 2 {
		t.Errorf("long-context %+v, MoE %+v", long, moe)
	}
	if q.Name != "qwen7b-l40s-short" || q.Model != "Qwen2.5-7B" || q.GPUCount != 1 || !reflect.DeepEqual(q.Workload, shortWorkload()) ||
		q.Latency != "tpot_p99" || q.E2ECapMS != 25000 || q.WarmFrom != "llama8b-a100-short" {
		t.Errorf("first scenario %+v", q)
	}
	if rag.Workload.Name != "rag" || rag.Workload.Prompt.Min != 2000 || rag.Workload.Arrival.Concurrency != 32 || rag.Latency != "ttft_p99" {
		t.Errorf("inline workload %+v", rag.Workload)
	}
	for _, sc := range scs {
		if _, err := sc.Resolve(); err != nil {
			t.Errorf("%s: %v", sc.Name, err)
		}
	}
}

// TestLoadScenariosHeldOut: the held-out file (make eval-search-heldout)
// resolves, and its scenarios share no name, and no model on the same GPU,
// with the tuned-on ones.
func TestLoadScenariosHeldOut(t *testing.T) {
	held := exampleScenarios(t, "../examples/eval-heldout.yaml")
	own := exampleScenarios(t, "../examples/eval-scenarios.yaml")
	if len(held) != 4 {
		t.Fatalf("%d held-out scenarios, want 4", len(held))
	}
	tuned := map[string]bool{}
	for _, sc := range append(DefaultScenarios(), own...) {
		tuned[sc.Name], tuned[sc.Model+" on "+sc.GPU] = true, true
	}
	for _, sc := range held {
		if tuned[sc.Name] || tuned[sc.Model+" on "+sc.GPU] {
			t.Errorf("%s (%s on %s) repeats a tuned-on scenario", sc.Name, sc.Model, sc.GPU)
		}
		if sc.WarmFrom == "" {
			t.Errorf("%s: no warm_from", sc.Name)
		}
		if _, err := sc.Resolve(); err != nil {
			t.Errorf("%s: %v", sc.Name, err)
		}
	}
}

func TestParseScenariosErrors(t *testing.T) {
	const ok = `scenarios:
  - name: a
    model: Llama-3.1-8B
    gpu: H100-80GB
    max_model_len: 4096
    workload: chat
    slo: "tpot_p99<=50ms"
`
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad-workload.yaml"), []byte("name: w\narrival: {kind: closed}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, doc string
		line      int
		want      string
	}{
		{"syntax", "scenarios: [\n", 0, "s.yaml"},
		{"unknown field", strings.Replace(ok, "    slo:", "    sloo: x\n    slo:", 1), 7, "sloo"},
		{"empty", "scenarios: []\n", 0, "scenarios: missing or empty"},
		{"no model", strings.Replace(ok, "    model: Llama-3.1-8B\n", "", 1), 2, "scenarios[0].model: missing"},
		{"unknown model", strings.Replace(ok, "Llama-3.1-8B", "No-Such-Model", 1), 3, "scenarios[0].model"},
		{"default name", strings.Replace(ok, "name: a", "name: llama8b-h100-chat", 1), 2, "is taken"},
		{"duplicate", ok + strings.TrimPrefix(ok, "scenarios:\n"), 8, "is taken"},
		{"bad slo", strings.Replace(ok, "tpot_p99<=50ms", "tpot_p99=<50ms", 1), 7, "scenarios[0].slo"},
		{"bad latency", ok + "    latency: speed\n", 8, "scenarios[0].latency"},
		{"no workload", strings.Replace(ok, "    workload: chat\n", "", 1), 2, "scenarios[0].workload: missing"},
		{"unknown preset", strings.Replace(ok, "workload: chat", "workload: no-such-preset", 1), 6, "not a built-in"},
		{"inline error", strings.Replace(ok, "workload: chat", "workload:\n      name: w\n      prompt: {kind: fixed, value: 0}\n      output: {kind: fixed, value: 8}\n      arrival: {kind: closed, concurrency: 4}\n      num_requests: 10", 1), 8, "scenarios[0].workload.prompt.value"},
		{"workload file error", strings.Replace(ok, "workload: chat", "workload: bad-workload.yaml", 1), 0, "bad-workload.yaml:1: prompt"},
		{"warm_from unknown", ok + "    warm_from: nowhere\n", 8, "scenarios[0].warm_from"},
		{"warm_from self", ok + "    warm_from: a\n", 8, "scenarios[0].warm_from"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseScenarios(filepath.Join(dir, "s.yaml"), []byte(tc.doc))
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err %v, want ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q lacks %q", err, tc.want)
			}
			var fe *spaces.FileError
			if !errors.As(err, &fe) {
				t.Fatalf("error %q is not a FileError", err)
			}
			if tc.line > 0 && fe.Line != tc.line {
				t.Errorf("line %d, want %d (%v)", fe.Line, tc.line, err)
			}
		})
	}
}

func FuzzParseScenarios(f *testing.F) {
	b, err := os.ReadFile("../examples/eval-scenarios.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("scenarios:\n  - name: x\n    workload: {name: w}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		scs, err := ParseScenarios("f.yaml", b)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v is not ErrConfig", err)
			}
			return
		}
		for _, sc := range scs {
			if sc.Name == "" || sc.GPUCount < 1 || sc.MaxModelLen <= 0 {
				t.Fatalf("accepted %+v", sc)
			}
		}
	})
}
