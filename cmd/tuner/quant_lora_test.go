package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/store"
	"github.com/vllm-tuner/tuner/tuner"
)

// shortSearch is a small sim-virtual search of model on gpus x gpu.
func shortSearch(db, model, gpu, gpus, workload string, extra ...string) []string {
	return append([]string{"--db", db, "search", "--model", model, "--gpu", gpu, "--gpus", gpus, "--engine", "sim-virtual",
		"--workload", workload, "--slo", "tpot_p99<=60ms", "--trials", "8", "--budget", "0",
		"--finalists", "2", "--repeats", "2", "--json"}, extra...)
}

// searchAndRecommend runs the search, then recommend, and returns the
// stored trials and the recommended flags.
func searchAndRecommend(t *testing.T, model string, args []string) ([]store.Trial, []string) {
	t.Helper()
	code, out, errb := runTuner(t, args...)
	if code != 0 {
		t.Fatalf("search: exit %d\n%s\n%s", code, out, errb)
	}
	var rep tuner.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	db := args[1]
	code, out, errb = runTuner(t, "--db", db, "recommend", "--model", model, "--format", "json")
	if code != 0 {
		t.Fatalf("recommend: exit %d\n%s\n%s", code, out, errb)
	}
	var rec struct {
		Candidate tuner.Candidate `json:"candidate"`
		Flags     []string        `json:"flags"`
	}
	if err := json.Unmarshal([]byte(out), &rec); err != nil || !rec.Candidate.Feasible {
		t.Fatalf("recommendation %s (%v)", out, err)
	}
	s := openTestStore(t, db)
	ts, err := s.Trials(context.Background(), rep.Study, store.TrialFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return ts, rec.Flags
}

// A pre-quantized checkpoint and online FP8 can be searched and
// recommended; the kernels searched are those the checkpoint allows.
func TestSearchQuantizedModel(t *testing.T) {
	for _, tt := range []struct {
		model string
		want  []string // quantization levels the trials may use
	}{
		{"hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", []string{"auto", "awq", "awq_marlin"}},
		{testModel, []string{"auto", "fp8"}},
	} {
		t.Run(filepath.Base(tt.model), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "t.db")
			ts, flags := searchAndRecommend(t, tt.model, shortSearch(db, tt.model, testGPU, "1", "testdata/tiny-chat.yaml", "--space", "testdata/quant-space.yaml"))
			seen := map[string]bool{}
			for _, tr := range ts {
				q := tr.Config.Str("quantization")
				if !strings.Contains(","+strings.Join(tt.want, ",")+",", ","+q+",") {
					t.Errorf("trial %s ran quantization %q, want one of %v", tr.ID, q, tt.want)
				}
				seen[q] = true
			}
			if len(seen) < 2 {
				t.Errorf("quantization levels tried: %v, want more than the default", seen)
			}
			t.Logf("recommended: %s", strings.Join(flags, " "))
		})
	}
}

// A MoE model searches expert parallelism when it has more than one GPU:
// the sampler draws both levels and the engine runs them. Without
// --no-surrogate the screening may rightly leave it out: it buys nothing
// for a model that fits one GPU and costs two all-to-alls a layer
// (surrogate's derived, schema 7).
func TestSearchMoEModel(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	ts, flags := searchAndRecommend(t, "Qwen/Qwen1.5-MoE-A2.7B-Chat", shortSearch(db, "Qwen/Qwen1.5-MoE-A2.7B-Chat", testGPU, "2", "testdata/tiny-chat.yaml", "--no-surrogate"))
	ep := 0
	for _, tr := range ts {
		if _, ok := tr.Config.Get("enable_expert_parallel"); !ok {
			t.Fatalf("trial %s has no enable_expert_parallel: %s", tr.ID, tr.Config)
		}
		if tr.Config.Bool("enable_expert_parallel") {
			ep++
		}
	}
	if ep == 0 {
		t.Errorf("no trial with expert parallelism among %d", len(ts))
	}
	t.Logf("recommended: %s", strings.Join(flags, " "))
}

// A two-tenant LoRA workload: the slots are searched (ranks below the
// largest adapter's never tried) and show prints per-tenant figures.
func TestSearchLoRATenants(t *testing.T) {
	db := filepath.Join(t.TempDir(), "t.db")
	ts, flags := searchAndRecommend(t, testModel, shortSearch(db, testModel, testGPU, "1", "testdata/lora-tenants.yaml"))
	for _, tr := range ts {
		if r := tr.Config.Int("max_lora_rank"); r < 32 && r != 16 {
			t.Errorf("trial %s: max_lora_rank %d below the chat adapter's 32", tr.ID, r)
		}
		if _, ok := tr.Config.Get("max_loras"); !ok {
			t.Fatalf("trial %s has no max_loras", tr.ID)
		}
	}
	// The recommendation is servable: the adapters come with the flags.
	if f := strings.Join(flags, " "); !strings.Contains(f, "--max-loras") || !strings.Contains(f, "--enable-lora --lora-modules") {
		t.Errorf("recommended flags %v lack --max-loras or the adapters", flags)
	}
	// The default config's max_lora_rank 16 cannot load the rank-32
	// adapter: a failed trial; others run and report both tenants.
	var ok store.Trial
	for _, tr := range ts {
		if tr.Result != nil && tr.Result.Usable() {
			ok = tr
			break
		}
	}
	if ok.ID == "" {
		t.Fatal("no usable trial")
	}
	m := ok.Result.Metrics()
	if len(m.ByTenant) != 2 || m.ByTenant["sql"].Completed < 2*m.ByTenant["chat"].Completed || m.Fairness == nil {
		t.Fatalf("per-tenant metrics: %+v fairness %+v", m.ByTenant, m.Fairness)
	}
	code, out, errb := runTuner(t, "--db", db, "show", ok.ID)
	if code != 0 {
		t.Fatalf("show: %d %s", code, errb)
	}
	for _, want := range []string{"tenant", "sql", "chat", "fairness: worst/best tenant P95: TTFT"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
}

// tuner space shows what a search would tune: the LoRA slots for a tenant
// workload, expert parallelism for a MoE on several GPUs.
func TestSpaceTargetDependentParams(t *testing.T) {
	runCLICases(t, []cliCase{
		{"lora slots with tenants", []string{"space", "--model", testModel, "--gpu", testGPU, "--workload", "testdata/lora-tenants.yaml", "--no-prune"}, 0,
			[]string{"max_loras", "max_lora_rank                 --max-lora-rank                 int          {16, 32, 64, 128, 256}"}, nil},
		{"no lora slots without", []string{"space", "--model", testModel, "--gpu", testGPU, "--workload", "testdata/tiny-chat.yaml", "--no-prune"}, 0,
			nil, nil},
		{"expert parallelism for a MoE", []string{"space", "--model", "Mixtral-8x7B", "--gpu", testGPU, "--gpus", "4", "--no-prune"}, 0,
			[]string{"enable_expert_parallel        --enable-expert-parallel        bool         {false, true}"}, nil},
		{"bad workload", []string{"space", "--model", testModel, "--gpu", testGPU, "--workload", "testdata/nope.yaml"}, exitUsage,
			nil, []string{"--workload"}},
	})
	_, out, _ := runTuner(t, "space", "--model", testModel, "--gpu", testGPU, "--no-prune")
	for _, line := range strings.Split(out, "\n") {
		for _, n := range []string{"max_loras", "max_lora_rank", "enable_expert_parallel", "quantization", "dtype"} {
			if strings.HasPrefix(line, n+" ") {
				t.Errorf("dense model without tenants tunes %s: %s", n, line)
			}
		}
	}
}
