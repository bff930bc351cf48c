package spaces

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func resolveFor(t *testing.T, model, gpu string, gpus int, edit func(*Target)) *Space {
	t.Helper()
	tg, err := DefaultCatalog().Target(model, gpu, gpus)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&tg)
	}
	return resolved(t, tg)
}

// The combinations vLLM refuses (or that mean nothing) are ruled out by a
// named constraint; the ones it runs pass.
func TestQuantizationMoELoRAConstraints(t *testing.T) {
	tests := []struct {
		name, model, gpu string
		gpus             int
		tenants, rank    int
		cfg              map[string]Value
		want             string // constraint name, "" for admissible
	}{
		{"fp8 on a bf16 checkpoint", "Llama-3.1-8B", "H100", 1, 0, 0, map[string]Value{"quantization": StringValue("fp8")}, ""},
		{"fp8 weight-only on A100", "Llama-3.1-8B", "A100-80GB", 1, 0, 0, map[string]Value{"quantization": StringValue("fp8")}, ""},
		{"awq needs an awq checkpoint", "Llama-3.1-8B", "H100", 1, 0, 0, map[string]Value{"quantization": StringValue("awq")}, "quantization-checkpoint"},
		{"gptq needs a gptq checkpoint", "Llama-3.1-8B", "H100", 1, 0, 0, map[string]Value{"quantization": StringValue("gptq_marlin")}, "quantization-checkpoint"},
		{"awq_marlin on an awq checkpoint", "Llama-3.1-8B-AWQ", "H100", 1, 0, 0, map[string]Value{"quantization": StringValue("awq_marlin")}, ""},
		{"fp8 on an awq checkpoint", "Llama-3.1-8B-AWQ", "H100", 1, 0, 0, map[string]Value{"quantization": StringValue("fp8")}, "quantization-checkpoint"},
		{"gptq on an awq checkpoint", "Llama-3.1-8B-AWQ", "H100", 1, 0, 0, map[string]Value{"quantization": StringValue("gptq")}, "quantization-checkpoint"},
		{"awq kernel in bfloat16", "Llama-3.1-8B-AWQ", "H100", 1, 0, 0, map[string]Value{"quantization": StringValue("awq"), "dtype": StringValue("bfloat16")}, "legacy-kernel-dtype"},
		{"awq kernel in float16", "Llama-3.1-8B-AWQ", "H100", 1, 0, 0, map[string]Value{"quantization": StringValue("awq"), "dtype": StringValue("float16")}, ""},
		{"expert parallel on a dense model", "Llama-3.1-8B", "H100", 2, 0, 0, map[string]Value{"enable_expert_parallel": BoolValue(true), "data_parallel_size": IntValue(2)}, "expert-parallel-moe"},
		{"expert parallel on one GPU", "Mixtral-8x7B", "H100", 2, 0, 0, map[string]Value{"enable_expert_parallel": BoolValue(true)}, "expert-parallel-gpus"},
		{"expert parallel over DP 2", "Mixtral-8x7B", "H100", 2, 0, 0, map[string]Value{"enable_expert_parallel": BoolValue(true), "data_parallel_size": IntValue(2)}, ""},
		{"lora slots smaller than an adapter", "Llama-3.1-8B", "H100", 1, 2, 32, map[string]Value{"max_lora_rank": IntValue(16)}, "lora-rank-fits"},
		{"lora slots that hold the adapters", "Llama-3.1-8B", "H100", 1, 2, 32, map[string]Value{"max_lora_rank": IntValue(64), "max_loras": IntValue(2)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := resolveFor(t, tt.model, tt.gpu, tt.gpus, func(tg *Target) { tg.Tenants, tg.LoRARank = tt.tenants, tt.rank })
			// The constraints themselves (Resolve also drops the levels
			// they rule out for every config, so Validate may refuse the
			// value as out of range first).
			var failed []string
			env := s.env(NewConfig(tt.cfg))
			for _, c := range s.Constraints {
				ok, err := c.Expr.EvalBool(env)
				if err != nil {
					t.Fatalf("%s: %v", c.Name, err)
				}
				if !ok {
					failed = append(failed, c.Name)
				}
			}
			if got := strings.Join(failed, ","); got != tt.want {
				t.Fatalf("failed constraints %q, want %q", got, tt.want)
			}
			err := s.Validate(NewConfig(tt.cfg))
			if (err != nil) != (tt.want != "") || err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

// What is searched follows the target: the LoRA slots with tenants (their
// rank levels pruned below the largest adapter), expert parallelism for a
// MoE on several GPUs, the quantization kernels of a pre-quantized
// checkpoint only on request.
func TestTargetDependentParams(t *testing.T) {
	tuned := func(s *Space) []string {
		var out []string
		for _, p := range s.Tuned() {
			out = append(out, p.Name)
		}
		return out
	}
	dense := resolveFor(t, "Llama-3.1-8B", "H100", 1, nil)
	for _, n := range []string{"max_loras", "max_lora_rank", "enable_expert_parallel", "quantization", "dtype"} {
		if slices.Contains(tuned(dense), n) {
			t.Errorf("%s tuned for a dense model without tenants", n)
		}
		if _, ok := dense.Param(n); !ok {
			t.Errorf("%s unknown to the resolved space", n)
		}
	}
	lora := resolveFor(t, "Llama-3.1-8B", "H100", 1, func(tg *Target) { tg.Tenants, tg.LoRARank = 3, 32 })
	if got := tuned(lora); !slices.Contains(got, "max_loras") || !slices.Contains(got, "max_lora_rank") {
		t.Errorf("tuned with tenants: %v", got)
	}
	if p, _ := lora.Param("max_lora_rank"); slices.Contains(p.Values, 8) || !slices.Contains(p.Values, 32) {
		t.Errorf("max_lora_rank levels %v: want none below the rank 32 but vLLM's default", p.Values)
	}
	moe := resolveFor(t, "Mixtral-8x7B", "H100", 4, nil)
	if !slices.Contains(tuned(moe), "enable_expert_parallel") {
		t.Errorf("expert parallelism not tuned for a MoE on 4 GPUs: %v", tuned(moe))
	}
	// Opt in with a space file: the checkpoint's kernels are the levels.
	user, err := Parse("quant.yaml", []byte("params:\n  - name: quantization\n    tune: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := DefaultCatalog().Target("Llama-3.1-8B-AWQ", "H100", 1)
	rs, err := user.Resolve(tg)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := rs.Param("quantization")
	if !p.Tune || strings.Join(p.Choices, ",") != "auto,awq,awq_marlin" {
		t.Errorf("quantization for an AWQ checkpoint: tune %v choices %v", p.Tune, p.Choices)
	}
	tg, _ = DefaultCatalog().Target("Llama-3.1-8B", "H100", 1)
	rs, _ = user.Resolve(tg)
	if p, _ := rs.Param("quantization"); strings.Join(p.Choices, ",") != "auto,fp8" {
		t.Errorf("quantization for a bf16 checkpoint: %v", p.Choices)
	}
}

// quantization auto is vLLM's default and has no spelling: no flag.
func TestQuantizationAutoRendersNoFlag(t *testing.T) {
	c := NewConfig(map[string]Value{"quantization": StringValue("auto"), "max_num_seqs": IntValue(64)})
	if got := strings.Join(c.Flags(), " "); got != "--max-num-seqs 64" {
		t.Errorf("flags %q", got)
	}
	y, err := c.YAMLFor(DefaultEngineVersion)
	if err != nil || strings.Contains(y, "quantization") {
		t.Errorf("yaml %q, %v", y, err)
	}
	c = NewConfig(map[string]Value{"quantization": StringValue("fp8")})
	if got := strings.Join(c.Flags(), " "); got != "--quantization fp8" {
		t.Errorf("flags %q", got)
	}
}

// Weights shrink with the method's width; embeddings stay in the dtype.
func TestWeightBytesAs(t *testing.T) {
	cat := DefaultCatalog()
	m, _ := cat.Model("Llama-3.1-8B")
	awq, _ := cat.Model("Llama-3.1-8B-AWQ")
	embed := 2 * 128256 * 4096.0
	for _, tt := range []struct {
		name string
		got  float64
		want float64
	}{
		{"bf16", m.WeightBytes(), 8.03e9 * 2},
		{"fp8", m.WeightBytesAs("fp8"), (8.03e9-embed)*1 + embed*2},
		{"awq checkpoint", awq.WeightBytes(), (8.03e9-embed)*(0.5+2.0/128) + embed*2},
		{"awq_marlin = checkpoint", awq.WeightBytesAs("awq_marlin"), awq.WeightBytes()},
	} {
		if math.Abs(tt.got-tt.want) > 1 {
			t.Errorf("%s: %.0f, want %.0f", tt.name, tt.got, tt.want)
		}
	}
	if r := awq.WeightBytes() / m.WeightBytes(); r < 0.3 || r > 0.4 {
		t.Errorf("AWQ/bf16 weights %.2f, want about a third", r)
	}
}

// TestShardBytes: a GPU holds its TP rank's share of the weights; expert
// parallelism splits the routed experts over every GPU of the layout and
// leaves a dense model as it is.
func TestShardBytes(t *testing.T) {
	cat := DefaultCatalog()
	moe, _ := cat.Model("Mixtral-8x7B")
	dense, _ := cat.Model("Llama-3.1-8B")
	const total = 100.0
	experts := moe.ExpertShare() * total
	if experts <= 0 || experts >= total {
		t.Fatalf("Mixtral's expert share %.3f, want inside (0, 1)", moe.ExpertShare())
	}
	for _, tt := range []struct {
		name   string
		m      Model
		tp, dp int
		ep     bool
		want   float64
	}{
		{"one GPU", moe, 1, 1, false, total},
		{"TP 2", moe, 2, 1, false, total / 2},
		{"DP 2 copies the whole model", moe, 1, 2, false, total},
		{"DP 2 with expert parallelism", moe, 1, 2, true, total - experts/2},
		{"TP 2 x DP 2 with expert parallelism", moe, 2, 2, true, (total-experts)/2 + experts/4},
		{"dense model: expert parallelism changes nothing", dense, 1, 2, true, total},
	} {
		if got := tt.m.ShardBytes(total, tt.tp, tt.dp, tt.ep); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: %.4f, want %.4f", tt.name, got, tt.want)
		}
	}
}
