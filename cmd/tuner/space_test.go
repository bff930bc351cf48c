package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runTuner runs the CLI in-process and returns exit code, stdout, stderr.
func runTuner(t testing.TB, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"tuner"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// cliCase is one command line and what it must print and exit with.
type cliCase struct {
	name   string
	args   []string
	code   int
	stdout []string // substrings of standard output
	stderr []string // substrings of standard error
}

// runCLICases runs each case in-process as a subtest.
func runCLICases(t *testing.T, tests []cliCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := runTuner(t, tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, out, errs)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errs)
				}
			}
		})
	}
}

func TestSpaceCommand(t *testing.T) {
	t.Setenv("TUNER_DB", filepath.Join(t.TempDir(), "none.db")) // no history: static pruning only
	tests := []cliCase{
		{"default", []string{"space"}, 0, []string{"max_num_seqs", "--max-num-batched-tokens", "1024 if gpu.memory_gib >= 70", "chunked-prefill-budget"}, nil},
		{"resolved A100", []string{"space", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "A100-80GB"}, 0, []string{"resolved for Llama-3.1-8B on 1x A100-80GB", "256 ", "pruning: none (no evidence to prune on)"}, nil},
		{"static memory pruning", []string{"space", "--model", "Llama-3.1-70B", "--gpu", "H100-80GB", "--gpus", "4", "--max-model-len", "8192"}, 0,
			[]string{"0 trials of history", "of the tuned volume removed", "static memory: TP 1 cannot fit (vLLM's default only), TP 2 needs >= 0.8"}, nil},
		{"no prune", []string{"space", "--model", "Llama-3.1-70B", "--gpu", "H100-80GB", "--gpus", "4", "--no-prune"}, 0, []string{"pruning: none (pruning disabled)"}, nil},
		{"bad slo", []string{"space", "--model", "Llama-3.1-8B", "--gpu", "H100-80GB", "--slo", "ttft_p99<=fast"}, 2, nil, []string{"--slo"}},
		{"bad latency", []string{"space", "--model", "Llama-3.1-8B", "--gpu", "H100-80GB", "--latency", "speed"}, 2, nil, []string{"--latency"}},
		{"bad file names the line", []string{"space", "--file", "../../spaces/testdata/bad-min-gt-max.yaml"}, 2, nil, []string{"bad-min-gt-max.yaml:4:", "min 16384 > max 4096"}},
		{"unknown key names the line", []string{"space", "--file", "../../spaces/testdata/bad-unknown-key.yaml"}, 2, nil, []string{"bad-unknown-key.yaml:4:", "maxx"}},
		{"missing file", []string{"space", "--file", "nope.yaml"}, 2, nil, []string{"nope.yaml"}},
		{"unknown flag", []string{"space", "--bogus"}, 2, nil, []string{"bogus"}},
		{"model without gpu", []string{"space", "--model", "Llama-3.1-8B"}, 2, nil, []string{"--model and --gpu go together"}},
		{"unknown gpu", []string{"space", "--model", "Llama-3.1-8B", "--gpu", "TPU"}, 2, nil, []string{"unknown profile", "H100-80GB"}},
		{"stray argument", []string{"space", "extra"}, 2, nil, []string{"no arguments"}},
		{"weights cannot fit", []string{"space", "--model", "Llama-3.1-70B", "--gpu", "H100-80GB"}, 2, nil, []string{"131.4 GiB of weights", "use --gpus 2"}},
		{"max-model-len below the range", []string{"space", "--model", "Llama-3.1-8B", "--gpu", "H100-80GB", "--max-model-len", "127"}, 2, nil, []string{"--max-model-len 127 outside 128..131072"}},
		{"max-model-len at the bottom", []string{"space", "--model", "Llama-3.1-8B", "--gpu", "H100-80GB", "--max-model-len", "128", "--no-prune"}, 0, []string{"resolved for"}, nil},
		{"version", []string{"--version"}, 0, []string{"tuner version"}, nil},
		{"unknown command", []string{"frobnicate"}, 2, nil, nil},
	}
	runCLICases(t, tests)
}

func TestSpaceJSON(t *testing.T) {
	t.Setenv("TUNER_DB", filepath.Join(t.TempDir(), "none.db"))
	code, out, errs := runTuner(t, "space", "--json", "--model", "Llama-3.1-70B", "--gpu", "H100", "--gpus", "4")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s struct {
		Params []struct {
			Name    string          `json:"name"`
			Values  []float64       `json:"values"`
			Default json.RawMessage `json:"default"`
		} `json:"params"`
		Pruning struct {
			VolumeRemoved float64 `json:"volume_removed"`
		} `json:"pruning"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if s.Pruning.VolumeRemoved <= 0 {
		t.Errorf("pruning report: volume removed %v, want > 0 (TP 2 at low utilisation cannot hold a 70B model)", s.Pruning.VolumeRemoved)
	}
	for _, p := range s.Params {
		if p.Name == "tensor_parallel_size" && len(p.Values) != 3 {
			t.Errorf("tp levels on 4 GPUs: %v", p.Values)
		}
		if p.Name == "max_num_seqs" && string(p.Default) != "1024" {
			t.Errorf("max_num_seqs default %s", p.Default)
		}
	}
}

// A model the catalog lacks is read from its config.json in the Hugging
// Face cache (HF_HOME); without one the error points at --profiles.
func TestSpaceModelFromHFCache(t *testing.T) {
	t.Setenv("TUNER_DB", filepath.Join(t.TempDir(), "none.db"))
	hf := t.TempDir()
	t.Setenv("HF_HOME", hf)
	t.Setenv("HF_HUB_CACHE", "")
	b, err := os.ReadFile("../../spaces/testdata/hf/Qwen3-30B-A3B/config.json")
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(hf, "hub", "models--Qwen--Qwen3-30B-A3B", "snapshots", "ad44e77")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	runCLICases(t, []cliCase{
		{"from the cache", []string{"space", "--model", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--no-prune"}, 0,
			[]string{"resolved for Qwen/Qwen3-30B-A3B on 1x H100-80GB"}, []string{"not in the catalog, facts read from", "48 layers, 30.53B parameters"}},
		{"nowhere", []string{"space", "--model", "acme/unknown-7B", "--gpu", "H100"}, 2, nil,
			[]string{"unknown profile", "no config.json for acme/unknown-7B in the Hugging Face cache", "--profiles"}},
		{"new catalog profile", []string{"space", "--model", "mistralai/Mistral-7B-Instruct-v0.3", "--gpu", "L4", "--no-prune"}, 0,
			[]string{"resolved for Mistral-7B-v0.3 on 1x L4-24GB"}, nil},
	})
}
