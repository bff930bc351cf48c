package spaces

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readHF(t testing.TB, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "hf", dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// facts drops the names, which a config.json does not carry.
func facts(m Model) Model { m.Name, m.Aliases = "", nil; return m }

// A model read from its config.json (as Hugging Face publishes it) has the
// facts of its catalog profile, so a model the catalog lacks is described
// the same way as one it has.
func TestParseHFConfigAgreesWithCatalog(t *testing.T) {
	cat := DefaultCatalog()
	tests := []struct{ dir, profile string }{
		{"Llama-3.1-8B-Instruct", "Llama-3.1-8B"},
		{"Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-Instruct-v0.3"},
		{"Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-Instruct-v0.1"},
		{"Qwen2.5-32B-Instruct", "Qwen/Qwen2.5-32B-Instruct"},
		{"Qwen1.5-MoE-A2.7B-Chat", "Qwen/Qwen1.5-MoE-A2.7B-Chat"},
		{"Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4"},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			m, err := ParseHFConfig("config.json", tt.dir, readHF(t, tt.dir))
			if err != nil {
				t.Fatal(err)
			}
			want, err := cat.Model(tt.profile)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(facts(m), facts(want)) {
				t.Errorf("config.json facts\n %+v\ncatalog\n %+v", facts(m), facts(want))
			}
		})
	}
}

// A MoE with head_dim and moe_intermediate_size (Qwen3-30B-A3B: 30.5B
// parameters, 3.3B active, as its model card says).
func TestParseHFConfigMoE(t *testing.T) {
	m, err := ParseHFConfig("config.json", "Qwen/Qwen3-30B-A3B", readHF(t, "Qwen3-30B-A3B"))
	if err != nil {
		t.Fatal(err)
	}
	if m.ParamsB != 30.53 || m.ActiveParamsB != 3.35 || m.Experts != 128 || m.ExpertsPerToken != 8 || m.HeadDim != 128 || m.KVHeads != 4 || m.MaxPositionEmbeddings != 40960 {
		t.Errorf("%+v", m)
	}
	if m.ActiveParams() != 3.35 || (Model{ParamsB: 8}).ActiveParams() != 8 {
		t.Error("ActiveParams")
	}
}

// Errors locate the problem (file, line, field) and never quote the file:
// a path given by mistake (a secrets file) must not end up in a log.
func TestParseHFConfigErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"not json", "root:$6$secretsalt$hash:19000:0:99999:7:::\n", "cfg.json:1: not a JSON config.json"},
		{"bad type", "{\n\"num_hidden_layers\": \"secret-value\"\n}", "cfg.json:2: num_hidden_layers: wrong type"},
		{"missing layers", `{"hidden_size": 4096}`, "num_hidden_layers: missing"},
		{"kv heads", `{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 128, "vocab_size": 10, "max_position_embeddings": 64}`, "num_key_value_heads"},
		{"dtype", `{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 10, "max_position_embeddings": 64, "torch_dtype": "int3"}`, "torch_dtype: unsupported dtype"},
		{"mla", `{"num_hidden_layers": 61, "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048, "vocab_size": 129280, "max_position_embeddings": 163840, "kv_lora_rank": 512, "n_routed_experts": 256, "num_experts_per_tok": 8}`, "not modelled"},
		{"experts per token alone", `{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 10, "max_position_embeddings": 64, "num_experts_per_tok": 2}`, "num_experts_per_tok: experts per token without"},
		{"experts", `{"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "vocab_size": 10, "max_position_embeddings": 64, "num_local_experts": 4, "num_experts_per_tok": 5}`, "num_experts_per_tok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHFConfig("cfg.json", "m", []byte(tt.body))
			var fe *FileError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want a FileError with %q", err, tt.want)
			}
			for _, secret := range []string{"secretsalt", "secret-value", "int3"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error quotes the file: %v", err)
				}
			}
		})
	}
}

func TestFindHFConfig(t *testing.T) {
	cache := t.TempDir()
	llama := readHF(t, "Llama-3.1-8B-Instruct")
	write := func(p string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	repo := filepath.Join(cache, "models--mistralai--Mistral-7B-Instruct-v0.3")
	write(filepath.Join(repo, "snapshots", "old", "config.json"), llama) // not the one refs/main names
	write(filepath.Join(repo, "snapshots", "e0bc86c", "config.json"), readHF(t, "Mistral-7B-Instruct-v0.3"))
	write(filepath.Join(repo, "refs", "main"), []byte("e0bc86c\n"))
	write(filepath.Join(cache, "models--acme--no-ref", "snapshots", "1", "config.json"), llama)
	local := filepath.Join(t.TempDir(), "my-model")
	write(filepath.Join(local, "config.json"), readHF(t, "Qwen2.5-32B-Instruct"))

	cat := DefaultCatalog()
	tests := []struct {
		model, wantName, wantSource string
		wantLayers                  int
		wantErr                     []string
	}{
		{model: "Llama-3.1-8B", wantName: "Llama-3.1-8B", wantSource: "catalog", wantLayers: 32},
		{model: "mistralai/Mistral-7B-Instruct-v0.3", wantName: "Mistral-7B-v0.3", wantSource: "catalog", wantLayers: 32},
		{model: local, wantName: "my-model", wantSource: filepath.Join(local, "config.json"), wantLayers: 64},
		{model: "acme/no-ref", wantName: "acme/no-ref", wantSource: filepath.Join(cache, "models--acme--no-ref", "snapshots", "1", "config.json"), wantLayers: 32},
		{model: "acme/missing", wantErr: []string{"unknown profile", "no config.json for acme/missing in the Hugging Face cache", "--profiles"}},
		{model: "../etc", wantErr: []string{"--profiles"}},
		{model: "./no-such-dir", wantErr: []string{"no config.json: no directory ./no-such-dir", "--profiles"}},
		{model: "a/b/c", wantErr: []string{"not an ORG/NAME id"}},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			m, src, err := cat.ModelOrHF(tt.model, cache)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("found %+v", m)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("%q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil || m.Name != tt.wantName || src != tt.wantSource || m.Layers != tt.wantLayers {
				t.Fatalf("got %s %d from %s, %v", m.Name, m.Layers, src, err)
			}
		})
	}
	// The snapshot refs/main names wins over another one.
	p, err := FindHFConfig("mistralai/Mistral-7B-Instruct-v0.3", cache)
	if err != nil || !strings.Contains(p, "e0bc86c") {
		t.Errorf("FindHFConfig = %s, %v", p, err)
	}
}

func TestHFCacheDir(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}, "/a"},
		{map[string]string{"HF_HOME": "/b"}, "/b/hub"},
		{map[string]string{"XDG_CACHE_HOME": "/c"}, "/c/huggingface/hub"},
		{nil, "/home/u/.cache/huggingface/hub"},
	}
	for _, tt := range tests {
		if got := HFCacheDir(env(tt.env), "/home/u"); got != tt.want {
			t.Errorf("%v: %s, want %s", tt.env, got, tt.want)
		}
	}
}

func FuzzParseHFConfig(f *testing.F) {
	for _, d := range []string{"Llama-3.1-8B-Instruct", "Mixtral-8x7B-Instruct-v0.1", "Qwen3-30B-A3B"} {
		f.Add(readHF(f, d))
	}
	f.Add([]byte(`{"text_config": {"num_hidden_layers": 1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseHFConfig("f.json", "m", b)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("not a FileError: %v", err)
			}
			return
		}
		if m.Layers <= 0 || m.KVHeads <= 0 || m.Heads%m.KVHeads != 0 || m.HeadDim <= 0 || m.DtypeBytes <= 0 || m.ActiveParams() > m.ParamsB+1e-9 {
			t.Fatalf("accepted inconsistent facts %+v", m)
		}
	})
}
