package sim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vllm-tuner/tuner/trial"
)

func TestParseLoRAModule(t *testing.T) {
	tests := []struct {
		in      string
		want    LoRAModule
		wantErr string
	}{
		{in: "sql=/adapters/sql", want: LoRAModule{Name: "sql", Path: "/adapters/sql"}},
		{in: `{"name": "chat", "path": "/a/chat", "base_model_name": "meta-llama/Llama-3.1-8B"}`, want: LoRAModule{Name: "chat", Path: "/a/chat", BaseModelName: "meta-llama/Llama-3.1-8B"}},
		{in: "sql", wantErr: "want name=path"},
		{in: "=path", wantErr: "want name=path"},
		{in: "a b=path", wantErr: "want name=path"},
		{in: `{"name": "x"}`, wantErr: "needs name and path"},
		{in: `{"name": "x", "path": "p", "rank": 8}`, wantErr: "invalid JSON"},
	}
	for _, tt := range tests {
		got, err := ParseLoRAModule(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: %+v, %v", tt.in, got, err)
		}
	}
}

func FuzzParseLoRAModule(f *testing.F) {
	for _, s := range []string{"a=b", `{"name":"a","path":"b"}`, "=", "{", `{"name":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseLoRAModule(s)
		if err == nil && (m.Name == "" || m.Path == "") {
			t.Fatalf("%q accepted without name or path: %+v", s, m)
		}
	})
}

// vllm serve's LoRA flags: nargs='+' modules, --no-enable-lora, the slots
// as engine parameters.
func TestParseServeArgsLoRA(t *testing.T) {
	o, err := ParseServeArgs([]string{"m", "--enable-lora", "--lora-modules", "a=/x", "b=/y", "--max-loras", "2", "--max-lora-rank", "32", "--max-cpu-loras", "4"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.LoRA.Enable || len(o.LoRA.Modules) != 2 || o.LoRA.Modules[1].Name != "b" || o.LoRA.MaxCPULoras != 4 ||
		o.Engine.Int("max_loras") != 2 || o.Engine.Int("max_lora_rank") != 32 {
		t.Errorf("%+v", o)
	}
	o, err = ParseServeArgs([]string{"m", "--enable-lora", "--no-enable-lora", "-q", "fp8", "--dtype", "half"})
	if err != nil || o.LoRA.Enable || o.Engine.Str("quantization") != "fp8" || o.Engine.Str("dtype") != "float16" {
		t.Errorf("%+v, %v", o, err)
	}
	for _, args := range [][]string{{"m", "--lora-modules"}, {"m", "--lora-modules", "nopath"}, {"m", "--quantization", "squeezellm"}} {
		var ae *ArgError
		if _, err := ParseServeArgs(args); !errors.As(err, &ae) {
			t.Errorf("%v: err %v, want an argparse error", args, err)
		}
	}
}

func adapterDir(t *testing.T, rank int) string {
	t.Helper()
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "adapter_config.json"), []byte(`{"r": `+itoa(rank)+`, "lora_alpha": 32, "target_modules": ["q_proj", "v_proj"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// The server lists each adapter as a model, serves requests naming it,
// answers an unknown model with vLLM's 404, and fails startup like vLLM
// for an adapter it cannot load or whose rank exceeds the slots.
func TestServeLoRAAdapters(t *testing.T) {
	sql, chat := adapterDir(t, 16), adapterDir(t, 8)
	base, _, _ := startServer(t, "tiny", "--gpu", "L4", "--enable-lora", "--max-loras", "2",
		"--lora-modules", "sql="+sql, "chat="+chat, "--time-scale", "0.05")
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID     string  `json:"id"`
			Root   string  `json:"root"`
			Parent *string `json:"parent"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 3 || models.Data[1].ID != "sql" || models.Data[1].Root != sql || models.Data[1].Parent == nil || *models.Data[1].Parent != "tiny" || models.Data[2].ID != "chat" {
		t.Errorf("/v1/models: %+v", models.Data)
	}
	code, evs := postSSE(t, base+"/v1/completions", `{"model":"sql","prompt":[1,2,3,4],"max_tokens":3,"ignore_eos":true,"stream":true}`)
	if code != 200 || len(evs) < 3 || !strings.Contains(evs[0].data, `"model":"sql"`) {
		t.Fatalf("adapter request: %d %v", code, evs)
	}
	resp, err = http.Post(base+"/v1/completions", "application/json", strings.NewReader(`{"model":"nope","prompt":"hi","max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	if resp.StatusCode != 404 || json.Unmarshal(b, &e) != nil || e.Error.Type != "NotFoundError" || e.Error.Code != 404 || e.Error.Message != "The model `nope` does not exist." {
		t.Errorf("unknown adapter: %d %s", resp.StatusCode, b)
	}
}

func TestLoRAStartupRefusals(t *testing.T) {
	big := adapterDir(t, 64)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--enable-lora", "--lora-modules", "a=" + big}, "LoRA rank 64 is greater than max_lora_rank 16."},
		{[]string{"--enable-lora", "--lora-modules", "a=" + filepath.Join(t.TempDir(), "missing")}, "No adapter found"},
		{[]string{"--lora-modules", "a=" + big}, "LoRA is not enabled"},
		{[]string{"--enable-lora", "--max-lora-rank", "24"}, "max_lora_rank (24) must be one of"},
		{[]string{"--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"}, "max_cpu_loras (2) must be >= max_loras (4)"},
	}
	for _, tt := range tests {
		o, err := ParseServeArgs(append([]string{"tiny", "--gpu", "L4"}, tt.args...))
		if err != nil {
			t.Fatal(err)
		}
		_, se := newServer(o, &vlog{w: io.Discard})
		if se == nil || !errors.Is(se, ErrInvalidArgument) || !strings.Contains(se.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, se, tt.want)
		}
	}
}

// tenantWorkload spreads a closed loop over n equally weighted adapters.
func tenantWorkload(n, conc, reqs int) trial.Workload {
	w := closedWorkload(512, 128, conc, reqs)
	for i := 0; i < n; i++ {
		w.Tenants = append(w.Tenants, trial.Tenant{Name: "t" + itoa(i), Weight: 1, Rank: 16})
	}
	return w
}

// The LoRA slots matter as in vLLM: one slot serializes the tenants (a step
// batches one adapter, the others wait and swap in), so throughput drops
// and the tenants' tails drift apart; each slot costs KV cache memory.
func TestLoRASlots(t *testing.T) {
	tg := testTarget(t, "Llama-3.1-8B", "H100", 1)
	w := tenantWorkload(4, 64, 400)
	one := run(t, tg, defaults(t, tg, "max_loras", 1), w)
	four := run(t, tg, defaults(t, tg, "max_loras", 4), w)
	base := run(t, tg, defaults(t, tg), closedWorkload(512, 128, 64, 400))
	for _, r := range []trial.Result{one, four, base} {
		if r.Status != trial.StatusOK {
			t.Fatalf("%s: %s", r.String(), r.Error)
		}
	}
	m1, m4, mb := one.Metrics(), four.Metrics(), base.Metrics()
	t.Logf("max_loras 1: %.0f tok/s fairness %+v; max_loras 4: %.0f tok/s fairness %+v; no LoRA %.0f tok/s; KV tokens %d / %d / %d",
		m1.OutputThroughput, *m1.Fairness, m4.OutputThroughput, *m4.Fairness, mb.OutputThroughput, one.KVCacheTokens, four.KVCacheTokens, base.KVCacheTokens)
	if len(m4.ByTenant) != 4 || m4.ByTenant["t0"].Completed == 0 || mb.ByTenant != nil {
		t.Errorf("per-tenant metrics: %d tenants with, %v without", len(m4.ByTenant), mb.ByTenant)
	}
	if !(m4.OutputThroughput > 1.5*m1.OutputThroughput) {
		t.Errorf("4 slots %.0f tok/s vs 1 slot %.0f: want much higher", m4.OutputThroughput, m1.OutputThroughput)
	}
	if !(mb.OutputThroughput > m4.OutputThroughput) {
		t.Errorf("LoRA kernels cost nothing: %.0f vs %.0f tok/s", m4.OutputThroughput, mb.OutputThroughput)
	}
	if !(four.KVCacheTokens < one.KVCacheTokens && one.KVCacheTokens < base.KVCacheTokens) {
		t.Errorf("KV tokens %d (4 slots) %d (1 slot) %d (no LoRA): slots take memory", four.KVCacheTokens, one.KVCacheTokens, base.KVCacheTokens)
	}
	if m4.Fairness.E2ELP95Ratio < 1 || m4.Fairness.E2ELP95Ratio > 1.3 {
		t.Errorf("equal tenants with a slot each: fairness %.2f, want about 1", m4.Fairness.E2ELP95Ratio)
	}
	// max_lora_rank pads every slot: more memory, slower kernels.
	r64 := run(t, tg, defaults(t, tg, "max_loras", 4, "max_lora_rank", 64), w)
	if !(r64.KVCacheTokens < four.KVCacheTokens && r64.Metrics().OutputThroughput < m4.OutputThroughput) {
		t.Errorf("rank 64: %d KV tokens %.0f tok/s vs rank 16: %d %.0f", r64.KVCacheTokens, r64.Metrics().OutputThroughput, four.KVCacheTokens, m4.OutputThroughput)
	}
}

// Swaps: with fewer slots than adapters each switch loads an adapter
// (from disk once, then from the CPU cache), least recently used first.
func TestLoRASwapLRU(t *testing.T) {
	tg := testTarget(t, "Llama-3.1-8B", "H100", 1)
	a, err := ResolveArgs(tg, defaults(t, tg, "max_loras", 2))
	if err != nil {
		t.Fatal(err)
	}
	a.EnableLoRA, a.MaxCPULoras = true, 3
	a.LoRAModules = []LoRAModule{{Name: "a", Rank: 8}, {Name: "b", Rank: 8}, {Name: "c", Rank: 8}}
	plan, se := PlanMemory(tg, a)
	if se != nil {
		t.Fatal(se)
	}
	e := NewEngine(tg, a, CalibFor(tg.GPU), plan)
	serve := func(adapter int) float64 {
		r := &Request{PromptLen: 16, OutputLen: 1, Adapter: adapter}
		e.Add(r)
		d, _ := e.Step()
		if !r.Done() {
			t.Fatalf("adapter %d request not done in one step", adapter)
		}
		return d
	}
	first := serve(1)
	again := serve(1)
	serve(2)
	serve(3) // evicts 1, the least recently used
	back := serve(1)
	if e.Stats.LoRALoads != 4 || e.Stats.LoRADiskLoads != 3 {
		t.Errorf("loads %d (disk %d), want 4 (3)", e.Stats.LoRALoads, e.Stats.LoRADiskLoads)
	}
	if !(first > again+loraDiskFixedS/2 && back > again && back < first) {
		t.Errorf("step times: first %.4fs, resident %.4fs, from CPU cache %.4fs", first, again, back)
	}
}
