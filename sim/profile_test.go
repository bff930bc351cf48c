package sim

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/vllm-tuner/tuner/spaces"
)

func TestUserProfileFallbackCalibration(t *testing.T) {
	cat, err := spaces.LoadCatalogFile("testdata/profiles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	g, err := cat.GPU("B200-180GB")
	if err != nil {
		t.Fatal(err)
	}
	if c := CalibFor(g); c != defaultCalib() {
		t.Errorf("user GPU calibration %+v, want the fallback", c)
	}
	m, _ := cat.Model("Llama-3.1-8B")
	tg := spaces.Target{Model: m, GPU: g, GPUCount: 1, MaxModelLen: 8192}
	b200 := mustOK(t, run(t, tg, defaults(t, tg), closedWorkload(1024, 64, 1, 2)))
	h := h100(t, 1)
	ref := mustOK(t, run(t, h, defaults(t, h), closedWorkload(1024, 64, 1, 2)))
	t.Logf("batch-1 TPOT: B200 %.2f ms, H100 %.2f ms", b200.TPOT.Mean, ref.TPOT.Mean)
	if b200.TPOT.Mean >= ref.TPOT.Mean*0.6 {
		t.Errorf("a GPU with 2.4x the bandwidth should decode much faster")
	}
	// The server takes the same file.
	o, err := ParseServeArgs([]string{"Llama-3.1-8B", "--sim-profiles", "testdata/profiles.yaml", "--gpu", "B200-180GB",
		"--startup-scale", "0", "--host", "127.0.0.1", "--port", "0", "--disable-log-stats"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ready := false
	err = Serve(ctx, o, io.Discard, OnReady(func(string) { ready = true; cancel() }))
	if err != nil || !ready {
		t.Errorf("serve with a user profile: err %v, ready %v", err, ready)
	}
}

// A model the catalog lacks starts from its config.json in the Hugging Face
// cache, as vLLM loads it; a MoE's step computes with its active parameters.
func TestServeModelFromHFCache(t *testing.T) {
	b, err := os.ReadFile("../spaces/testdata/hf/Qwen3-30B-A3B/config.json")
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	snap := filepath.Join(cache, "models--Qwen--Qwen3-30B-A3B", "snapshots", "ad44e77")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snap, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := ParseServeArgs([]string{"Qwen/Qwen3-30B-A3B", "--startup-scale", "0", "--host", "127.0.0.1", "--port", "0", "--disable-log-stats", "--max-model-len", "8192"})
	if err != nil {
		t.Fatal(err)
	}
	for _, cacheDir := range []string{cache, t.TempDir()} {
		o.HFCache = cacheDir
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ready := false
		err = Serve(ctx, o, io.Discard, OnReady(func(string) { ready = true; cancel() }))
		cancel()
		if found := cacheDir == cache; found != (err == nil && ready) {
			t.Errorf("cache %s (has the model: %v): err %v, ready %v", cacheDir, found, err, ready)
		}
	}
	// Dense vs MoE: the same facts with 30.5B active parameters decode slower.
	m, _, err := spaces.DefaultCatalog().ModelOrHF("Qwen/Qwen3-30B-A3B", cache)
	if err != nil {
		t.Fatal(err)
	}
	h := h100(t, 1)
	moe := spaces.Target{Model: m, GPU: h.GPU, GPUCount: 1, MaxModelLen: 8192}
	dense := moe
	dense.Model.ActiveParamsB, dense.Model.Experts, dense.Model.ExpertsPerToken = 0, 0, 0
	w := closedWorkload(2048, 16, 8, 16)
	rm := mustOK(t, run(t, moe, defaults(t, moe), w))
	rd := mustOK(t, run(t, dense, defaults(t, dense), w))
	t.Logf("TTFT mean: MoE %.1f ms, same weights dense %.1f ms", rm.TTFT.Mean, rd.TTFT.Mean)
	if rm.TTFT.Mean >= rd.TTFT.Mean {
		t.Errorf("prefill of a 3.3B-active MoE should be faster than a 30.5B dense model")
	}
}
