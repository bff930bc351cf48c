package sim

import (
	"context"
	"io"
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
