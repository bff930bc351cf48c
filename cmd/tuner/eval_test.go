package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/eval"
)

func TestEvalSearchCommand(t *testing.T) {
	dir := t.TempDir()
	badScenarios := filepath.Join(dir, "bad-scenarios.yaml")
	if err := os.WriteFile(badScenarios, []byte("scenarios:\n  - name: x\n    model: Nope\n    gpu: H100-80GB\n    max_model_len: 4096\n    workload: chat\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	readme := filepath.Join(dir, "README-blocks.md")
	if err := os.WriteFile(readme, []byte("# x\n"+eval.TableBegin+"\nold\n"+eval.TableEnd+"\n<!-- mine:begin (make mine) -->\nold mine\n<!-- mine:end -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []cliCase{
		{"unknown scenario", []string{"eval", "search", "--scenarios", "nope"}, 2, nil, []string{"unknown scenario", "llama8b-h100-chat"}},
		{"readme without the block", []string{"eval", "search", "--quick", "--readme", readme, "--table", "heldout-table"}, 2,
			nil, []string{"README-blocks.md: no <!-- heldout-table:begin"}},
		{"readme block by name", []string{"eval", "search", "--quick", "--strategies", "random", "--trials", "2", "--samples", "30", "--refine", "5",
			"--readme", readme, "--table", "mine", "--out", t.TempDir()}, 0, []string{"| random |"}, nil},
		{"unknown strategy", []string{"eval", "search", "--quick", "--strategies", "magic"}, 2, nil, []string{"unknown strategy"}},
		{"zero seeds", []string{"eval", "search", "--quick", "--seeds", "0"}, 2, nil, []string{"seeds"}},
		{"negative streams", []string{"eval", "search", "--quick", "--streams", "-1"}, 2, nil, []string{"other request streams -1"}},
		{"stray argument", []string{"eval", "search", "extra"}, 2, nil, []string{"no arguments"}},
		{"quick grid and random", []string{"eval", "search", "--quick", "--strategies", "random,grid", "--trials", "3",
			"--samples", "40", "--refine", "5", "--out", dir}, 0,
			[]string{"# Search-quality benchmark", "| random |", "| grid |"}, []string{"ground truth", "report written to"}},
		{"bad scenarios file", []string{"eval", "search", "--scenarios-file", badScenarios}, 2, nil, []string{"bad-scenarios.yaml:3", "scenarios[0].model"}},
		{"own scenario as JSON", []string{"eval", "search", "--quick", "--scenarios-file", "../../examples/eval-scenarios.yaml",
			"--scenarios", "qwen7b-l40s-short", "--strategies", "random", "--trials", "2", "--samples", "30", "--refine", "5", "--json", "--out", t.TempDir()}, 0,
			[]string{`"scenario": "qwen7b-l40s-short"`, `"gpu_hours_to"`}, nil},
		{"noise-free", []string{"eval", "search", "--quick", "--noise-free", "--strategies", "random", "--trials", "2",
			"--samples", "30", "--refine", "5", "--out", t.TempDir()}, 0, []string{"noise off (--noise-free"}, nil},
		{"noise-free with readme", []string{"eval", "search", "--quick", "--noise-free", "--readme", filepath.Join(dir, "README.md")}, 2,
			nil, []string{"--noise-free with --readme"}},
	}
	runCLICases(t, tests)
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.Contains(got, "\nold\n"+eval.TableEnd) || strings.Contains(got, "old mine") ||
		!strings.Contains(got, "<!-- mine:begin (make mine) -->\nSeeds 1-1, 2 trials per run, strategies random;") {
		t.Errorf("README after --table mine:\n%s", got)
	}
	for _, f := range []string{"report.md", "report.json", "runs.json", "hv-llama8b-h100-chat.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}

// TestEvalCompareCommand: two eval search runs of the same seeds, compared
// seed by seed; the runs are deterministic, so every difference is 0.
func TestEvalCompareCommand(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, out := range []string{a, b} {
		if code, _, errb := runTuner(t, "eval", "search", "--quick", "--strategies", "random", "--seeds", "2", "--trials", "8",
			"--samples", "30", "--refine", "5", "--out", out); code != 0 {
			t.Fatalf("eval search: exit %d: %s", code, errb)
		}
	}
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte(`{"summaries":[{"scenario":"llama8b-h100-chat","strategy":"random"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	runCLICases(t, []cliCase{
		{"same runs", []string{"eval", "compare", a, filepath.Join(b, "report.json")}, 0,
			[]string{"| random | HV@8 | **all** | 2 |", "| random | HV@4 | llama8b-h100-chat | 2 |", "+0.0000 ± 0.0000 | 1 | 0 / 0 |"}, nil},
		{"JSON", []string{"eval", "compare", "--json", a, b}, 0, []string{`"figure": "HV@8"`, `"p": 1`}, nil},
		{"one report", []string{"eval", "compare", a}, 2, nil, []string{"two reports"}},
		{"missing report", []string{"eval", "compare", a, filepath.Join(dir, "nope")}, 2, nil, []string{"nope"}},
		{"report without per-seed figures", []string{"eval", "compare", old, b}, 2, nil, []string{"no per-seed figures"}},
	})
}

// TestEvalWorkloadsCommand: bad input is a usage error before any engine
// starts (the measurement itself is sim's TestShippedWorkloadStopsEarly's).
func TestEvalWorkloadsCommand(t *testing.T) {
	sim := filepath.Join(t.TempDir(), "vllm-sim")
	if err := os.WriteFile(sim, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runCLICases(t, []cliCase{
		{"bad target", []string{"eval", "workloads", "--vllm-sim", sim, "--target", "Llama-3.1-8B"}, 2, nil, []string{"MODEL:GPU[:GPUS]"}},
		{"bad GPU count", []string{"eval", "workloads", "--vllm-sim", sim, "--target", "Llama-3.1-8B:H100-80GB:0"}, 2, nil, []string{"positive integer"}},
		{"unknown model", []string{"eval", "workloads", "--vllm-sim", sim, "--target", "Nope:H100-80GB"}, 2, nil, []string{"Nope"}},
		{"unknown workload", []string{"eval", "workloads", "--vllm-sim", sim, "--workloads", "nope"}, 2, nil, []string{"nope"}},
		{"zero time scale", []string{"eval", "workloads", "--vllm-sim", sim, "--time-scale", "0"}, 2, nil, []string{"time scale"}},
		{"stray argument", []string{"eval", "workloads", "extra"}, 2, nil, []string{"no arguments"}},
	})
}

// TestEvalVerdict: `eval verdict` runs real sim-virtual searches on the
// simulated host and writes its report as Markdown and JSON; a host that
// ignores every flag gives no significant gain.
func TestEvalVerdict(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errb := runTuner(t, "eval", "verdict", "--seeds", "1", "--trials", "4", "--finalists", "1", "--repeats", "2", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	if !strings.Contains(stdout, "| flags ignored | 1 | 0 |") || !strings.Contains(stdout, "| non-default 5% faster | 1 |") {
		t.Fatalf("report:\n%s", stdout)
	}
	md, err := os.ReadFile(filepath.Join(out, "verdict.md"))
	if err != nil || string(md) != stdout {
		t.Fatalf("verdict.md (%v) differs from stdout", err)
	}
	var rep eval.VerdictEval
	if b, err := os.ReadFile(filepath.Join(out, "verdict.json")); err != nil || json.Unmarshal(b, &rep) != nil || len(rep.Rows) != 2 {
		t.Fatalf("verdict.json: %v %+v", err, rep)
	}
	if code, _, errb := runTuner(t, "eval", "verdict", "--speedup", "0.9"); code != exitUsage || !strings.Contains(errb, "--speedup 0.9") {
		t.Fatalf("bad speedup: exit %d %s", code, errb)
	}
}
