package tuner

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const (
	specModel = "meta-llama/Llama-3.1-8B-Instruct"
	specGPU   = "H100-80GB"
)

func TestSearchSpecValidate(t *testing.T) {
	ok := func(s *SearchSpec) { s.Model, s.GPU, s.Engine = specModel, specGPU, EngineSimVirtual }
	zero := 0
	negDur := Duration(-time.Second)
	tests := []struct {
		name string
		edit func(*SearchSpec)
		want string // "" = valid
	}{
		{"valid", func(s *SearchSpec) {}, ""},
		{"engine", func(s *SearchSpec) { s.Engine = "tgi" }, `--engine "tgi": want vllm, sim or sim-virtual`},
		{"no target", func(s *SearchSpec) { s.Model, s.GPU = "", "" }, "search needs --model and --gpu"},
		{"gpu without detection", func(s *SearchSpec) { s.GPU = "" }, "--model and --gpu go together"},
		{"gpus", func(s *SearchSpec) { s.GPUs = 0 }, "--gpus must be >= 1"},
		{"max model len", func(s *SearchSpec) { n := 10; s.MaxModelLen = &n }, "--max-model-len 10 outside"},
		{"engine version", func(s *SearchSpec) { s.EngineVersion = "0.0.bogus" }, "not a vLLM version"},
		{"requests", func(s *SearchSpec) { s.Requests = &zero }, "--requests must be >= 1"},
		{"duration", func(s *SearchSpec) { s.Duration = &negDur }, "--duration must be > 0"},
		{"slo", func(s *SearchSpec) { s.SLO = "ttft_p99<<5" }, "--slo:"},
		{"latency", func(s *SearchSpec) { s.Latency = "speed" }, "--latency:"},
		{"sampler", func(s *SearchSpec) { s.Sampler = "grid" }, "--sampler:"},
		{"trials", func(s *SearchSpec) { s.Trials = -1 }, "--trials -1: must be >= 0"},
		{"unbounded", func(s *SearchSpec) { s.Trials, s.Budget, s.Patience = 0, 0, 0 }, "unbounded search"},
		{"startup", func(s *SearchSpec) { s.StartupTimeout = 0 }, "--startup-timeout 0s: must be > 0"},
		{"log cap", func(s *SearchSpec) { s.EngineLogMiB = 0 }, "--engine-log-mib 0: must be > 0"},
		{"owned flag", func(s *SearchSpec) { s.EngineArgs = []string{"--host 0.0.0.0"} }, "the tuner sets --host and --port"},
		{"env", func(s *SearchSpec) { s.EngineEnv = []string{"PATH=/tmp"} }, "--engine-env PATH: not on the allowlist"},
		{"enqueue", func(s *SearchSpec) { s.Enqueue = []string{"--max-num-seqs 'x"} }, "--enqueue"},
		{"surrogate both", func(s *SearchSpec) { s.NoSurrogate, s.Surrogate = true, "m" }, "--surrogate and --no-surrogate exclude each other"},
		{"vllm missing", func(s *SearchSpec) { s.Engine, s.VLLM = EngineVLLM, "/nonexistent/vllm" }, "--engine vllm: /nonexistent/vllm not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := DefaultSearchSpec()
			ok(&s)
			tt.edit(&s)
			err := s.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ue UsageError
			if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate: %v; want a usage error with %q", err, tt.want)
			}
		})
	}
}

// TestSearchSpecJSON: the service reads the spec the CLI fills, durations
// as Go duration text; a resolved spec keys the same study either way.
func TestSearchSpecJSON(t *testing.T) {
	s := DefaultSearchSpec()
	s.Model, s.GPU, s.Engine, s.SLO = specModel, specGPU, EngineSimVirtual, "tpot_p99<=50ms"
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"budget":"8h0m0s"`) {
		t.Fatalf("budget not as duration text: %s", raw)
	}
	back := DefaultSearchSpec()
	if err := json.Unmarshal([]byte(`{"model":"`+specModel+`","gpu":"`+specGPU+`","engine":"sim-virtual","slo":"tpot_p99<=50ms","budget":"8h"}`), &back); err != nil {
		t.Fatal(err)
	}
	a, err := s.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	b, err := back.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if a.Key.ID() != b.Key.ID() || a.Loop.Budget != 8*time.Hour || b.Loop.Budget != 8*time.Hour {
		t.Fatalf("study %s vs %s, budgets %s %s", a.Key.ID(), b.Key.ID(), a.Loop.Budget, b.Loop.Budget)
	}
	var d Duration
	for _, in := range []string{`"90s"`, `90000000000`} {
		if err := json.Unmarshal([]byte(in), &d); err != nil || d.Std() != 90*time.Second {
			t.Fatalf("%s: %v %v", in, d, err)
		}
	}
	if err := json.Unmarshal([]byte(`"soon"`), &d); err == nil {
		t.Fatal("bad duration accepted")
	}
}
