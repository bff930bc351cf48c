package main

import (
	"encoding/json"
	"testing"
)

func TestEstimateCommand(t *testing.T) {
	runCLICases(t, []cliCase{
		{name: "table", args: []string{"estimate", "--model", "Llama-3.1-8B", "--gpu", "H100-80GB,L4", "--gpus", "2", "--max-model-len", "8192"},
			stdout: []string{"ESTIMATE from the simulator's calibrated model", "Llama-3.1-8B, requests of 1024+256 tokens", "H100-80GB  1   yes", "L4-24GB    2   yes", "@8192"}},
		{name: "does not fit", args: []string{"estimate", "--model", "Llama-3.1-70B", "--gpu", "L4", "--max-model-len", "4096"},
			stdout: []string{"L4-24GB  1   no", "does not fit: L4-24GB TP 1: torch.OutOfMemoryError"}},
		{name: "no gpu", args: []string{"estimate", "--model", "Llama-3.1-8B"}, code: 2, stderr: []string{"needs --model and --gpu"}},
		{name: "unknown gpu", args: []string{"estimate", "--model", "Llama-3.1-8B", "--gpu", "Z80"}, code: 2, stderr: []string{"Z80"}},
		{name: "request too long", args: []string{"estimate", "--model", "tiny-llama", "--gpu", "H100-80GB", "--input-len", "4000"}, code: 2, stderr: []string{"exceeds max_model_len 2048"}},
	})
	code, out, errs := runTuner(t, "estimate", "--model", "tiny-llama", "--gpu", "H100-80GB", "--input-len", "256", "--output-len", "64", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Estimate bool
		Rows     []struct {
			Fits     bool
			KVTokens int `json:"kv_cache_tokens"`
			Peak     *struct {
				OutputTokS float64 `json:"output_tok_s"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || !doc.Estimate || len(doc.Rows) != 1 || !doc.Rows[0].Fits || doc.Rows[0].KVTokens <= 0 || doc.Rows[0].Peak == nil || doc.Rows[0].Peak.OutputTokS <= 0 {
		t.Fatalf("json %v: %s", err, out)
	}
}
