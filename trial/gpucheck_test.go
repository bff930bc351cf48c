//go:build cgo && linux && !nonvml

package trial

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"
)

// TestGPUCheck prints NVML readings through the trial sampler on a GPU
// machine (scripts/gpu-check.sh). It runs only with TRIAL_GPU_CHECK=1 and
// then fails when NVML is unavailable.
func TestGPUCheck(t *testing.T) {
	if os.Getenv("TRIAL_GPU_CHECK") == "" {
		t.Skip("set TRIAL_GPU_CHECK=1 on a GPU machine")
	}
	src, err := OpenNVML()
	if err != nil {
		t.Fatalf("OpenNVML: %v", err)
	}
	defer src.Close()
	id, err := src.Identity()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("identity: %+v", id)
	for i := range 3 {
		s, err := src.Sample()
		if err != nil {
			t.Fatalf("Sample: %v", err)
		}
		for _, d := range s {
			t.Logf("sample %d gpu %d: mem %.2f/%.2f GiB util %.0f%% power %.1f W energy %.1f J sm %.0f MHz temp %.0f C throttle %#x %v",
				i, d.Index, float64(d.MemUsed)/gib, float64(d.MemTotal)/gib, d.UtilPct, d.PowerW, d.EnergyJ, d.SMClockMHz, d.TempC, d.Throttle, ThrottleNames(d.Throttle))
		}
	}
	pids, err := src.Processes()
	t.Logf("processes holding GPU memory: %v (err %v)", pids, err)
	// One second of the 10 Hz sampler, summarised as a trial would.
	var r recorder
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r.sample(ctx, src, 100*time.Millisecond, nil, "", 0)
	tel, vram, vsrc, throttled := r.summary()
	b, _ := json.MarshalIndent(tel, "", "  ")
	t.Logf("telemetry over 1 s: %s\npeak VRAM %.2f GiB (%s), throttled %v", b, vram, vsrc, throttled)
	if tel.Samples < 5 || vsrc != "nvml" || tel.TotalMemoryGiB <= 0 {
		t.Errorf("sampler: %d samples, source %s, total %.1f GiB", tel.Samples, vsrc, tel.TotalMemoryGiB)
	}
}
